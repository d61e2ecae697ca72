// The same call on a closed device gives the same outcome on workers 0
// and 1. dev.stats() after close returns the counters with the NIC inline and throws ERR_CLOSED
// with a NIC thread (docs/errors.md: ERR_CLOSED for "every call on a closed device"); now both
// throw ERR_CLOSED (found by an audit; failed before on workers 0).
import { describe, expect, it } from 'vitest';
import { openDevice } from '../../src/index.js';

function outcome(f: () => unknown): string {
  try {
    f();
    return 'returned';
  } catch (e) {
    return String((e as { code?: string }).code);
  }
}

describe.each(['udp', 'tcp'] as const)('%s', (transport) => {
  it('dev.stats() on a closed device: the same outcome on workers 0 and 1 (ERR_CLOSED)', { timeout: 30_000 }, async () => {
    const got: Record<number, string> = {};
    for (const workers of [0, 1]) {
      const d = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
      await d.close();
      got[workers] = outcome(() => d.stats());
    }
    expect(got).toEqual({ 0: 'ERR_CLOSED', 1: 'ERR_CLOSED' });
  });
});
