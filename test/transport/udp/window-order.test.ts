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

describe('udp sender: window updates in order', () => {
  function held() {
    const hold = { held: false };
    const opts = { initialRtoMs: 10, minRtoMs: 10, maxRtoMs: 1000, initialCwnd: 64 };
    const a = new TransportContext(0x1111, 0, opts, 0x2222);
    const b = new TransportContext(0x2222, 0, { ...opts, rxHold: hold }, 0x1111);
    let now = 1;
    // Some traffic first, all acknowledged: both sides know each other's state.
    for (let i = 0; i < 4; i++) a.send(makePayload(i, 64), now);
    for (const d of flush(a, now)) b.receive(d.hdr, d.payload as Uint8Array, now);
    b.release(b.delivered.splice(0).length);
    b.rx.ackNow = true;
    for (const d of flush(b, now)) a.receive(d.hdr, d.payload as Uint8Array, now);
    expect(a.acked.length).toBe(4);
    // b holds; a sends into it and b answers with window 0.
    hold.held = true;
    now = 10;
    a.send(makePayload(9, 64), now);
    for (const d of flush(a, now)) b.receive(d.hdr, d.payload as Uint8Array, now);
    now = 11;
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
});
