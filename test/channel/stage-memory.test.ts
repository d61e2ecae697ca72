// Send staging is registered at the first write that needs it (outbound.ts #bigStage), not when
// the peer's grant takes effect: an idle end holds none. Under memory pressure the first large
// write gets as many staging slots as fit, down to one; with no room even for one the channel
// fails with `memory` (ERR_NO_MEMORY) at that write.
import { describe, expect, it } from 'vitest';
import { pattern, SimPair } from './sim.js';

const GRANT = { b: { ladder: [{ slotSize: 65536, slots: 4 }] } };

describe('send staging at the first large write', () => {
  const idle = (): number => {
    const probe = new SimPair(GRANT);
    probe.run(probe.now + 1000);
    return probe.a.core.fixed.length;
  };

  it('room for one 64 KiB slot of the four granted: the write goes through one slot, byte-exact', () => {
    const p = new SimPair({ ...GRANT, memA: idle() + 70_000 });
    p.run(p.now + 1000);
    expect(p.a.connected).toBe(true);
    const m = pattern(50_000, 3);
    p.send(p.a, m);
    p.run(p.now + 100);
    expect(p.a.core.failure).toBeUndefined();
    expect(p.b.received.length).toBe(1);
    expect(Buffer.from(p.b.received[0] as Uint8Array).equals(Buffer.from(m))).toBe(true);
  });

  it('no room for one slot: the channel fails with memory at that write', () => {
    const p = new SimPair({ ...GRANT, memA: idle() + 2048 });
    p.run(p.now + 1000);
    expect(p.a.connected).toBe(true);
    p.send(p.a, pattern(50_000, 3));
    p.run(p.now + 100);
    expect(p.a.core.failure).toMatchObject({ kind: 'memory' });
  });
});
