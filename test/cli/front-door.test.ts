// What a perftest user meets first: a loopback run that says it is one (ib_write_bw with no host
// would wait for a client), the two-terminal form in --help, stress and perf on the same default
// transport, and a live line under -D on a terminal that stays out of pipes and --json.
import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loopbackNote } from '../../src/cli/perf/command.js';
import { bwRate, startLive } from '../../src/cli/perf/live.js';
import { Progress } from '../../src/cli/progress.js';
import { parseStress } from '../../src/cli/stress/options.js';
import { MAIN, sabre } from './helpers.js';

const NOTE = 'no host given: running both sides on loopback; for two terminals: sabre perf write_bw --server / sabre perf write_bw HOST';

describe('sabre perf without a host', () => {
  it('says on its first line that both sides run on loopback, and how to run two terminals', () => {
    expect(loopbackNote('write_bw')).toBe(NOTE);
    const r = sabre(['perf', 'write_bw', '-s', '64', '-n', '50']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe(NOTE);
  });

  it('keeps --json output pure and says nothing for inproc (one process by nature)', () => {
    const j = sabre(['perf', 'write_bw', '-s', '64', '-n', '50', '--json']);
    expect(j.code, j.stderr).toBe(0);
    expect(() => JSON.parse(j.stdout)).not.toThrow();
    const i = sabre(['perf', 'write_bw', '--transport', 'inproc', '-s', '64', '-n', '50']);
    expect(i.stdout).not.toContain('no host given');
  });

  it('--help shows the two-terminal form', () => {
    const h = sabre(['perf', '--help']).stdout;
    expect(h).toContain('sabre perf write_bw --server');
    expect(h).toContain('sabre perf write_bw HOST');
    expect(h).toMatch(/does not wait for a client/);
  });
});

describe('defaults agree', () => {
  it('stress runs on udp by default, as perf does', () => {
    expect(parseStress([]).transport).toBe('udp');
    expect(sabre(['stress', '--help']).stdout).toContain('(default udp, as sabre perf)');
  });
});

describe('the live line under -D', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('shows time run of the total and the rate over the last tick, from a timer or a poke', () => {
    vi.useFakeTimers();
    let t = 0;
    let n = 0;
    const writes: string[] = [];
    const progress = new Progress({ isTTY: true, write: (s) => writes.push(s) }, 0, () => t);
    const live = startLive(progress, { label: 'sabre perf write_bw: 1048576 B', totalS: 5, count: () => n, rate: bwRate(1 << 20) }, 250, () => t);
    t = 250;
    n = 100;
    vi.advanceTimersByTime(250);
    expect(writes.at(-1)).toBe('\r  sabre perf write_bw: 1048576 B  0.3 s of 5 s  400.00 MiB/s  400 msg/s\x1b[K');
    // A loop that starves the timers (inproc) pokes: drawn once the interval has passed.
    t = 400;
    live.poke();
    expect(writes).toHaveLength(1);
    t = 500;
    n = 150;
    live.poke();
    expect(writes.at(-1)).toContain('0.5 s of 5 s  200.00 MiB/s');
    live.stop();
  });

  it('draws nothing when the Progress is off (piped, --json)', () => {
    const writes: string[] = [];
    const progress = new Progress({ isTTY: false, write: (s) => writes.push(s) });
    const live = startLive(progress, { label: 'x', totalS: 1, count: () => 1, rate: String }, 1, () => 1e9);
    live.poke();
    live.stop();
    expect(writes).toEqual([]);
  });

  it('latency tests under -D run for the duration, not the default 1000 iterations', () => {
    const r = sabre(['perf', 'read_lat', '--transport', 'inproc', '-s', '64', '-D', '0.5', '--json']);
    expect(r.code, r.stderr).toBe(0);
    // Not a count: on a loaded machine half a second holds 1 200-14 000 round trips. The run
    // stopped at its duration, not at 1000 iterations: the samples add up to most of the 0.5 s.
    const row = (JSON.parse(r.stdout) as { results: { iterations: number; tAvg: number }[] }).results[0]!;
    expect(row.iterations).not.toBe(1000);
    expect(row.iterations * row.tAvg).toBeGreaterThan(0.25e6);
  });

  // script(1) gives the command a terminal, as a user's shell does.
  const hasScript = spawnSync('script', ['--version']).status === 0;
  it.skipIf(!hasScript)('on a terminal: perf -D draws the line; with --json it does not', () => {
    const tty = (args: string) => spawnSync('script', ['-qec', `${process.execPath} ${MAIN} ${args}`, '/dev/null'], { encoding: 'utf8', timeout: 60_000 });
    const shown = tty('perf write_bw --transport inproc -s 4096 -D 1');
    expect(shown.status, shown.stdout).toBe(0);
    expect(shown.stdout).toMatch(/sabre perf write_bw: 4096 B {2}\d\.\d s of 1 s {2}[\d.]+ MiB\/s/);
    const json = tty('perf write_bw --transport inproc -s 4096 -D 1 --json');
    expect(json.status, json.stdout).toBe(0);
    expect(json.stdout).not.toContain(' s of 1 s');
  });
});
