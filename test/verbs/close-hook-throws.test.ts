// A close hook (a feature above verbs letting go as its device closes) that throws does not stop
// the close half way: every other hook runs, the NIC closes, every wait settles ERR_CLOSED, and
// dev.close() then rejects with the hook's error. Before, the throw left the close there: the
// NIC open, a cq.wait pending for good.
import { describe, expect, it } from 'vitest';
import { openDevice } from '../../src/index.js';

describe('a close hook that throws', () => {
  it.each(['udp', 'tcp'] as const)('%s: the close completes, then rejects with its error', { timeout: 20_000 }, async (transport) => {
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0 });
    const waiting = dev.createCq({ depth: 4 }).wait(20_000).catch((e: unknown) => e);
    const ran: string[] = [];
    dev.onClose(() => {
      ran.push('first');
      throw new Error('a hook failed');
    });
    dev.onClose(() => void ran.push('second'));
    await expect(dev.close()).rejects.toThrow('a hook failed');
    expect(ran).toEqual(['first', 'second']);
    expect(dev.closed).toBe(true);
    expect(await waiting).toMatchObject({ code: 'ERR_CLOSED' });
  });
});
