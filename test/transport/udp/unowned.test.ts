// Sans-I/O, on a clock the test sets: which context a newcomer may take once the table is full.
// A context the owner does not keep (keepPeer: no rc QP connected through it) goes to a newcomer
// once it is older than unownedContextMs, however often its peer sends — before, only 1 s of
// quiet freed one, so strangers that completed the handshake and sent an ACK a second held their
// slots for good. A young one, and one the owner keeps, are never taken by traffic alone. One
// that keeps DATA of ours unacked (a zero window stops the retry count) goes last, failed.
import { describe, expect, it } from 'vitest';
import { UdpEndpoint, type Failure, type OutDatagram, type PeerAddress } from '../../../src/transport/udp/endpoint.js';
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

/** A peer's cookie handshake with `ep` at `now`: the endpoint's context id for it, or 0 when refused. Failures its polls report go to `failed`. */
function open(ep: UdpEndpoint, from: PeerAddress, id: number, now: number, failed: Failure[] = []): number {
  const token = new Uint8Array(8);
  ep.receive(seal({ srcCtx: id, cookie: ZERO_COOKIE, integ: UdpIntegrity.Crc32c }), from, now);
  const first = ep.poll(now);
  failed.push(...first.failed);
  const cookie = hdrOf(first.datagrams.find((d) => to(d, from))!).cookie!;
  ep.receive(seal({ srcCtx: id, cookie, token, ackReq: true, integ: UdpIntegrity.Crc32c }), from, now);
  const r = ep.poll(now);
  failed.push(...r.failed);
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

  it('a stranger that keeps DATA of ours unacked (a zero window stops the retry count) is taken past the grace, after the quiescent ones, its payload failed', () => {
    const kept = { host: '10.9.0.1', port: 1 };
    const busy = { host: '10.9.0.2', port: 2 };
    const quiet = { host: '10.9.0.3', port: 3 };
    const ep = new UdpEndpoint({ mtu: 1472, integrity: 'crc32c', maxContexts: 3, unownedContextMs: 500, keepPeer: (p) => p.host === kept.host });
    const k = open(ep, kept, 0x101, 0);
    const b = open(ep, busy, 0x102, 0);
    const q = open(ep, quiet, 0x103, 0);
    expect(k * b * q).not.toBe(0);
    // The engine answers the stranger (what a Send into a missing QP or a REQ to the cm QP draws).
    const id = ep.send(busy, new Uint8Array(16), 0);
    expect(ep.poll(0).datagrams.some((d) => to(d, busy) && hdrOf(d).type === UdpType.Data)).toBe(true);
    // It never acks that DATA; every 100 ms an ACK that acks nothing, window 0 ("alive, full").
    // The other two send plain ACKs.
    const failed: Failure[] = [];
    const step = (t: number): void => {
      ep.receive(seal({ type: UdpType.Ack, srcCtx: 0x102, dstCtx: b, psn: 1, ackPsn: 0, window: 0 }), busy, t);
      ep.receive(seal({ type: UdpType.Ack, srcCtx: 0x101, dstCtx: k, psn: 1, ackPsn: 0 }), kept, t);
      ep.receive(seal({ type: UdpType.Ack, srcCtx: 0x103, dstCtx: q, psn: 1, ackPsn: 0 }), quiet, t);
      failed.push(...ep.poll(t).failed);
    };
    for (let t = 100; t <= 400; t += 100) step(t);
    expect(open(ep, { host: '10.8.0.1', port: 1 }, 0x201, 450, failed)).toBe(0);
    // Past the retry limit's 8 tries and 6 s it is still there: the zero window keeps resetting the count.
    for (let t = 500; t <= 10_000; t += 100) step(t);
    expect(ep.context(busy)).toBeDefined();
    expect(ep.context(busy)!.quiescent).toBe(false);
    expect(failed).toEqual([]);
    // A newcomer: the quiescent stranger goes first (the kept peer is asked, and stays).
    expect(open(ep, { host: '10.8.0.2', port: 2 }, 0x202, 10_050, failed)).not.toBe(0);
    expect([ep.context(quiet), ep.context(busy) !== undefined, ep.context(kept) !== undefined]).toEqual([undefined, true, true]);
    expect(failed).toEqual([]);
    // The next newcomer: the one just admitted is young; the busy stranger goes, its payload failed.
    expect(open(ep, { host: '10.8.0.3', port: 3 }, 0x203, 10_100, failed)).not.toBe(0);
    expect([ep.context(busy), ep.context(kept) !== undefined]).toEqual([undefined, true]);
    expect([ep.counters.contextsReclaimed, ep.counters.unownedReclaimed]).toEqual([2, 2]);
    failed.push(...ep.poll(10_110).failed);
    expect(failed.map((f) => [f.id, f.reason])).toEqual([[id, 'retry-exceeded']]);
  });
});
