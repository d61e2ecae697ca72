// Sans-I/O, on a clock the test sets: which context a newcomer may take once the table is full.
// A context the owner does not keep (keepPeer: no rc QP connected through it) goes to a newcomer
// once it is older than unownedContextMs, however often its peer sends — before, only 1 s of
// quiet freed one, so strangers that completed the handshake and sent an ACK a second held their
// slots for good. A young one, and one the owner keeps, are never taken by traffic alone.
import { describe, expect, it } from 'vitest';
import { UdpEndpoint, type OutDatagram, type PeerAddress } from '../../../src/transport/udp/endpoint.js';
import { UdpIntegrity } from '../../../src/wire/spec.js';
import { UdpType, decodeUdpHdr, type UdpHdr } from '../../../src/wire/udp.js';
import { seal, ZERO_COOKIE } from './raw-peer.js';

function hdrOf(d: OutDatagram): UdpHdr {
  const b = new Uint8Array(Buffer.concat(d.parts));
  const r = decodeUdpHdr(b, 0, b.length - 4);
  if (!r.ok) throw new Error(r.error);
  return r.value;
}

const to = (d: OutDatagram, p: PeerAddress): boolean => d.to.host === p.host && d.to.port === p.port;

/** A peer's cookie handshake with `ep` at `now`: the endpoint's context id for it, or 0 when refused. */
function open(ep: UdpEndpoint, from: PeerAddress, id: number, now: number): number {
  const token = new Uint8Array(8);
  ep.receive(seal({ srcCtx: id, cookie: ZERO_COOKIE, integ: UdpIntegrity.Crc32c }), from, now);
  const cookie = hdrOf(ep.poll(now).datagrams.find((d) => to(d, from))!).cookie!;
  ep.receive(seal({ srcCtx: id, cookie, token, ackReq: true, integ: UdpIntegrity.Crc32c }), from, now);
  const r = ep.poll(now);
  for (const d of r.delivered) ep.release(d.ctx);
  const answer = r.datagrams.find((d) => to(d, from) && hdrOf(d).dstCtx === id);
  return answer === undefined ? 0 : hdrOf(answer).srcCtx;
}

describe('udp endpoint: contexts no QP owns, under a full table', () => {
  it('past unownedContextMs a busy stranger\'s context goes to a newcomer (unownedReclaimed); before it, and a kept one at any age, never', () => {
    const kept = { host: '10.9.0.1', port: 1 };
    const ep = new UdpEndpoint({ mtu: 1472, integrity: 'crc32c', maxContexts: 3, unownedContextMs: 500, keepPeer: (p) => p.host === kept.host });
    const peers = [kept, { host: '10.9.0.2', port: 2 }, { host: '10.9.0.3', port: 3 }];
    const ids = peers.map((p, i) => ({ p, id: 0x100 + i, ours: open(ep, p, 0x100 + i, 0) }));
    expect(ids.every((x) => x.ours !== 0)).toBe(true);
    // Every peer sends an ACK inside its context every 100 ms: none is ever quiet for the 1 s guard.
    const traffic = (now: number): void => {
      for (const { p, id, ours } of ids) ep.receive(seal({ type: UdpType.Ack, srcCtx: id, dstCtx: ours, psn: 1, ackPsn: 0 }), p, now);
      ep.poll(now);
    };
    for (let t = 100; t <= 400; t += 100) traffic(t);
    // At 450 ms every context is younger than the grace: the newcomer is refused.
    expect(open(ep, { host: '10.8.0.1', port: 1 }, 0x201, 450)).toBe(0);
    expect([ep.counters.contextLimit, ep.counters.contextsReclaimed]).toEqual([1, 0]);
    traffic(500);
    // At 550 ms (a scan that found nothing is not repeated for 10 ms) the strangers are past it.
    expect(open(ep, { host: '10.8.0.2', port: 2 }, 0x202, 550)).not.toBe(0);
    expect([ep.counters.contextsReclaimed, ep.counters.unownedReclaimed, ep.contexts]).toEqual([1, 1, 3]);
    // The first stranger went (every ACK came at 500 ms: ties go in table order); the kept peer stays.
    expect(ep.context(peers[1]!)).toBeUndefined();
    expect(ep.context(kept)).toBeDefined();
    // Strangers' next datagram names the dropped id: it draws the owed RESET.
    ep.receive(seal({ type: UdpType.Ack, srcCtx: ids[1]!.id, dstCtx: ids[1]!.ours, psn: 1, ackPsn: 0 }), peers[1]!, 560);
    expect(ep.poll(560).datagrams.some((d) => to(d, peers[1]!) && hdrOf(d).type === UdpType.Reset)).toBe(true);

    // The newcomer just admitted is young; the other stranger is old: the next newcomer takes it.
    expect(open(ep, { host: '10.8.0.3', port: 3 }, 0x203, 600)).not.toBe(0);
    expect(ep.context(peers[2]!)).toBeUndefined();
    expect(ep.counters.unownedReclaimed).toBe(2);
    // Now only the kept peer (busy, 5 s old) and two young newcomers: refused, again and later, while the kept peer keeps sending.
    for (let t = 700; t <= 5000; t += 100) {
      ep.receive(seal({ type: UdpType.Ack, srcCtx: ids[0]!.id, dstCtx: ids[0]!.ours, psn: 1, ackPsn: 0 }), kept, t);
      ep.poll(t);
      if (t === 900) expect(open(ep, { host: '10.8.0.4', port: 4 }, 0x204, t)).toBe(0);
    }
    expect(open(ep, { host: '10.8.0.5', port: 5 }, 0x205, 5000)).not.toBe(0);
    // At 5 s the newcomers are old: one of them went, never the kept peer.
    expect(ep.context(kept)).toBeDefined();
    expect(ep.counters.unownedReclaimed).toBe(2);
    expect(ep.counters.contextsReclaimed).toBe(3);
  });
});
