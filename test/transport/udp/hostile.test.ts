// Hostile input to the endpoint: garbage, truncated, oversized, corrupted, stale, replayed,
// unknown contexts, restarted peers, floods. Each ends as a counted drop, never an exception,
// never a delivery, and memory stays bounded. (The handshake, restart proofs, resets and
// limits have their own file: handshake.test.ts.)
// Endpoints here settle on integrity 'crc32c': the injected datagrams carry CRC32C trailers, so
// they reach the checks under test (in an xxh3 context they would stop at the trailer kind).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { crc32c as nodeCrc32c } from '@node-rs/crc32';
import { UdpEndpoint, type OutDatagram } from '../../../src/transport/udp/endpoint.js';
import { UdpType, encodeUdpHdr, udpHeaderLength, type UdpHdr } from '../../../src/wire/udp.js';
import { makePayload, seededIds } from '../../sim/random.js';

const A = { host: '10.0.0.1', port: 1 };
const B = { host: '10.0.0.2', port: 2 };

function bytes(d: OutDatagram): Uint8Array {
  // A plain Uint8Array: Buffer#slice would return a view and a "copy" would alias.
  return new Uint8Array(Buffer.concat(d.parts));
}

/** Build a datagram with a valid trailer (independent CRC implementation). */
function forge(h: Partial<UdpHdr>, payload?: Uint8Array): Uint8Array {
  const hdr: UdpHdr = {
    type: UdpType.Data, ackReq: false, retx: false, window: 10, srcCtx: 0x77, dstCtx: 0, psn: 0, ackPsn: 0,
    tsVal: 1, tsEcr: 0, dstQpn: 0, srcQpn: 0, sack: [], ...h,
  };
  const hl = udpHeaderLength(hdr);
  const p = payload ?? (hdr.type === UdpType.Data ? makePayload(1, 20) : new Uint8Array(0));
  const buf = Buffer.alloc(hl + p.length + 4);
  encodeUdpHdr(hdr, buf, 0);
  buf.set(p, hl);
  buf.writeUInt32LE(nodeCrc32c(buf.subarray(0, hl + p.length)), hl + p.length);
  return buf;
}

function endpoints() {
  const a = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, randomId: seededIds(1) });
  const b = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, randomId: seededIds(2) });
  const delivered: Uint8Array[] = [];
  const exchange = (now: number) => {
    for (let i = 0; i < 20; i++) {
      const ra = a.poll(now);
      const rb = b.poll(now);
      for (const d of ra.datagrams) b.receive(bytes(d), A, now);
      for (const d of rb.datagrams) a.receive(bytes(d), B, now);
      for (const d of rb.delivered) {
        delivered.push(d.payload.slice());
        b.release(d.ctx);
      }
      if (ra.datagrams.length + rb.datagrams.length === 0) break;
    }
  };
  return { a, b, delivered, exchange };
}

/** Two endpoints past the handshake (one payload A → B delivered and acked). */
function connected() {
  const p = endpoints();
  p.a.send(B, makePayload(100, 10), 0);
  p.exchange(0);
  expect(p.delivered.length).toBe(1);
  p.delivered.length = 0;
  return p;
}

describe('UDP endpoint under hostile input', () => {
  it('random garbage: no exception, no delivery, every datagram counted', () => {
    const ep = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, maxDatagram: 2000 });
    let n = 0;
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 2100 }), fc.boolean(), (junk, sealed) => {
        // Half of them carry a valid CRC, so the parser behind the CRC gets fuzzed too.
        let buf: Uint8Array = junk;
        if (sealed && junk.length >= 4) {
          const b = Buffer.from(junk);
          b.writeUInt32LE(nodeCrc32c(b.subarray(0, b.length - 4)), b.length - 4);
          buf = b;
        }
        ep.receive(buf, { host: '10.9.9.9', port: 9 + (n++ % 7) }, n);
        const r = ep.poll(n);
        expect(r.delivered.length === 0 || sealed).toBe(true);
      }),
      { numRuns: 3000, seed: 42 },
    );
    const c = ep.counters;
    expect(c.rxDatagrams).toBe(n);
    expect(c.truncated + c.oversized + c.badCrc + c.malformed + c.unknownContext + c.stale + c.contextLimit).toBeGreaterThan(0);
  });

  it('truncated, oversized and corrupted datagrams are counted drops', () => {
    const { a, b, delivered, exchange } = endpoints();
    a.send(B, makePayload(0, 500), 0);
    const d = bytes(a.poll(0).datagrams[0]);
    b.receive(d.subarray(0, 20), A, 0);
    const big = new Uint8Array(70_000);
    big.set(d);
    b.receive(big, A, 0);
    for (let i = 0; i < d.length; i += 37) {
      const c = d.slice();
      c[i] ^= 0x40;
      b.receive(c, A, 0);
    }
    expect(b.counters.truncated).toBe(1);
    expect(b.counters.oversized).toBe(1);
    expect(b.counters.badCrc).toBe(Math.ceil(d.length / 37));
    expect(b.poll(0).delivered).toEqual([]);
    b.receive(d, A, 0);
    exchange(0);
    expect(delivered.length, JSON.stringify(b.counters)).toBe(1);
  });

  it('replayed datagrams, stale context ids and unknown contexts are dropped and counted', () => {
    const { a, b, delivered, exchange } = connected();
    const sent: Uint8Array[] = [];
    for (let i = 0; i < 5; i++) a.send(B, makePayload(i, 100), 0);
    for (const d of a.poll(0).datagrams) sent.push(bytes(d));
    for (const s of sent) b.receive(s, A, 0);
    const r0 = b.poll(0);
    expect(r0.delivered.length).toBe(5);
    for (const d of r0.delivered) b.release(d.ctx);
    for (const d of r0.datagrams) a.receive(bytes(d), B, 0);
    // Replay everything, twice.
    for (const s of [...sent, ...sent]) b.receive(s, A, 1);
    expect(b.poll(1).delivered).toEqual([]);
    expect(b.context(A)!.counters.rxDuplicate).toBe(10);
    // A datagram naming a context id B never had: counted, answered with a RESET.
    b.receive(forge({ dstCtx: 0xdeadbeef, srcCtx: 0x99 }), { host: '10.3.3.3', port: 3 }, 2);
    expect(b.counters.unknownContext).toBe(1);
    expect(b.counters.resetsSent).toBe(1);
    const rst = b.poll(2).datagrams.filter((d) => d.to.host === '10.3.3.3');
    expect(rst.length).toBe(1);
    // A RESET naming nobody we know is ignored.
    a.receive(bytes(rst[0]), B, 2);
    expect(a.counters.unknownContext).toBe(1);
    // A datagram aimed at B's live context but with a foreign source context id: stale.
    const live = b.context(A)!;
    b.receive(forge({ dstCtx: live.localId, srcCtx: 0x12345 }), A, 3);
    expect(b.counters.stale).toBe(1);
    // A RESET from A's address naming B's context but not echoing A's id: ignored.
    b.receive(forge({ type: UdpType.Reset, dstCtx: live.localId, srcCtx: 0x12345, token: new Uint8Array(8) }), A, 3);
    expect(b.counters.resetsInvalid).toBe(1);
    exchange(3);
    expect(delivered.length).toBe(0);
    expect(a.context(B)!.outstanding).toBe(0);
    expect(b.counters.peerRestarts + a.counters.peerRestarts).toBe(0);
  });

  it('a restarted peer resets the context once its cookie echo proves it: old sends fail with peer-reset, old incarnation is stale', () => {
    const { a, b } = connected();
    const oldPeer = a.context(B)!.localId;
    // B has something outstanding to A that A will never acknowledge (A "restarts").
    b.send(A, makePayload(1, 100), 1);
    b.poll(1);
    const a2 = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, randomId: seededIds(99) });
    a2.send(B, makePayload(2, 100), 2);
    // Its first datagram is only a claim: B answers with a COOKIE and keeps its context.
    for (const d of a2.poll(2).datagrams) b.receive(bytes(d), A, 2);
    let r = b.poll(2);
    expect(b.counters.restartClaims).toBe(1);
    expect(b.counters.peerRestarts).toBe(0);
    expect(r.failed).toEqual([]);
    expect(r.delivered).toEqual([]);
    // The new incarnation echoes it from A's address: now the restart is proven.
    for (const d of r.datagrams) a2.receive(bytes(d), B, 2);
    for (const d of a2.poll(2).datagrams) b.receive(bytes(d), A, 2);
    r = b.poll(2);
    expect(b.counters.peerRestarts).toBe(1);
    expect(r.failed.map((f) => f.reason)).toEqual(['peer-reset']);
    expect(r.delivered.length).toBe(1);
    // A datagram from the old incarnation arriving late is stale, not a second reset.
    b.receive(forge({ srcCtx: oldPeer, dstCtx: 0, psn: 9 }), A, 3);
    expect(b.counters.stale).toBe(1);
    expect(b.counters.peerRestarts).toBe(1);
  });

  it('a peer that reclaimed its context answers with RESET (its token) and the sender starts a fresh stream', () => {
    const { a, b, delivered, exchange } = connected();
    a.send(B, makePayload(0, 100), 0);
    exchange(0);
    // B forgets A after idleMs; A still has its context.
    b.poll(31_000);
    expect(b.contexts).toBe(0);
    a.send(B, makePayload(1, 100), 31_000);
    exchange(31_000);
    expect(b.counters.unknownContext).toBe(1);
    expect(a.counters.resetsReceived).toBe(1);
    expect(a.counters.peerRestarts).toBe(0);
    expect(delivered.map((p) => p[3])).toEqual([0, 1]);
    expect(a.context(B)!.outstanding).toBe(0);
  });

  it('a flood of first contacts from 5000 addresses creates no context: each gets a COOKIE no longer than itself', () => {
    const ep = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, maxContexts: 64, randomId: seededIds(3) });
    let replyBytes = 0;
    let floodBytes = 0;
    for (let i = 0; i < 5000; i++) {
      const d = forge({ srcCtx: i + 1, psn: 0 });
      floodBytes += d.length;
      ep.receive(d, { host: '10.8.0.1', port: 1000 + i }, 0);
      if (i % 100 === 0) for (const o of ep.poll(0).datagrams) replyBytes += bytes(o).length;
    }
    for (const o of ep.poll(0).datagrams) replyBytes += bytes(o).length;
    expect(ep.contexts).toBe(0);
    expect(ep.counters.contextsCreated).toBe(0);
    expect(ep.counters.cookiesSent).toBe(5000);
    expect(replyBytes).toBeLessThanOrEqual(floodBytes);
  });

  it('a flood of datagrams from one peer beyond its credit is dropped, not buffered', () => {
    const a = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, randomId: seededIds(1) });
    const ep = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, context: { rcvCredit: 32 }, randomId: seededIds(4) });
    // A handshake with ep, then a flood with the ids it set up (an on-path sender).
    a.send(B, makePayload(1, 10), 1);
    for (let i = 0; i < 6; i++) {
      for (const d of a.poll(1).datagrams) ep.receive(bytes(d), A, 1);
      const r = ep.poll(1);
      for (const d of r.delivered) ep.release(d.ctx);
      for (const d of r.datagrams) a.receive(bytes(d), B, 1);
    }
    const ctx = ep.context(A)!;
    expect(ctx.peerId).toBe(a.context(B)!.localId);
    let held = 0;
    for (let psn = 1; psn < 2001; psn++) ep.receive(forge({ srcCtx: ctx.peerId, dstCtx: ctx.localId, psn }), A, 2);
    held += ep.poll(2).delivered.length;
    expect(held).toBe(32);
    const c = ctx.counters;
    expect(c.rxNoCredit + c.rxOutOfWindow).toBe(2000 - 32);
  });
});
