// Fault injection at each step of an epoch change, and a peer that breaks the protocol, on the
// deterministic model: the control message, the answer, the fence, the first message of the new
// epoch, deregister races; a GRANT naming memory the peer does not own; data messages outside
// what was granted. Every case ends with a clear failure (kind + message), nothing placed
// outside a registered region (the model refuses and counts it), and every region deregistered.
import { describe, expect, it } from 'vitest';
import { CHAN_GRANT, CHAN_HDR, ChanType } from '../../src/wire/channel-spec.js';
import { wr16, wr32 } from '../../src/wire/codec.js';
import { pattern, SimPair, type SimEnd, type WireInfo } from './sim.js';

const LADDER = [
  { slotSize: 256, slots: 8 },
  { slotSize: 4096, slots: 8 },
  { slotSize: 32768, slots: 8 },
];
const O = { ladder: LADDER, timeoutMs: 500 };

function released(e: SimEnd): void {
  expect(e.torn, `${e.name} torn down`).toBe(true);
  expect(e.mem.used, `${e.name} bytes still registered`).toBe(0);
  expect(e.mem.regs).toBe(e.mem.deregs);
}

/** The first message matching `pred` gets `verdict`; the rest are delivered. */
function once(pred: (i: WireInfo) => boolean, verdict: 'drop' | 'fail' | { delayMs: number }): (i: WireInfo) => 'deliver' | 'drop' | 'fail' | { delayMs: number } {
  let hit = false;
  return (i) => {
    if (!hit && pred(i)) {
      hit = true;
      return verdict;
    }
    return 'deliver';
  };
}

const G = CHAN_GRANT.fields;
/** Rewrite a GRANT on the wire (a hostile receiver). */
function rewriteGrant(edit: (b: Uint8Array, o: number) => void): (i: WireInfo) => 'deliver' {
  return (i) => {
    if (i.from === 'b' && i.ctrl === ChanType.Grant && i.w.kind === 'write') edit(i.w.bytes, CHAN_HDR.size);
    return 'deliver';
  };
}

describe('channel core: fault injection at each step of the swap', () => {
  it('ENLARGE dropped (the peer never answers): the send fails with a timeout, everything released', () => {
    const p = new SimPair({ a: O, b: O, filter: once((i) => i.from === 'a' && i.ctrl === ChanType.Enlarge, 'drop') });
    p.run(p.now + 1);
    const small = p.send(p.a, pattern(10, 1));
    p.send(p.a, pattern(1000, 2));
    p.run(p.now + 2000);
    expect(p.a.placed.has(small)).toBe(true);
    expect(p.a.failed?.kind).toBe('timeout');
    expect(p.a.failed?.message).toMatch(/did not answer an enlargement/);
    expect(p.a.placed.size).toBe(1);
    released(p.a);
    // The peer got the small one; it learns of the failure the next time it touches the QP.
    expect((p.b.received[0] as Uint8Array).length).toBe(10);
  });

  it('GRANT dropped: the sender times out waiting and tells the receiver (abort), which fails at once; both release', () => {
    const p = new SimPair({ a: O, b: O, filter: once((i) => i.from === 'b' && i.ctrl === ChanType.Grant, 'drop') });
    p.run(p.now + 1);
    p.send(p.a, pattern(1000, 2));
    p.run(p.now + 2000);
    expect(p.a.failed?.kind).toBe('timeout');
    expect(p.b.failed?.kind).toBe('aborted');
    expect(p.b.failed?.message).toMatch(/the peer failed the channel/);
    released(p.a);
    released(p.b);
  });

  it('GRANT delayed: small messages keep flowing eagerly, the big one goes after the swap', () => {
    const p = new SimPair({ a: O, b: O, filter: once((i) => i.from === 'b' && i.ctrl === ChanType.Grant, { delayMs: 200 }) });
    p.run(p.now + 1);
    // One message first: an unused channel's receiver grants only a few of its slots.
    p.send(p.a, pattern(1, 99));
    p.run(p.now + 10);
    expect(p.b.received.length).toBe(1);
    const sent = [pattern(1000, 1), ...Array.from({ length: 20 }, (_, i) => pattern(i * 5, 10 + i))];
    for (const m of sent) p.send(p.a, m);
    p.run(p.now + 100);
    // While the GRANT is held back, small ones went eagerly into epoch 0: all 8 slots (on rc the
    // GRANT also holds back the credits behind it), none delivered before the big one.
    expect(p.a.placed.size).toBe(1 + 8);
    expect(p.a.core.stats().eagerSent).toBe(1 + 8);
    expect(p.b.received.length).toBe(1);
    expect(p.b.core.stats().buffered).toBe(8);
    p.run(p.now + 1000);
    expect(p.b.received.slice(1).map((m) => (m as Uint8Array).length)).toEqual(sent.map((m) => m.length));
    expect(p.a.failed).toBeUndefined();
  });

  it('ENLARGE delayed past nothing: the swap still completes', () => {
    const p = new SimPair({ a: O, b: O, filter: once((i) => i.from === 'a' && i.ctrl === ChanType.Enlarge, { delayMs: 300 }) });
    p.run(p.now + 1);
    p.send(p.a, pattern(1000, 1));
    p.run(p.now + 450);
    expect(p.b.received.length).toBe(1);
    expect(p.a.failed).toBeUndefined();
  });

  it('SWITCH dropped: the first new-epoch message is refused (never delivered), both sides release', () => {
    const p = new SimPair({ a: O, b: O, filter: once((i) => i.from === 'a' && i.ctrl === ChanType.Switch, 'drop') });
    p.run(p.now + 1);
    p.send(p.a, pattern(1000, 1));
    p.run(p.now + 2000);
    expect(p.b.failed?.kind).toBe('protocol');
    expect(p.b.failed?.message).toMatch(/epoch 1, the live epoch is 0 .*refused/);
    expect(p.b.received.length).toBe(0);
    released(p.b);
    // a's next write finds the QP gone.
    p.send(p.a, pattern(10, 2));
    p.run(p.now + 100);
    expect(p.a.failed).toBeDefined();
    released(p.a);
  });

  it('SWITCH delayed: the receiver keeps both epochs registered until it arrives, then retires the old one', () => {
    const p = new SimPair({ a: O, b: O, filter: once((i) => i.from === 'a' && i.ctrl === ChanType.Switch, { delayMs: 100 }) });
    p.run(p.now + 1);
    const base = p.b.mem.used;
    p.send(p.a, pattern(1000, 1));
    p.run(p.now + 50);
    expect(p.b.mem.used).toBe(base + 8 * 4096);
    expect(p.b.core.inb.cur.epoch).toBe(0);
    p.run(p.now + 200);
    // The old epoch was phase 0, whose slots are part of the fixed region: nothing to free.
    expect(p.b.core.inb.cur.epoch).toBe(1);
    expect(p.b.mem.used).toBe(base + 8 * 4096);
    expect(p.b.received.length).toBe(1);
  });

  it('the first message of the new epoch fails on the link: the sender fails, nothing is delivered twice or out of order', () => {
    const p = new SimPair({ a: O, b: O, filter: once((i) => i.from === 'a' && i.data?.epoch === 1, 'fail') });
    p.run(p.now + 1);
    p.send(p.a, pattern(5, 1));
    p.send(p.a, pattern(1000, 2));
    p.send(p.a, pattern(6, 3));
    p.run(p.now + 1000);
    expect(p.a.failed?.kind).toBe('link');
    released(p.a);
    // b has the first; the third (eager in epoch 0, seq 2) waits behind the lost seq 1, never delivered out of order.
    expect(p.b.received.map((m) => (m as Uint8Array).length)).toEqual([5]);
  });

  it('deregister race: the old slots lose their key before the fence; in-flight old-epoch writes are refused, nothing placed', () => {
    let bOldRkey = 0;
    const p = new SimPair({
      a: O, b: O, latencyMs: 1,
      filter: (i) => {
        // The moment b grants, it (wrongly) invalidates the epoch-0 slots.
        if (i.from === 'b' && i.ctrl === ChanType.Grant) p.b.mem.revoked.add(bOldRkey);
        return 'deliver';
      },
    });
    p.run(p.now + 5);
    bOldRkey = p.b.core.inb.cur.region.rkey;
    p.send(p.a, pattern(1000, 1));
    for (let i = 0; i < 6; i++) p.send(p.a, pattern(30, 10 + i));
    p.run(p.now + 1000);
    expect(p.b.mem.refused).toBeGreaterThan(0);
    expect(p.a.failed?.kind).toBe('protocol');
    expect(p.a.failed?.message).toMatch(/refused a write/);
    released(p.a);
    released(p.b);
  });

  it('a stale epoch write arriving after the fence (a reordering link) is refused', () => {
    const p = new SimPair({ a: O, b: O, latencyMs: 1 });
    p.run(p.now + 5);
    const oldRegion = p.b.core.inb.cur.region;
    p.send(p.a, pattern(1000, 1));
    p.run(p.now + 100);
    expect(p.b.core.inb.cur.epoch).toBe(1);
    // Replay an epoch-0 write after the fence, as a link that reordered it would deliver it.
    // Phase 0's slots are part of the fixed region, so its bytes would land in this channel's
    // own memory, in slots no live epoch uses (a later shrink to phase 0 reuses them only after
    // its own fence); the old key cannot reach the live epoch's slots...
    expect(oldRegion).toBe(p.b.core.fixed);
    const cur = p.b.core.inb.cur;
    expect(p.b.mem.remoteWrite(oldRegion.rkey, cur.region.addr + cur.off, pattern(10, 2))).toBe(false);
    // ...and the core refuses the immediate.
    p.b.core.handleImm((0 << 25) | 5, 10, p.now);
    expect(p.b.core.failure?.message).toMatch(/epoch 0, the live epoch is 1/);
  });
});

/** The n-th message (1-based) matching `pred` gets `verdict`; the rest are delivered. */
function nth(n: number, pred: (i: WireInfo) => boolean, verdict: 'drop' | { delayMs: number }): (i: WireInfo) => 'deliver' | 'drop' | { delayMs: number } {
  let seen = 0;
  return (i) => (pred(i) && ++seen === n ? verdict : 'deliver');
}

describe('channel core: fault injection at each step of a shrink', () => {
  // b shrinks 100 ms after its last data message; a's 1000-byte message enlarged it to phase 1
  // (epoch 1) first, so the shrink is b's second GRANT and a's second SWITCH (to epoch 2).
  const S = { ...O, shrinkAfterMs: 100 };
  const shrinkGrant = (i: WireInfo): boolean => i.from === 'b' && i.ctrl === ChanType.Grant;
  const shrinkSwitch = (i: WireInfo): boolean => i.from === 'a' && i.ctrl === ChanType.Switch;
  const lens = (e: SimEnd): number[] => e.received.map((m) => (m as Uint8Array).length);

  /** Enlarge b to phase 1, with `base` the bytes b had registered at phase 0. */
  function enlarged(filter: (i: WireInfo) => 'deliver' | 'drop' | { delayMs: number }): { p: SimPair; base: number } {
    const p = new SimPair({ a: S, b: S, filter });
    p.run(p.now + 1);
    const base = p.b.mem.used;
    p.send(p.a, pattern(1000, 1));
    p.run(p.now + 20);
    expect(p.b.core.stats().phase).toBe(1);
    // Phase 0's slots stay registered: they are part of the fixed region.
    expect(p.b.mem.used).toBe(base + 8 * 4096);
    return { p, base };
  }

  it('shrink GRANT dropped: the receiver times out waiting for the fence and releases; the sender fails on its next write', () => {
    const { p } = enlarged(nth(2, shrinkGrant, 'drop'));
    p.run(p.now + 100 + 500 + 50);
    expect(p.b.failed?.kind).toBe('timeout');
    expect(p.b.failed?.message).toMatch(/did not fence epoch 1/);
    expect(lens(p.b)).toEqual([1000]);
    released(p.b);
    p.send(p.a, pattern(10, 2));
    p.run(p.now + 100);
    expect(p.a.failed).toBeDefined();
    expect(lens(p.b)).toEqual([1000]);
    released(p.a);
  });

  it('shrink GRANT delayed: messages sent meanwhile go at the old (big) phase, in order; the shrink then completes', () => {
    const { p, base } = enlarged(nth(2, shrinkGrant, { delayMs: 200 }));
    p.run(p.now + 100 + 20); // b has granted phase 0 (held back on the wire) and registered it
    expect(p.b.core.stats().phase).toBe(1);
    expect(p.b.mem.used).toBe(base + 8 * 4096);
    const sent = [pattern(3000, 2), pattern(5, 3), pattern(2000, 4)];
    for (const m of sent) p.send(p.a, m);
    p.run(p.now + 20);
    // Written into epoch 1 (still live at both ends): delivered, no new enlargement.
    expect(lens(p.b)).toEqual([1000, 3000, 5, 2000]);
    expect(p.b.core.stats().enlargements).toBe(1);
    p.run(p.now + 300);
    const s = p.b.core.stats();
    expect(s.phase).toBe(0);
    expect(s.shrinks).toBe(1);
    expect(p.b.mem.used).toBe(base);
    expect(p.a.core.stats().sendEagerSize).toBe(256);
    expect(p.a.failed).toBeUndefined();
    expect(p.b.failed).toBeUndefined();
    // Big again on demand after the shrink.
    const again = pattern(3000, 5);
    p.send(p.a, again);
    p.run(p.now + 20);
    expect(p.b.core.stats().enlargements).toBe(2);
    expect(Buffer.from(p.b.received[4] as Uint8Array).equals(Buffer.from(again))).toBe(true);
  });

  it('shrink SWITCH dropped: the first message of the small epoch is refused (never delivered), both sides release', () => {
    const { p } = enlarged(nth(2, shrinkSwitch, 'drop'));
    p.run(p.now + 100 + 20); // the shrink GRANT arrived; a's SWITCH was lost
    expect(p.a.core.stats().sendEagerSize).toBe(256);
    p.send(p.a, pattern(10, 2));
    p.run(p.now + 100);
    expect(p.b.failed?.kind).toBe('protocol');
    expect(p.b.failed?.message).toMatch(/epoch 2, the live epoch is 1 .*refused/);
    expect(lens(p.b)).toEqual([1000]);
    released(p.b);
    p.send(p.a, pattern(10, 3));
    p.run(p.now + 100);
    expect(p.a.failed).toBeDefined();
    released(p.a);
  });

  it('shrink SWITCH dropped on an idle channel: the receiver times out on the fence and releases', () => {
    const { p } = enlarged(nth(2, shrinkSwitch, 'drop'));
    p.run(p.now + 100 + 500 + 50);
    expect(p.b.failed?.kind).toBe('timeout');
    expect(p.b.failed?.message).toMatch(/did not fence epoch 1/);
    released(p.b);
  });

  it('shrink SWITCH delayed: the receiver keeps both epochs until it arrives, then frees the big slots; a message sent meanwhile waits its turn', () => {
    const { p, base } = enlarged(nth(2, shrinkSwitch, { delayMs: 100 }));
    p.run(p.now + 100 + 20);
    expect(p.b.mem.used).toBe(base + 8 * 4096); // phase 1 and the new phase 0 both registered
    p.send(p.a, pattern(10, 2)); // written into epoch 2, behind the SWITCH on the (ordered) link
    p.run(p.now + 40);
    expect(lens(p.b)).toEqual([1000]);
    expect(p.b.mem.used).toBe(base + 8 * 4096);
    p.run(p.now + 200);
    expect(p.b.mem.used).toBe(base);
    expect(p.b.core.stats().shrinks).toBe(1);
    expect(lens(p.b)).toEqual([1000, 10]);
    expect(p.a.failed).toBeUndefined();
    expect(p.b.failed).toBeUndefined();
  });
});

describe('channel core: a hostile receiver', () => {
  it('a GRANT naming an rkey the peer does not own: the write is refused by the peer\'s keys, the channel fails, nothing written', () => {
    const p = new SimPair({ a: O, b: O, filter: rewriteGrant((b, o) => wr32(b, o + G.rkey.offset, 0x12345678)) });
    p.run(p.now + 1);
    p.send(p.a, pattern(1000, 1));
    p.run(p.now + 1000);
    expect(p.a.failed?.kind).toBe('protocol');
    expect(p.b.mem.refused).toBe(1);
    expect(p.b.received.length).toBe(0);
    released(p.a);
  });

  it('a GRANT whose range runs past its region: writes within it land, the first one past the end is refused', () => {
    // Claim 8 x 4096 but point at the last 4096 bytes of the real region: slot 1 is outside.
    const p = new SimPair({
      a: O, b: O,
      filter: (i) => {
        if (i.from === 'b' && i.ctrl === ChanType.Grant && i.w.kind === 'write') {
          const pending = p.b.core.inb.pending!;
          const o = CHAN_HDR.size + G.addr.offset;
          const addr = pending.region.addr + pending.region.length - 4096;
          wr32(i.w.bytes, o, Math.floor(addr / 2 ** 32));
          wr32(i.w.bytes, o + 4, addr >>> 0);
        }
        return 'deliver';
      },
    });
    p.run(p.now + 1);
    // Two messages too big to share a 4 KiB slot: the second goes to slot 1, past the region.
    p.send(p.a, pattern(3000, 1));
    p.send(p.a, pattern(3000, 2));
    p.run(p.now + 1000);
    expect(p.b.mem.refused).toBe(1);
    expect(p.a.failed?.kind).toBe('protocol');
    released(p.a);
  });

  it.each([
    ['slot size above the peer\'s own maxEager', (b: Uint8Array, o: number): void => wr32(b, o + G.slotSize.offset, 65536), /slot size 65536/],
    ['zero slots', (b: Uint8Array, o: number): void => wr16(b, o + G.slots.offset, 0), /0 slots/],
    ['wrong epoch', (b: Uint8Array, o: number): void => void (b[o + G.epoch.offset] = 7), /epoch 7, expected 1/],
    ['missing tail flag', (b: Uint8Array, o: number): void => void (b[o + G.tail.offset] = 0), /GRANT_FRAMING/],
  ] as const)('a GRANT with %s is refused before anything is written', (_name, edit, why) => {
    const p = new SimPair({ a: O, b: O, filter: rewriteGrant(edit) });
    p.run(p.now + 1);
    p.send(p.a, pattern(1000, 1));
    p.run(p.now + 1000);
    expect(p.a.failed?.kind).toBe('protocol');
    expect(p.a.failed?.message).toMatch(why);
    expect(p.b.mem.refused).toBe(0);
    released(p.a);
  });
});

describe('channel core: a hostile sender', () => {
  function imm(ctrl: boolean, epoch: number, value: boolean, slot: number, seq: number): number {
    return ((ctrl ? 1 << 31 : 0) | (epoch << 25) | (value ? 1 << 24 : 0) | (slot << 16) | seq) >>> 0;
  }

  it.each([
    ['a slot out of ring order', () => imm(false, 0, false, 3, 0), 10, /slot 3, the next slot is 0/],
    ['more bytes than a slot', () => imm(false, 0, false, 0, 0), 257, /257 bytes in 256-byte slots/],
    ['a seq outside the window', () => imm(false, 0, false, 0, 5000), 10, /outside the window/],
    ['a mailbox slot out of order', () => imm(true, 0, false, 5, 0), 8, /mailbox slot 5, the next is 0/],
    ['a control message longer than a mailbox slot', () => imm(true, 0, false, 0, 0), 33, /control message of 33 bytes/],
  ] as const)('%s: refused, the channel fails cleanly', (_n, make, len, why) => {
    const p = new SimPair({ a: O, b: O });
    p.run(p.now + 1);
    p.b.core.handleImm(make(), len, p.now);
    expect(p.b.core.failure?.kind).toBe('protocol');
    expect(p.b.core.failure?.message).toMatch(why);
  });

  it('a packed write whose records do not fill it exactly is refused, nothing delivered from it', () => {
    const p = new SimPair({ a: O, b: O });
    p.run(p.now + 1);
    const slots = p.b.core.inb.cur;
    // Records claiming 10 + 20 bytes in a 30-byte write (8 bytes of headers missing).
    const bytes = new Uint8Array(30);
    wr16(bytes, 2, 10);
    wr16(bytes, 16, 20);
    p.b.mem.remoteWrite(slots.region.rkey, slots.region.addr, bytes);
    p.b.core.handleImm(imm(false, 0, false, 0, 0) | (1 << 30), 30, p.now);
    expect(p.b.core.failure?.message).toMatch(/packed data message: RECORD_TRUNCATED/);
    expect(p.b.received.length).toBe(0);
  });

  it('a packed write whose later records fall outside the window is refused whole', () => {
    const p = new SimPair({ a: O, b: { ...O, window: 2 } });
    p.run(p.now + 1);
    const slots = p.b.core.inb.cur;
    const bytes = new Uint8Array(12);
    for (let k = 0; k < 3; k++) wr16(bytes, k * 4 + 2, 0);
    p.b.mem.remoteWrite(slots.region.rkey, slots.region.addr, bytes);
    p.b.core.handleImm(imm(false, 0, false, 0, 0) | (1 << 30), 12, p.now);
    expect(p.b.core.failure?.message).toMatch(/seq 2 outside the window/);
    expect(p.b.received.length).toBe(0);
  });

  it('a data message beyond the slot credits reported is refused', () => {
    const p = new SimPair({ a: O, b: { ...O, window: 1000 } });
    p.b.autoTake = false;
    p.run(p.now + 1);
    const cur = p.b.core.inb.cur;
    let n = 0;
    // b reports credits as it frees slots, until its own mailbox credits run out (a never reads them here).
    for (; n < 500 && !p.b.core.failure; n++) {
      const allowed = cur.reported + cur.slots;
      p.b.core.handleImm(imm(false, 0, false, n % cur.slots, n), 1, p.now);
      if (n + 1 > allowed) break;
    }
    expect(p.b.core.failure?.message).toMatch(/without a slot credit/);
    expect(cur.received).toBe(cur.reported + cur.slots);
  });

  it('a repeated seq is refused (exactly once)', () => {
    const p = new SimPair({ a: O, b: O });
    p.b.autoTake = false;
    p.run(p.now + 1);
    p.b.core.handleImm(imm(false, 0, false, 0, 1), 1, p.now);
    p.b.core.handleImm(imm(false, 0, false, 1, 1), 1, p.now);
    expect(p.b.core.failure?.message).toMatch(/repeated/);
  });

  it('an OFFER above maxMessage is refused before any memory is allocated', () => {
    const p = new SimPair({ a: O, b: { ...O, maxMessage: 1 << 20 } });
    p.run(p.now + 1);
    const before = p.b.mem.regs;
    p.b.core.inb.onOffer(0, (1 << 20) + 1, 0x1000, 0x1234, false, p.now);
    expect(p.b.core.failure?.message).toMatch(/more than maxMessage/);
    expect(p.b.mem.regs).toBe(before);
  });

  it('an OFFER naming memory the sender does not expose: the READ is refused by its keys, the channel fails', () => {
    const p = new SimPair({
      a: O, b: O,
      filter: (i) => {
        if (i.from === 'a' && i.ctrl === ChanType.Offer && i.w.kind === 'write') wr32(i.w.bytes, CHAN_HDR.size + 8, 0xdeadbe00);
        return 'deliver';
      },
    });
    p.run(p.now + 1);
    p.send(p.a, pattern(100_000, 1));
    p.run(p.now + 1000);
    expect(p.a.mem.refused).toBe(1);
    expect(p.b.failed?.kind).toBe('protocol');
    expect(p.b.failed?.message).toMatch(/does not expose/);
    released(p.b);
  });

  it('a peer that never sends HELLO: timeout, released', () => {
    const p = new SimPair({ a: O, b: O, filter: (i) => (i.from === 'b' ? 'drop' : 'deliver') });
    p.run(p.now + 2000);
    expect(p.a.failed?.kind).toBe('timeout');
    expect(p.a.failed?.message).toMatch(/no HELLO/);
    released(p.a);
  });

  it('memory runs out for an enlargement: the receiver denies it and the big message goes by rendezvous', () => {
    // b has room for its phase 0 and a rendezvous sink, not for 8 x 4096.
    const p = new SimPair({ a: O, b: O, memB: 8 * 1024 });
    p.run(p.now + 1);
    const m = pattern(3000, 1);
    p.send(p.a, m);
    p.send(p.a, pattern(20, 2));
    p.run(p.now + 100);
    expect(p.b.core.stats().deniedEnlargements).toBe(1);
    expect(p.a.core.stats().rendezvousSent).toBe(1);
    expect(Buffer.from(p.b.received[0] as Uint8Array).equals(Buffer.from(m))).toBe(true);
    expect(p.b.received.length).toBe(2);
  });
});
