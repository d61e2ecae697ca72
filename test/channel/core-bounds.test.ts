// The channel core's local limits, sans-I/O (test/channel/sim.ts): an untrusted end (preauth)
// and the staging cap, whatever the peer asks or grants; a failing end tells its peer.
import { describe, expect, it } from 'vitest';
import { pattern, SimPair } from './sim.js';

const FIXED = 64 + 8 * 32 + 64;
const P0 = 256 * 4;

describe('channel core: an untrusted end (preauth)', () => {
  it('takes a message up to preauth.maxMessage in one small slot; its registration never passes phase 0 + that slot', () => {
    const p = new SimPair({ preauthB: 4096 });
    p.run(p.now + 1);
    p.send(p.a, pattern(3000, 1));
    p.send(p.a, pattern(4096, 2));
    p.run(p.now + 100);
    expect(p.b.received.map((m) => (m as Uint8Array).length)).toEqual([3000, 4096]);
    expect(p.b.core.stats()).toMatchObject({ authorized: false, eagerSize: 4096, slots: 1 });
    expect(p.b.mem.peak).toBeLessThanOrEqual(FIXED + P0 + 4096);
  });

  it('a message above preauth.maxMessage: refused (counted) before anything is registered for it; the sender is told', () => {
    const p = new SimPair({ preauthB: 4096 });
    p.run(p.now + 1);
    p.send(p.a, pattern(5000, 1));
    p.run(p.now + 100);
    // Its ENLARGE is denied; it comes as an OFFER, which is refused.
    expect(p.b.failed).toMatchObject({ kind: 'limit', message: expect.stringMatching(/OFFER \(rendezvous, 5000 bytes\) before authorization/) });
    expect(p.b.core.stats()).toMatchObject({ limitRefusals: 1, deniedEnlargements: 1 });
    expect(p.b.mem.peak).toBe(FIXED + P0);
    expect(p.a.failed).toMatchObject({ kind: 'aborted' });
  });

  it('a backlog of small messages past the one preauth slot is denied more slots, not refused: all arrive', () => {
    const p = new SimPair({ preauthB: 4096 });
    p.run(p.now + 1);
    const sent = Array.from({ length: 200 }, (_, i) => pattern(100 + i, i));
    for (const m of sent) p.send(p.a, m);
    p.run(p.now + 1000);
    expect(p.b.received.length).toBe(200);
    expect(p.b.failed).toBeUndefined();
    expect(p.b.core.stats().deniedEnlargements).toBeGreaterThan(0);
    expect(p.b.mem.peak).toBeLessThanOrEqual(FIXED + P0 + 4096);
  });

  it('an OFFER before authorization is refused; after authorize() the full ladder and rendezvous work', () => {
    const p = new SimPair({ preauthB: 4096 });
    p.run(p.now + 1);
    p.b.core.authorize(p.now);
    p.send(p.a, pattern(30_000, 1));
    p.send(p.a, pattern(100_000, 2));
    p.run(p.now + 100);
    expect(p.b.received.map((m) => (m as Uint8Array).length)).toEqual([30_000, 100_000]);
    expect(p.b.core.stats()).toMatchObject({ authorized: true, phase: 2 });

    const q = new SimPair({ preauthB: 4096 });
    q.run(q.now + 1);
    q.send(q.a, pattern(100_000, 3));
    q.run(q.now + 100);
    expect(q.b.failed).toMatchObject({ kind: 'limit', message: expect.stringMatching(/OFFER/) });
    expect(q.b.mem.peak).toBe(FIXED + P0);
  });
});

describe('channel core: staging is local policy', () => {
  it('a peer granting 4 x 16 MiB slots costs at most maxStageBytes of staging; bigger messages go by rendezvous', () => {
    const p = new SimPair({ a: { maxStageBytes: 65536 }, b: { ladder: [{ slotSize: 256, slots: 4 }, { slotSize: 16 << 20, slots: 4 }] } });
    p.run(p.now + 1);
    p.send(p.a, pattern(60_000, 1));
    p.send(p.a, pattern(60_000, 2));
    p.send(p.a, pattern(1 << 20, 3));
    p.run(p.now + 100);
    expect(p.b.received.map((m) => (m as Uint8Array).length)).toEqual([60_000, 60_000, 1 << 20]);
    const s = p.a.core.stats();
    expect(s).toMatchObject({ sendEagerSize: 65536, rendezvousSent: 1, eagerSent: 2 });
    // a's own memory: fixed + phase 0 + its staging (+ the 1 MiB rendezvous source while offered).
    expect(p.a.mem.peak).toBeLessThanOrEqual(FIXED + P0 + 65536 + (1 << 20));
  });
});
