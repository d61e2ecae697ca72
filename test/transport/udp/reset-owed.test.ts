// An off-path sender that spoofs a peer's host (any port) with a trickle of datagrams naming
// unknown contexts (~100/s, 40 bytes each) drained the per-host RESET bucket; one spread over
// other hosts (~1100/s) the device's. A peer whose context we reclaimed (slot pressure, past the
// 1 s guard) then never heard the RESET that lets it start a fresh stream and requeue: it
// retransmitted into silence and failed its work (retry-exceeded). Found by an audit; both attack
// cases failed before the fix. Now a datagram naming a context we dropped, from that context's
// peer address, is owed its RESET outside the rate limits (ContextTable.owesReset, resetsOwed),
// once per 100 ms; random ids still meet the buckets.
import { describe, expect, it } from 'vitest';
import { UdpEndpoint, type OutDatagram, type PeerAddress } from '../../../src/transport/udp/endpoint.js';
import { UdpType } from '../../../src/wire/udp.js';
import { makePayload, payloadIndex, seededIds } from '../../sim/random.js';
import { seal } from './raw-peer.js';

const A = { host: '10.0.0.1', port: 1 };
const B = { host: '10.0.0.2', port: 2 };
const C = { host: '10.0.0.3', port: 3 };
const bytes = (d: OutDatagram) => new Uint8Array(Buffer.concat(d.parts));

function run(attack: boolean, spread = false) {
  const a = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, randomId: seededIds(1) });
  // B has room for one peer context: a newcomer takes the slot of one idle >= 1 s.
  const b = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, randomId: seededIds(2), maxContexts: 1 });
  const c = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, randomId: seededIds(3) });
  const nodes: [PeerAddress, UdpEndpoint][] = [[A, a], [B, b], [C, c]];
  const delivered: number[] = [];
  const failed: string[] = [];
  const round = (now: number) => {
    const sent: { from: PeerAddress; to: PeerAddress; b: Uint8Array }[] = [];
    for (const [addr, ep] of nodes) {
      const r = ep.poll(now);
      if (ep === a) for (const f of r.failed) failed.push(f.reason);
      for (const d of r.delivered) ep.release(d.ctx);
      for (const d of r.datagrams) sent.push({ from: addr, to: d.to, b: bytes(d) });
    }
    for (const s of sent) nodes.find(([x]) => x.host === s.to.host && x.port === s.to.port)?.[1].receive(s.b, s.from, now);
    for (const [, ep] of nodes) for (const d of ep.takeDelivered()) {
      if (ep === b) delivered.push(payloadIndex(d.payload));
      ep.release(d.ctx);
    }
  };
  a.send(B, makePayload(1, 100), 0);
  for (let i = 0; i < 20; i++) round(0);
  expect(delivered).toEqual([1]);
  // C needs B's only slot 1.5 s later: A's quiescent context there is reclaimed (A keeps its own).
  c.send(B, makePayload(2, 100), 1500);
  for (let i = 0; i < 20; i++) round(1500);
  expect(b.counters.contextsReclaimed).toBe(1);
  expect(a.contexts).toBe(1);
  let forged = 0;
  // At 2 s A sends again; the attacker trickles 100 datagrams/s from A's host (port 4242).
  a.send(B, makePayload(3, 100), 2000);
  for (let t = 1990; t <= 14_000; t += 10) {
    if (attack) {
      // spread: from 250 other hosts (never A's), 1100/s: the device-wide bucket runs dry instead.
      const n = spread ? (t === 1990 ? 110 : 11) : t === 1990 ? 25 : 1;
      for (let k = 0; k < n; k++) {
        forged++;
        const host = spread ? `10.66.0.${forged % 250}` : A.host;
        b.receive(seal({ type: UdpType.Ack, srcCtx: 0x1000 + forged, dstCtx: 0xbad00000 + forged }), { host, port: 4242 }, t);
      }
    }
    round(t);
  }
  return { delivered, failed, forged, b: b.counters, a: a.counters };
}

describe('RESETs owed to a peer whose context was reclaimed, under a spoofed trickle', () => {
  it('without the trickle, the reclaimed peer gets its RESET and the payload is delivered', () => {
    const r = run(false);
    expect(r.a.resetsReceived).toBe(1);
    expect(r.delivered).toContain(3);
    expect(r.failed).toEqual([]);
  });

  it('a datagram naming a dropped context from another address, or a random id, is not owed one', () => {
    const r = run(true);
    // The trickle named random ids from A's host, port 4242: none of them owed.
    expect(r.b.resetsOwed).toBeLessThanOrEqual(3);
  });

  it('with ~100 forged 40-byte datagrams/s from the peer host, the peer still recovers (nothing forged may fail its work)', () => {
    const r = run(true);
    expect(r.b.resetsSuppressed).toBeGreaterThan(100);
    expect(r.b.resetsOwed).toBeGreaterThanOrEqual(1);
    expect(r.a.resetsReceived).toBeGreaterThanOrEqual(1);
    expect(r.failed).toEqual([]);
    expect(r.delivered).toContain(3);
  });

  it('with ~1100 forged datagrams/s from 250 OTHER hosts (device-wide bucket), the peer still recovers', () => {
    const r = run(true, true);
    expect(r.b.resetsSuppressed).toBeGreaterThan(100);
    expect(r.a.resetsReceived).toBeGreaterThanOrEqual(1);
    expect(r.failed).toEqual([]);
    expect(r.delivered).toContain(3);
  });
});
