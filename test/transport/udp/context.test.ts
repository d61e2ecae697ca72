// The transport context on its own: flow control against a slow receiver, retry exhaustion,
// RTO backoff, duplicate suppression, SACK-driven fast retransmit.
import { describe, expect, it } from 'vitest';
import type { TxDatagram } from '../../../src/transport/udp/context-options.js';
import { TransportContext } from '../../../src/transport/udp/context.js';
import { UdpType } from '../../../src/wire/udp.js';
import { makePayload, payloadIndex } from '../../sim/random.js';

function pair(opts: ConstructorParameters<typeof TransportContext>[2] = {}) {
  const a = new TransportContext(0x1111, 0, opts, 0x2222);
  const b = new TransportContext(0x2222, 0, opts, 0x1111);
  return { a, b };
}

/** What the context lets go now; these tests send single-buffer payloads, which arrive as one. */
function flush(c: TransportContext, now: number): Array<Omit<TxDatagram, 'payload'> & { payload: Uint8Array | null }> {
  const out: TxDatagram[] = [];
  c.flush(now, out);
  return out.map((d) => {
    if (d.payload !== null && !(d.payload instanceof Uint8Array)) throw new Error('a gather-list payload in a single-buffer test');
    return { ...d, payload: d.payload };
  });
}

describe('TransportContext', () => {
  it('a slow receiver never holds more than its credit, and the sender never overruns it', () => {
    const credit = 24;
    const { a, b } = pair({ rcvCredit: credit, initialPeerWindow: 8, initialCwnd: 64 });
    const N = 600;
    for (let i = 0; i < N; i++) a.send(makePayload(i, 64), 0);
    const held: number[] = [];
    let now = 0;
    let maxHeld = 0;
    let delivered = 0;
    for (let step = 0; step < 20_000 && delivered < N; step++) {
      now += 0.1;
      for (const d of flush(a, now)) b.receive(d.hdr, d.payload, now);
      for (const p of b.delivered.splice(0)) held.push(payloadIndex(p));
      maxHeld = Math.max(maxHeld, held.length);
      // The application consumes one payload every 10 steps.
      if (step % 10 === 0 && held.length > 0) {
        held.shift();
        delivered++;
        b.release(1);
      }
      for (const d of flush(b, now)) a.receive(d.hdr, d.payload, now);
      a.tick(now);
      b.tick(now);
    }
    expect(delivered).toBe(N);
    expect(maxHeld).toBeLessThanOrEqual(credit);
    expect(b.counters.rxNoCredit).toBe(0);
    expect(b.counters.delivered).toBe(N);
    expect(a.acked.length).toBe(N);
    expect(a.counters.timeouts).toBe(0);
  });

  // A receiver that holds its input (Link.holdReceive) drops DATA behind a window of 0: the
  // sender keeps the peer (its retries reset on each window-0 ack, past a budget of 3 here), and
  // the window update at release sends what the holder dropped at once, not at the next RTO,
  // which the hold had backed off to its cap.
  it('a receiver holding its input: the sender waits past its retry budget, and resends at once when the window opens', () => {
    const hold = { held: true };
    const opts = { initialRtoMs: 10, minRtoMs: 10, maxRtoMs: 1000, retryLimit: 3, retryTimeoutMs: 0, initialCwnd: 64 };
    const a = new TransportContext(0x1111, 0, opts, 0x2222);
    const b = new TransportContext(0x2222, 0, { ...opts, rxHold: hold }, 0x1111);
    const N = 20;
    for (let i = 0; i < N; i++) a.send(makePayload(i, 64), 0);
    let now = 0;
    const exchange = (): void => {
      for (const d of flush(a, now)) b.receive(d.hdr, d.payload, now);
      b.release(b.delivered.splice(0).length);
      for (const d of flush(b, now)) a.receive(d.hdr, d.payload, now);
      a.tick(now);
      b.tick(now);
    };
    for (; now < 5_000; now += 5) exchange();
    expect(a.state).toBe('open');
    expect(a.acked.length).toBe(0);
    expect(b.counters.rxNoCredit).toBeGreaterThan(3);
    hold.held = false;
    b.rx.ackNow = true; // the endpoint's windowOpened
    const opened = now;
    const timeoutsAtOpen = a.counters.timeouts;
    for (; now < opened + 2_000 && a.acked.length < N; now += 5) exchange();
    expect(a.acked.length).toBe(N);
    // A few exchanges of slow start (the timeouts during the hold shrank the window), not an RTO.
    expect(now - opened).toBeLessThan(100);
    expect(a.counters.timeouts).toBe(timeoutsAtOpen);
  });

  it('a vanished peer: RTO doubles up to the cap, then everything outstanding fails', () => {
    const a = new TransportContext(1, 0, { initialRtoMs: 10, minRtoMs: 10, maxRtoMs: 80, retryLimit: 5, retryTimeoutMs: 0 }, 2);
    for (let i = 0; i < 50; i++) a.send(makePayload(i, 100), 0);
    let now = 0;
    const fireTimes: number[] = [];
    const out: TxDatagram[] = [];
    a.flush(now, out);
    for (let i = 0; i < 100 && a.state === 'open'; i++) {
      now = a.nextDeadline();
      const before = a.counters.timeouts;
      a.tick(now);
      if (a.counters.timeouts > before) fireTimes.push(now);
      a.flush(now, out);
    }
    expect(a.state).toBe('failed');
    expect(a.failReason).toBe('retry-exceeded');
    expect(a.failed.sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(a.acked).toEqual([]);
    const gaps = fireTimes.slice(1).map((t, i) => Math.round(t - fireTimes[i]));
    expect(gaps).toEqual([20, 40, 80, 80, 80]);
    expect(a.nextDeadline()).toBe(Infinity);
    expect(a.send(makePayload(0, 10), now)).toBe(0);
  });

  it('duplicates, replays and far-future PSNs are counted and never delivered twice', () => {
    const { a, b } = pair();
    for (let i = 0; i < 10; i++) a.send(makePayload(i, 50), 0);
    const dgs = flush(a, 0);
    for (const d of dgs) b.receive(d.hdr, d.payload, 0);
    for (const d of dgs) b.receive(d.hdr, d.payload, 1);
    const far = { ...dgs[0].hdr, psn: dgs[0].hdr.psn + 5000 };
    b.receive(far, dgs[0].payload, 2);
    const old = { ...dgs[0].hdr, psn: (dgs[0].hdr.psn - 7) >>> 0 };
    b.receive(old, dgs[0].payload, 2);
    expect(b.delivered.map(payloadIndex)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(b.counters.rxDuplicate).toBe(11);
    expect(b.counters.rxOutOfWindow).toBe(1);
  });

  it('one lost packet is repaired by a SACK-triggered fast retransmit, not a timeout', () => {
    const { a, b } = pair({ initialCwnd: 32 });
    for (let i = 0; i < 20; i++) a.send(makePayload(i, 50), 0);
    let now = 0;
    const first = flush(a, now);
    for (const d of first) if (d.hdr.psn !== 3) b.receive(d.hdr, d.payload, now);
    now = 0.2;
    for (const d of flush(b, now)) a.receive(d.hdr, d.payload, now);
    expect(a.counters.fastRetransmits).toBe(1);
    const again = flush(a, now);
    expect(again.map((d) => d.hdr.psn)).toEqual([3]);
    expect(again[0].hdr.retx).toBe(true);
    b.receive(again[0].hdr, again[0].payload, now);
    for (const d of flush(b, now)) {
      expect(d.hdr.type).toBe(UdpType.Ack);
      expect(d.hdr.sack).toEqual([]);
      expect(d.hdr.ackPsn).toBe(20);
      a.receive(d.hdr, d.payload, now);
    }
    expect(a.acked.length).toBe(20);
    expect(a.counters.timeouts).toBe(0);
    expect(b.delivered.length).toBe(20);
    expect(a.quiescent).toBe(true);
  });
});

describe('giving up on a silent peer', () => {
  // A sender with data outstanding and a peer that answers nothing, driven on a virtual clock.
  function silent(opts: ConstructorParameters<typeof TransportContext>[2], until: number): { failedAt: number | undefined; timeouts: number } {
    const a = new TransportContext(1, 0, opts, 2);
    a.send(makePayload(0, 100), 0);
    const out: TxDatagram[] = [];
    a.flush(0, out);
    let failedAt: number | undefined;
    for (let i = 0; i < 1000 && a.state === 'open'; i++) {
      const now = a.nextDeadline();
      if (now > until) break;
      a.tick(now);
      a.flush(now, out);
      if (a.failReason !== undefined) failedAt = now;
    }
    return { failedAt, timeouts: a.counters.timeouts };
  }

  it('a stall of a few seconds with data outstanding is survived: the count alone is not enough', () => {
    // 8 timeouts from a 10 ms RTO doubling to 1 s are spent in ~3.3 s; the peer's event loop
    // may well be stalled that long.
    const r = silent({ initialRtoMs: 10, minRtoMs: 10, maxRtoMs: 1000, retryLimit: 8, retryTimeoutMs: 6000 }, 5500);
    expect(r.timeouts).toBeGreaterThan(8);
    expect(r.failedAt).toBeUndefined();
  });

  it('silence past both the count and retryTimeoutMs fails the context', () => {
    const r = silent({ initialRtoMs: 10, minRtoMs: 10, maxRtoMs: 1000, retryLimit: 8, retryTimeoutMs: 6000 }, 20_000);
    expect(r.failedAt).toBeGreaterThanOrEqual(6000);
    expect(r.failedAt).toBeLessThan(8000);
  });

  it('retryTimeoutMs 0: the count alone decides', () => {
    const r = silent({ initialRtoMs: 10, minRtoMs: 10, maxRtoMs: 1000, retryLimit: 8, retryTimeoutMs: 0 }, 20_000);
    expect(r.failedAt).toBeLessThan(4000);
  });
});

// Memory reused while the context still holds payloads over it (core/detach.ts): after detach,
// what goes out — first sends, the queue behind the window and retransmissions of lost ones —
// is the bytes the payloads had, not what the memory holds next.
describe('TransportContext.detach', () => {
  it('payloads in flight, lost and queued over a buffer detached and then overwritten arrive with their bytes', () => {
    const { a, b } = pair({ initialPeerWindow: 4, initialCwnd: 4 });
    const mem = new Uint8Array(new SharedArrayBuffer(64 * 32));
    mem.fill(0x11);
    const N = 32;
    for (let i = 0; i < N; i++) a.send(i % 2 === 0 ? mem.subarray(i * 64, i * 64 + 64) : [mem.subarray(i * 64, i * 64 + 32), mem.subarray(i * 64 + 32, i * 64 + 64)], 0);
    // The first window goes and is lost; the rest waits in the queue.
    const lost: TxDatagram[] = [];
    a.flush(1, lost);
    expect(lost.length).toBeGreaterThan(0);
    a.detach((v) => v.buffer === mem.buffer);
    mem.fill(0xee);
    let now = 1;
    const got: Uint8Array[] = [];
    for (let step = 0; step < 10_000 && got.length < N; step++) {
      now += 5;
      a.tick(now);
      const out: TxDatagram[] = [];
      a.flush(now, out);
      for (const d of out) {
        const p = d.payload === null || d.payload instanceof Uint8Array ? d.payload : Buffer.concat(d.payload);
        b.receive(d.hdr, p, now);
      }
      const ds = b.delivered.splice(0);
      for (const p of ds) got.push(Uint8Array.from(p));
      if (ds.length > 0) b.release(ds.length);
      for (const d of flush(b, now)) a.receive(d.hdr, d.payload, now);
    }
    expect(got.length).toBe(N);
    for (const p of got) expect(p.every((x) => x === 0x11)).toBe(true);
  });
});
