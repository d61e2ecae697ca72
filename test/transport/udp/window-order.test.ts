// Which header's window the sender believes: a window update is taken only from a header not
// older than the last one that updated the window (RFC 9293 §3.10.7.4's SND.WL1/SND.WL2, here
// the cumulative ack, then the peer's timestamp). A zero-window ACK sent while the peer held its
// input and reordered behind the update that ended the hold must not shut the window again.
import { describe, expect, it } from 'vitest';
import type { TxDatagram } from '../../../src/transport/udp/context-options.js';
import { TransportContext } from '../../../src/transport/udp/context.js';
import { UdpType } from '../../../src/wire/udp.js';
import { makePayload } from '../../sim/random.js';

function flush(c: TransportContext, now: number): TxDatagram[] {
  const out: TxDatagram[] = [];
  c.flush(now, out);
  return out;
}

/** The clock (ms) at which the peer's header timestamps (µs mod 2^32) wrap to 0. */
const TS_WRAP_MS = 2 ** 32 / 1000;

describe('udp sender: window updates in order', () => {
  /** Both ends with some traffic acknowledged, then b holding and its window-0 ACK (`stale`) built at t0 + 11 ms. */
  function held(t0 = 0) {
    const hold = { held: false };
    const opts = { initialRtoMs: 10, minRtoMs: 10, maxRtoMs: 1000, initialCwnd: 64 };
    const a = new TransportContext(0x1111, t0, opts, 0x2222);
    const b = new TransportContext(0x2222, t0, { ...opts, rxHold: hold }, 0x1111);
    let now = t0 + 1;
    // Some traffic first, all acknowledged: both sides know each other's state.
    for (let i = 0; i < 4; i++) a.send(makePayload(i, 64), now);
    for (const d of flush(a, now)) b.receive(d.hdr, d.payload as Uint8Array, now);
    b.release(b.delivered.splice(0).length);
    b.rx.ackNow = true;
    for (const d of flush(b, now)) a.receive(d.hdr, d.payload as Uint8Array, now);
    expect(a.acked.length).toBe(4);
    // b holds; a sends into it and b answers with window 0.
    hold.held = true;
    now = t0 + 10;
    a.send(makePayload(9, 64), now);
    for (const d of flush(a, now)) b.receive(d.hdr, d.payload as Uint8Array, now);
    now = t0 + 11;
    const shut = flush(b, now);
    expect(shut.length).toBe(1);
    expect(shut[0].hdr.type).toBe(UdpType.Ack);
    expect(shut[0].hdr.window).toBe(0);
    return { a, b, hold, stale: shut[0], now };
  }

  it('a stale zero-window ACK that arrives after the update does not shut the window again', () => {
    const { a, b, hold, stale } = held();
    let now = 500;
    hold.held = false;
    b.rx.ackNow = true; // the endpoint's windowOpened
    const update = flush(b, now);
    expect(update.length).toBe(1);
    expect(update[0].hdr.window).toBeGreaterThan(0);
    // Same cumulative ack and PSN as the stale one: only its timestamp is newer.
    expect(update[0].hdr.ackPsn).toBe(stale.hdr.ackPsn);
    expect(update[0].hdr.psn).toBe(stale.hdr.psn);
    a.receive(update[0].hdr, null, now);
    a.receive(stale.hdr, null, now);
    expect(a.stats.peerRwnd).toBeGreaterThan(0);
    // New work goes at once, not at the next persist probe.
    a.send(makePayload(10, 64), now);
    a.send(makePayload(11, 64), now);
    const out = flush(a, now);
    expect(out.filter((d) => d.hdr.type === UdpType.Data).length).toBeGreaterThanOrEqual(2);
  });

  it('an update in order is taken; a zero window that is newer still shuts it', () => {
    const { a, b, hold } = held();
    let now = 500;
    hold.held = false;
    b.rx.ackNow = true;
    for (const d of flush(b, now)) a.receive(d.hdr, null, now);
    expect(a.stats.peerRwnd).toBeGreaterThan(0);
    hold.held = true;
    now = 600;
    b.rx.ackNow = true;
    for (const d of flush(b, now)) a.receive(d.hdr, null, now);
    expect(a.stats.peerRwnd).toBe(0);
  });

  // The peer's timestamps wrap every 2^32 µs (about 71.6 minutes): the hold begins just before a
  // wrap and ends just after it, so the update's timestamp is numerically far below the stale
  // ACK's. Only serial-number comparison (RFC 1982, as RFC 7323 §5.2 for TCP's timestamps)
  // orders them; a plain `>=` took the stale window 0 and refused the update.
  it('across the peer\'s timestamp wrap: the update taken, the stale zero window after it ignored', () => {
    const t0 = TS_WRAP_MS - 100;
    const { a, b, hold, stale } = held(t0);
    const now = t0 + 500;
    hold.held = false;
    b.rx.ackNow = true;
    const update = flush(b, now);
    expect(update.length).toBe(1);
    expect(update[0].hdr.window).toBeGreaterThan(0);
    expect(update[0].hdr.ackPsn).toBe(stale.hdr.ackPsn);
    // The wrap lies between them: the newer timestamp is the smaller number.
    expect(stale.hdr.tsVal).toBeGreaterThan(2 ** 32 - 200_000);
    expect(update[0].hdr.tsVal).toBeLessThan(stale.hdr.tsVal);
    a.receive(update[0].hdr, null, now);
    expect(a.stats.peerRwnd).toBeGreaterThan(0);
    a.receive(stale.hdr, null, now);
    expect(a.stats.peerRwnd).toBeGreaterThan(0);
    a.send(makePayload(10, 64), now);
    const out = flush(a, now);
    expect(out.filter((d) => d.hdr.type === UdpType.Data).length).toBeGreaterThanOrEqual(1);
  });

  it('across the wrap, in order: the update before it opens the window, a newer zero window after it shuts it', () => {
    const t0 = TS_WRAP_MS - 600;
    const { a, b, hold } = held(t0);
    let now = t0 + 500;
    hold.held = false;
    b.rx.ackNow = true;
    const update = flush(b, now);
    for (const d of update) a.receive(d.hdr, null, now);
    expect(a.stats.peerRwnd).toBeGreaterThan(0);
    hold.held = true;
    now = t0 + 700;
    b.rx.ackNow = true;
    const shut = flush(b, now);
    expect(shut.length).toBe(1);
    expect(shut[0].hdr.tsVal).toBeLessThan(update[0].hdr.tsVal);
    a.receive(shut[0].hdr, null, now);
    expect(a.stats.peerRwnd).toBe(0);
    // And the update, delivered again late (reordered or duplicated), does not open it.
    a.receive(update[0].hdr, null, now);
    expect(a.stats.peerRwnd).toBe(0);
  });
});
