// `sabre stress --inject-fault` checks the checker: the run must fail. The model was corrupted at
// the first write's check, and the loop stopped at --duration's deadline, which runs from before
// the worker threads start: on a loaded machine a worker could begin past it, make no op at all,
// and the run passed (test/cli/cli.test.ts "an injected integrity failure" exited 0 so, once in a
// full run at load average 6-8). Now the deadline does not end a run with a fault to inject
// before its write is checked.
import { describe, expect, it } from 'vitest';
import stressTask from '../../src/cli/stress/worker.js';

describe('stress worker, --inject-fault', () => {
  it('a worker that starts past its deadline still writes once and fails the check; without the fault it makes no op', async () => {
    const task = { index: 0, seed: 7, qps: 2, ops: 100, maxSize: 256, transport: 'inproc' as const, counters: new SharedArrayBuffer(4 * 8) };
    const faulty = await stressTask({ ...task, deadline: Date.now() - 1, injectFault: true });
    expect(faulty.integrityFailures).toBeGreaterThanOrEqual(1);
    expect(Object.keys(faulty.mix)).toEqual(['write']); // writes only, until the fault was injected
    const clean = await stressTask({ ...task, deadline: Date.now() - 1, injectFault: false });
    expect(clean).toMatchObject({ ops: 0, integrityFailures: 0, errors: 0 });
  });
});
