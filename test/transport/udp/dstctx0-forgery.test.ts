// An off-path forger that guessed one 32-bit context id, after the handshake: a datagram with
// dstCtx 0 from the peer's address and the peer's srcCtx was taken (endpoint.ts receive, the
// dstCtx 0 branch), with a CRC32C trailer even in an xxh3 context — one id of the two the
// context ids promise (64 bits), and PSNs start at 0. A forged DATA then took the PSN of the
// peer's next real one: B delivered the forger's bytes, dropped the real payload as a duplicate
// and acked it, so A reported Success for bytes B never got. Once the peer has named our id,
// dstCtx 0 with its id is dropped (counted stale). Found by an audit (2026-11-29).
import { describe, expect, it } from 'vitest';
import { UdpEndpoint, type OutDatagram } from '../../../src/transport/udp/endpoint.js';
import { UdpType } from '../../../src/wire/udp.js';
import { makePayload, seededIds } from '../../sim/random.js';
import { seal } from './raw-peer.js';

const A = { host: '10.0.0.1', port: 1 };
const B = { host: '10.0.0.2', port: 2 };
const bytes = (d: OutDatagram) => new Uint8Array(Buffer.concat(d.parts));

describe('dstCtx 0 after the handshake', () => {
  for (const integrity of ['crc32c', 'xxh3'] as const) {
    it(`${integrity}: a forged DATA naming only the peer's srcCtx (dstCtx 0, CRC32C trailer) is refused once the peer knows our id`, () => {
      const a = new UdpEndpoint({ integrity, mtu: 1472, randomId: seededIds(1) });
      const b = new UdpEndpoint({ integrity, mtu: 1472, randomId: seededIds(2) });
      const got: Uint8Array[] = [];
      let aAcked = 0;
      const xchg = (now: number) => {
        for (let i = 0; i < 20; i++) {
          const ra = a.poll(now);
          const rb = b.poll(now);
          aAcked += ra.acked.length;
          for (const d of ra.datagrams) b.receive(bytes(d), A, now);
          for (const d of rb.datagrams) a.receive(bytes(d), B, now);
          for (const d of b.takeDelivered()) {
            got.push(d.payload.slice());
            b.release(d.ctx);
          }
          if (ra.datagrams.length + rb.datagrams.length === 0) break;
        }
      };
      a.send(B, makePayload(7, 50), 0);
      xchg(0);
      a.send(B, makePayload(8, 50), 1);
      xchg(1);
      expect(got.length).toBe(2);
      const ctx = b.context(A)!;
      // The peer knows our id by now (it sent datagrams naming it).
      const peerId = ctx.peerId;
      got.length = 0;
      aAcked = 0;
      // Off-path forger: knows (guessed) A's 32-bit context id only; B's id is not needed.
      // PSN 2 is A's next (PSNs start at 0); ackPsn 0 lies in B's acceptable range.
      const evil = new Uint8Array(50).fill(0xee);
      b.receive(seal({ type: UdpType.Data, srcCtx: peerId, dstCtx: 0, psn: 2, ackPsn: 0, window: 16 }, evil), A, 2);
      const forgedTaken = b.takeDelivered();
      for (const d of forgedTaken) b.release(d.ctx);
      // A's real payload with PSN 2 now arrives: a "duplicate" to B, acked.
      a.send(B, makePayload(9, 50), 2);
      xchg(2);
      expect(forgedTaken.length).toBe(0);
      expect(got.length).toBe(1);
      expect(got[0]).toEqual(makePayload(9, 50));
      expect(aAcked).toBe(1);
      expect(b.counters.stale).toBeGreaterThan(0);
    });
  }
});
