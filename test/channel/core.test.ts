// The sans-I/O channel core, driven deterministically through test/channel/sim.ts: every size
// class across the ladder's thresholds arrives once, intact, in order; enlargement and shrink
// happen while messages are in flight; fig. 5 (elements that fit go while an enlargement is
// under way); the window; rendezvous; close; and no region is left registered at the end.
import { describe, expect, it } from 'vitest';
import { CHAN_HELLO_BUF, CHAN_MBOX_SLOT, ChanType } from '../../src/wire/channel-spec.js';
import { pattern, SimPair, type SimEnd } from './sim.js';

const LADDER = [
  { slotSize: 256, slots: 8 },
  { slotSize: 4096, slots: 8 },
  { slotSize: 32768, slots: 8 },
];
const SIZES = [0, 1, 255, 256, 257, 4095, 4096, 4097, 32767, 32768, 32769, 65536, 16 * 1024 * 1024];

function expectIntact(e: SimEnd, sent: Uint8Array[]): void {
  expect(e.received.length).toBe(sent.length);
  for (let i = 0; i < sent.length; i++) {
    const got = e.received[i] as Uint8Array;
    expect(got.length, `message ${i}`).toBe(sent[i]!.length);
    expect(Buffer.from(got).equals(Buffer.from(sent[i]!)), `message ${i} (${sent[i]!.length} B) intact`).toBe(true);
  }
}

function expectReleased(p: SimPair): void {
  for (const e of [p.a, p.b]) {
    expect(e.torn, `${e.name} torn down`).toBe(true);
    expect(e.mem.used, `${e.name} registered bytes after teardown`).toBe(0);
    expect(e.mem.live.size).toBe(0);
    expect(e.mem.regs).toBe(e.mem.deregs);
  }
}

describe('channel core: handshake and sizes', () => {
  it('HELLO both ways: open, phase 0, the fixed region + the phase-0 slots registered', () => {
    const p = new SimPair({ a: { ladder: LADDER }, b: { ladder: LADDER } });
    p.run();
    expect(p.a.connected && p.b.connected).toBe(true);
    const s = p.a.core.stats();
    expect(s.phase).toBe(0);
    expect(s.eagerSize).toBe(256);
    expect(s.sendEagerSize).toBe(256);
    // fixed: HELLO buffer + 8 mailbox slots + a scratch the HELLO's size; eager: 8 x 256
    expect(s.registeredBytes).toBe(CHAN_HELLO_BUF + 8 * CHAN_MBOX_SLOT + CHAN_HELLO_BUF + 8 * 256);
    p.close(p.a);
    p.run();
    expect(p.b.ended).toBe(true);
    expectReleased(p);
  });

  it('a first rung smaller than the HELLO: the send scratch still holds the HELLO, and messages flow', () => {
    const tiny = { ladder: [{ slotSize: 16, slots: 1 }, { slotSize: 48, slots: 1 }], window: 1, maxMessage: 48 };
    const p = new SimPair({ a: tiny, b: tiny });
    p.run();
    expect(p.a.connected && p.b.connected).toBe(true);
    // fixed: HELLO buffer + the mailbox + a scratch as large as the HELLO buffer
    expect(p.a.core.scratchLen).toBeGreaterThanOrEqual(CHAN_HELLO_BUF);
    const sent = [pattern(10, 1), pattern(48, 2)];
    for (const m of sent) {
      const seq = p.send(p.a, m);
      p.run(p.now + 1000, () => p.a.placed.has(seq));
    }
    p.run();
    expectIntact(p.b, sent);
    p.close(p.a);
    p.run();
    expectReleased(p);
  });

  it('every size across the thresholds arrives once, intact, in order (sent one at a time)', () => {
    const p = new SimPair({ a: { ladder: LADDER }, b: { ladder: LADDER } });
    p.run();
    const sent: Uint8Array[] = [];
    for (const [i, n] of SIZES.entries()) {
      const m = pattern(n, i + 1);
      sent.push(m);
      const seq = p.send(p.a, m);
      p.run(p.now + 1000, () => p.a.placed.has(seq));
      expect(p.a.placed.has(seq), `size ${n} placed`).toBe(true);
    }
    p.run(p.now + 10);
    expectIntact(p.b, sent);
    const a = p.a.core.stats();
    const b = p.b.core.stats();
    expect(b.enlargements).toBe(2); // 256 -> 4096 -> 32768
    expect(a.enlargeRequests).toBe(2);
    expect(a.rendezvousSent).toBe(3); // 32769, 64 KiB, 16 MiB
    expect(b.rendezvousReceived).toBe(3);
    expect(a.eagerSent).toBe(SIZES.length - 3);
    p.close(p.a);
    p.run();
    expectReleased(p);
  });

  it('every size, all in flight at once, both directions: in order and intact', () => {
    const p = new SimPair({ a: { ladder: LADDER }, b: { ladder: LADDER } });
    p.run();
    const sentA: Uint8Array[] = [];
    const sentB: Uint8Array[] = [];
    for (let r = 0; r < 3; r++) {
      for (const [i, n] of SIZES.entries()) {
        if (n > 65536 && r > 0) continue;
        const m = pattern(n, 100 * r + i);
        sentA.push(m);
        p.send(p.a, m);
        const m2 = pattern(n, 1000 + 100 * r + i);
        sentB.push(m2);
        p.send(p.b, m2);
      }
    }
    p.run();
    expectIntact(p.b, sentA);
    expectIntact(p.a, sentB);
    expect(p.a.placed.size).toBe(sentA.length);
    expect(p.b.placed.size).toBe(sentB.length);
    p.close(p.b);
    p.run();
    expectReleased(p);
  });
});

describe('channel core: enlargement while messages are in flight (fig. 5)', () => {
  it('a big element waits for the GRANT; the small ones after it are written eagerly meanwhile, delivered after it', () => {
    const log: string[] = [];
    const p = new SimPair({
      a: { ladder: LADDER }, b: { ladder: LADDER }, latencyMs: 1,
      filter: (i) => {
        if (i.from === 'a' && i.data) for (let k = 0; k < i.data.count; k++) log.push(`data seq ${i.data.seq + k} epoch ${i.data.epoch}`);
        if (i.from === 'a' && i.ctrl === ChanType.Enlarge) log.push('ENLARGE');
        if (i.from === 'b' && i.ctrl === ChanType.Grant) log.push('GRANT');
        if (i.from === 'a' && i.ctrl === ChanType.Switch) log.push('SWITCH');
        return 'deliver';
      },
    });
    p.run();
    // One message first (seq 0): an unused channel's receiver grants only a few of its slots.
    const first = pattern(1, 99);
    p.send(p.a, first);
    p.run();
    const vec = [pattern(10, 1), pattern(3000, 2), pattern(20, 3), pattern(30, 4), pattern(40, 5)];
    for (const m of vec) p.send(p.a, m);
    p.run();
    expectIntact(p.b, [first, ...vec]);
    // The three small elements after the big one went (epoch 0) before the GRANT came back.
    const iGrant = log.indexOf('GRANT');
    expect(log.indexOf('ENLARGE')).toBeGreaterThanOrEqual(0);
    expect(log.indexOf('data seq 5 epoch 0')).toBeLessThan(iGrant);
    expect(log.indexOf('data seq 2 epoch 1')).toBeGreaterThan(log.indexOf('SWITCH'));
    expect(p.b.core.stats().enlargements).toBe(1);
  });

  it('a message of the largest eager size jumps straight to the last phase', () => {
    const p = new SimPair({ a: { ladder: LADDER }, b: { ladder: LADDER } });
    p.run();
    p.send(p.a, pattern(30000, 9));
    p.run(p.now + 100);
    expect(p.b.core.stats().phase).toBe(2);
    expect(p.b.core.stats().enlargements).toBe(1);
    expect((p.b.received[0] as Uint8Array).length).toBe(30000);
  });

  it('shrinks to phase 0 after idle, deregistering the big slots, and enlarges again on demand', () => {
    const p = new SimPair({ a: { ladder: LADDER, shrinkAfterMs: 100 }, b: { ladder: LADDER, shrinkAfterMs: 100 } });
    p.run(p.now + 1);
    const base = p.b.mem.used;
    p.send(p.a, pattern(20000, 1));
    p.run(p.now + 50);
    expect(p.b.core.stats().phase).toBe(2);
    // (Phase 0's slots stay: they are part of the fixed region.)
    expect(p.b.mem.used).toBe(base + 8 * 32768);
    p.run(p.now + 200);
    const s = p.b.core.stats();
    expect(s.phase).toBe(0);
    expect(s.shrinks).toBe(1);
    expect(p.b.mem.used).toBe(base);
    // The sender's staging for 32 KiB writes went with it.
    expect(p.a.core.stats().sendEagerSize).toBe(256);
    p.send(p.a, pattern(5000, 2));
    p.run(p.now + 50);
    expect(p.b.core.stats().phase).toBe(2);
    expect(p.b.core.stats().enlargements).toBe(2);
    expect(p.b.received.map((m) => (m as Uint8Array).length)).toEqual([20000, 5000]);
  });

  it('a shrink GRANT crossing an ENLARGE: both settle, nothing lost, the big message goes at the big phase', () => {
    // b shrinks after 20 ms idle; a's big message is sent just as the shrink starts.
    const p = new SimPair({ a: { ladder: LADDER }, b: { ladder: LADDER, shrinkAfterMs: 20 }, latencyMs: 2 });
    p.run(p.now + 1);
    p.send(p.a, pattern(4000, 1));
    p.run(p.now + 10);
    expect(p.b.core.stats().phase).toBe(1);
    let sent = false;
    p.filter = (i) => {
      if (!sent && i.from === 'b' && i.ctrl === ChanType.Grant) {
        sent = true;
      }
      return 'deliver';
    };
    p.run(p.now + 100, () => sent);
    expect(sent).toBe(true);
    const big = pattern(20000, 2);
    p.send(p.a, big);
    p.send(p.a, pattern(10, 3));
    p.run();
    expect(p.b.received.map((m) => (m as Uint8Array).length)).toEqual([4000, 20000, 10]);
    expect(Buffer.from(p.b.received[1] as Uint8Array).equals(Buffer.from(big))).toBe(true);
    const s = p.b.core.stats();
    expect(s.shrinks).toBeGreaterThanOrEqual(1);
    expect(s.enlargements).toBeGreaterThanOrEqual(2);
  });
});

describe('channel core: packing', () => {
  it('small messages waiting together share a slot (P = 1), each delivered once, in order, bytes and values alike', () => {
    const p = new SimPair({ a: { ladder: LADDER }, b: { ladder: LADDER } });
    p.run();
    const sent: Uint8Array[] = [];
    // 200 messages of 0..90 bytes queued at once: far more than 8 slot credits.
    for (let i = 0; i < 200; i++) {
      sent.push(pattern(i % 91, i));
      p.send(p.a, sent[i]!, i % 7 === 0);
    }
    p.run(p.now + 100);
    expect(p.b.received.length).toBe(200);
    for (let i = 0; i < 200; i++) {
      const got = p.b.received[i] as Uint8Array | { value: Uint8Array };
      const bytes = got instanceof Uint8Array ? got : got.value;
      expect(got instanceof Uint8Array, `#${i} kind`).toBe(i % 7 !== 0);
      expect(Buffer.from(bytes).equals(Buffer.from(sent[i]!)), `#${i}`).toBe(true);
    }
    const a = p.a.core.stats();
    expect(a.packedWrites).toBeGreaterThan(10);
    expect(a.eagerSent).toBe(200);
    expect(p.a.placed.size).toBe(200);
  });
});

describe('channel core: enlargement driven by a backlog', () => {
  it('small messages piling up beyond what the phase-0 slots hold ask for the next phase; idle shrinks it back', () => {
    const ladder = [{ slotSize: 256, slots: 4 }, { slotSize: 4096, slots: 8 }];
    const p = new SimPair({ a: { ladder, shrinkAfterMs: 50 }, b: { ladder, shrinkAfterMs: 50 }, latencyMs: 0.5 });
    p.run(p.now + 1);
    const sent: Uint8Array[] = [];
    for (let i = 0; i < 300; i++) {
      sent.push(pattern(60, i));
      p.send(p.a, sent[i]!);
    }
    p.run(p.now + 20);
    expect(p.b.core.stats().phase).toBe(1);
    expect(p.a.core.stats().enlargeRequests).toBe(1);
    expect(p.b.received.length).toBe(300);
    sent.forEach((m, i) => expect(Buffer.from(p.b.received[i] as Uint8Array).equals(Buffer.from(m))).toBe(true));
    p.run(p.now + 200);
    expect(p.b.core.stats().phase).toBe(0);
    expect(p.b.core.stats().shrinks).toBe(1);
  });
});

describe('channel core: window, rendezvous budget, close', () => {
  it('the window holds the sender back until the application takes messages', () => {
    const p = new SimPair({ a: { ladder: LADDER }, b: { ladder: LADDER, window: 16 } });
    p.b.autoTake = false;
    p.run();
    const sent: Uint8Array[] = [];
    for (let i = 0; i < 100; i++) {
      sent.push(pattern(i % 3 === 0 ? 300 : 50, i));
      p.send(p.a, sent[i]!);
    }
    p.run();
    expect(p.a.placed.size).toBe(16);
    expect(p.b.core.stats().buffered).toBe(16);
    for (let k = 0; k < 100 && p.b.received.length < 100; k++) {
      p.takeAll(p.b);
      p.run();
    }
    expectIntact(p.b, sent);
    expect(p.a.placed.size).toBe(100);
  });

  it('rendezvous reads wait for room under maxBufferedBytes; the next message is always read', () => {
    const p = new SimPair({ a: { ladder: LADDER }, b: { ladder: LADDER, maxBufferedBytes: 100_000, maxReads: 4 } });
    p.b.autoTake = false;
    p.run();
    const sent = [pattern(70_000, 1), pattern(70_000, 2), pattern(70_000, 3)];
    for (const m of sent) p.send(p.a, m);
    p.run();
    // Only the first is read (the budget holds one); the others wait.
    expect(p.b.core.stats().bufferedBytes).toBe(70_000);
    expect(p.a.placed.size).toBe(1);
    for (let k = 0; k < 10 && p.b.received.length < 3; k++) {
      p.takeAll(p.b);
      p.run();
    }
    expectIntact(p.b, sent);
  });

  it('close waits for outstanding sends, then the peer ends after the last message', () => {
    const p = new SimPair({ a: { ladder: LADDER }, b: { ladder: LADDER } });
    p.run();
    const sent = [pattern(100, 1), pattern(5000, 2), pattern(100_000, 3), pattern(7, 4)];
    for (const m of sent) p.send(p.a, m);
    p.close(p.a);
    p.run();
    expectIntact(p.b, sent);
    expect(p.a.placed.size).toBe(4);
    expect(p.b.ended).toBe(true);
    expect(p.b.core.finished).toBe(true);
    expectReleased(p);
  });
});

describe('channel core: credits never deadlock (both directions, small pools)', () => {
  it('random traffic both ways with 4 mailbox slots, 2 slots per phase and a window of 3', () => {
    const ladder = [{ slotSize: 64, slots: 2 }, { slotSize: 1024, slots: 2 }];
    for (let seed = 1; seed <= 20; seed++) {
      const o = { ladder, ctrlSlots: 4, window: 3, shrinkAfterMs: 5, maxReads: 1 };
      const p = new SimPair({ a: o, b: o, latencyMs: 0.3 });
      p.run(p.now + 1);
      let x = seed;
      const rnd = (): number => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32);
      const sent: { a: Uint8Array[]; b: Uint8Array[] } = { a: [], b: [] };
      for (let i = 0; i < 60; i++) {
        const from = rnd() < 0.5 ? p.a : p.b;
        const r = rnd();
        const n = r < 0.5 ? Math.floor(rnd() * 65) : r < 0.8 ? Math.floor(rnd() * 1025) : 1025 + Math.floor(rnd() * 5000);
        const m = pattern(n, seed * 1000 + i);
        sent[from.name].push(m);
        p.send(from, m);
        if (rnd() < 0.3) p.advance(rnd() * 10);
      }
      p.run();
      expectIntact(p.b, sent.a);
      expectIntact(p.a, sent.b);
      expect(p.a.placed.size).toBe(sent.a.length);
      expect(p.b.placed.size).toBe(sent.b.length);
      p.close(p.a);
      p.run();
      expectReleased(p);
    }
  });
});
