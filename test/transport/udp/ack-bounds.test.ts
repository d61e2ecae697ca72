// Every ACK/SACK field a peer sends is checked against the send window before any work
// (issue #11, hole 2: one ACK with SACK block [1, 2^31) walked 2^31 PSNs). Properties, seeded:
// - a context with data in flight (PSNs anywhere, wraparound included) fed hostile ack fields
//   at every window edge: the verdict matches an independent oracle of the acceptable range
//   (RFC 5961 §5: [sndUna - maxWindow, sndNxt]; SACK blocks non-empty, above the ack, within
//   what was sent), a refused datagram changes nothing, and the PSNs visited per datagram stay
//   within a few windows whatever the numbers;
// - two endpoints moving payloads while an attacker injects hostile datagrams (off-path: any
//   source, any ids; on-path: the right ids with out-of-window fields): every payload delivered
//   exactly once and acked, nothing failed, no context or table beyond its bound.
// Endpoints here settle on integrity 'crc32c': the injected datagrams carry CRC32C trailers, so
// they reach the checks under test (in an xxh3 context they would stop at the trailer kind).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RxVerdict, type TxDatagram } from '../../../src/transport/udp/context-options.js';
import { TransportContext } from '../../../src/transport/udp/context.js';
import { UdpEndpoint, type OutDatagram } from '../../../src/transport/udp/endpoint.js';
import { UdpType, type SackBlock, type UdpHdr } from '../../../src/wire/udp.js';
import { makePayload, payloadIndex, rng, seededIds } from '../../sim/random.js';
import { seal, ZERO_COOKIE } from './raw-peer.js';

const W = 64;

/** The sender's state that a refused datagram must leave as it was (typed arrays copied). */
function snapshot(c: TransportContext): unknown {
  const o = c as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of ['lastActivity', 'state']) out[k] = o[k];
  // The sending half (./sender.ts), its congestion window and RTT estimate (./congestion.ts),
  // and the receive half (./receiver.ts).
  const tx = o.tx as Record<string, unknown>;
  for (const k of [
    'sndUna', 'sndNxt', 'pipe', 'fack', 'haveFack', 'retxHead', 'peerRightEdge',
    'peerRwnd', 'peerCum', 'rtoDeadline', 'ptoDeadline', 'probes', 'retries',
  ]) out[k] = tx[k];
  const cc = tx.cc as Record<string, unknown>;
  for (const k of ['cwnd', 'ssthresh', 'inRecovery', 'recoveryPoint', 'srtt', 'rttvar', 'rto']) out[k] = cc[k];
  const rx = o.rx as Record<string, unknown>;
  for (const k of ['rcvNxt', 'pending', 'ackNow', 'ackDeadline', 'tsRecent']) out[`rx.${k}`] = rx[k];
  // Every key must exist: a renamed field would otherwise compare undefined with undefined.
  for (const [k, v] of Object.entries(out)) if (v === undefined) throw new Error(`snapshot: no field ${k}`);
  out.slotFlags = Array.from(tx.slotFlags as Uint8Array);
  out.retx = [...(tx.retx as number[])];
  out.acked = [...c.acked];
  return out;
}

/** A field of the sending half (./sender.ts). */
const field = (c: TransportContext, k: string) => (c as unknown as { tx: Record<string, number> }).tx[k]!;

/** The acceptable range, written independently of the code under test (BigInt-free modular arithmetic). */
function oracle(sndUna: number, sndNxt: number, cum: number, sack: SackBlock[]): boolean {
  const lo = (sndUna - W + 0x1_0000_0000) % 0x1_0000_0000;
  const off = (x: number) => (x - lo + 0x1_0000_0000) % 0x1_0000_0000;
  const top = off(sndNxt);
  if (off(cum) > top) return false;
  return sack.every((b) => off(b.end) <= top && off(b.start) < off(b.end) && off(b.start) > off(cum));
}

/** A sender with `k` payloads sent from initial PSN `isn`; the receiver got the ones `got` picks, and its ACK was applied. */
function sender(isn: number, k: number, got: (i: number) => boolean) {
  const opts = { maxWindow: W, initialPeerWindow: W, initialCwnd: W, initialPsn: isn, rcvCredit: 1024 };
  const s = new TransportContext(1, 0, opts, 2);
  const r = new TransportContext(2, 0, opts, 1);
  for (let i = 0; i < k; i++) s.send(makePayload(i, 8), 0);
  const out: TxDatagram[] = [];
  s.flush(0, out);
  for (let i = 0; i < out.length; i++) if (got(i)) r.receive(out[i]!.hdr, out[i]!.payload as Uint8Array, 0);
  const acks: TxDatagram[] = [];
  r.flush(0.5, acks);
  for (const a of acks) s.receive(a.hdr, null, 0.5);
  return s;
}

function ack(cum: number, sack: SackBlock[], window = W): UdpHdr {
  return { type: UdpType.Ack, ackReq: false, retx: false, window, srcCtx: 2, dstCtx: 1, psn: 0, ackPsn: cum >>> 0, tsVal: 1, tsEcr: 0, dstQpn: 0, srcQpn: 0, sack };
}

describe('ACK/SACK fields against the send window', () => {
  it('the issue\'s datagram: SACK [1, 2^31) on a context with data in flight is refused with no state change and no walk', () => {
    const s = sender(0, 10, (i) => i % 2 === 0);
    const before = snapshot(s);
    const scanned = s.counters.scanned;
    expect(s.receive(ack(0, [{ start: 1, end: 0x8000_0000 }]), null, 1)).toBe(RxVerdict.BadSack);
    expect(snapshot(s)).toEqual(before);
    expect(s.counters.scanned).toBe(scanned);
    expect(s.counters.rxBadSack).toBe(1);
    // And an ack beyond what was sent.
    expect(s.receive(ack(11, []), null, 1)).toBe(RxVerdict.BadAck);
    expect(snapshot(s)).toEqual(before);
  });

  it('hostile ack fields at every window edge (wraparound included): verdict = oracle, refused changes nothing, work bounded by the window', () => {
    const isns = [0, 0xffff_fff0, 0x7fff_fff8, 0xffff_ffff - W / 2, 12345];
    fc.assert(
      fc.property(
        fc.constantFrom(...isns), fc.integer({ min: 0, max: W }), fc.integer({ min: 0, max: 0xffff }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 13 }), fc.integer({ min: -2, max: 2 })), { minLength: 1, maxLength: 17 }),
        fc.integer({ min: 0, max: 0xffff_ffff }), fc.integer({ min: 0, max: 0xffff }),
        (isn, k, gotMask, picks, randomPsn, window) => {
          const s = sender(isn, k, (i) => ((gotMask >>> (i % 16)) & 1) === 1);
          const una = field(s, 'sndUna') >>> 0;
          const nxt = field(s, 'sndNxt') >>> 0;
          // Edge values and their neighbours: the window's ends, half the sequence space away, 0, 2^32-1, a random PSN.
          const edges = [una, nxt, (una - W) >>> 0, (una - W - 1) >>> 0, (una + 0x8000_0000) >>> 0, (nxt + 0x7fff_ffff) >>> 0, 0, 0xffff_ffff, 1, 0x8000_0000, randomPsn, (una + 1) >>> 0, (nxt - 1) >>> 0, (una + W) >>> 0];
          const psn = ([i, d]: [number, number]) => (edges[i % edges.length]! + d) >>> 0;
          const cum = psn(picks[0]!);
          const sack: SackBlock[] = [];
          for (let b = 1; b + 1 < picks.length && sack.length < 8; b += 2) sack.push({ start: psn(picks[b]!), end: psn(picks[b + 1]!) });
          const before = snapshot(s);
          const scanned = s.counters.scanned;
          const v = s.receive(ack(cum, sack, window), null, 1);
          const work = s.counters.scanned - scanned;
          expect(v === RxVerdict.Ok).toBe(oracle(una, nxt, cum, sack));
          // cum walk + up to 4 SACK blocks + left-edge advance + loss detection, each within [sndUna, sndNxt).
          expect(work).toBeLessThanOrEqual(7 * ((nxt - una) >>> 0));
          if (v !== RxVerdict.Ok) {
            expect(snapshot(s)).toEqual(before);
          } else {
            const una2 = field(s, 'sndUna') >>> 0;
            expect((nxt - una2) >>> 0).toBeLessThanOrEqual((nxt - una) >>> 0);
            expect(field(s, 'sndNxt') >>> 0).toBe(nxt);
            expect(field(s, 'pipe')).toBeGreaterThanOrEqual(0);
            expect(new Set(s.acked).size).toBe(s.acked.length);
            expect(s.acked.length).toBeLessThanOrEqual(k);
          }
        },
      ),
      { numRuns: 4000, seed: 1111 },
    );
  });
});

describe('endpoints under injected hostile datagrams (seeded)', () => {
  it('payloads delivered exactly once and acked, nothing failed, tables bounded, while off-path and on-path forgeries land', () => {
    const A = { host: '10.0.0.1', port: 1 };
    const B = { host: '10.0.0.2', port: 2 };
    const a = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, randomId: seededIds(5), context: { maxWindow: 256 } });
    const b = new UdpEndpoint({ integrity: 'crc32c', mtu: 1472, randomId: seededIds(6), context: { maxWindow: 256 } });
    const r = rng(77);
    const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
    const N = 1500;
    const got = new Map<number, number>();
    let acked = 0;
    const failed: string[] = [];
    let sent = 0;
    let now = 0;
    let injected = 0;
    const hostile = (): [Uint8Array, { host: string; port: number }, 'a' | 'b'] => {
      const toB = r() < 0.5;
      const ctxB = b.context(A);
      const ctxA = a.context(B);
      const me = toB ? ctxB : ctxA;
      const sndNxt = me ? (field(me, 'sndNxt') >>> 0) : 0;
      const far = [(sndNxt + 1) >>> 0, (sndNxt + 0x8000_0000) >>> 0, (sndNxt + 0x7fff_0000) >>> 0, 0xffff_ffff, (sndNxt - 100_000) >>> 0];
      const kind = Math.floor(r() * 6);
      const from = r() < 0.6 ? (toB ? A : B) : { host: '10.9.9.9', port: 1 + Math.floor(r() * 60_000) };
      const rid = () => 1 + Math.floor(r() * 0xffff_fffe);
      let h: Partial<UdpHdr>;
      if (kind === 0) h = { srcCtx: rid(), dstCtx: 0, cookie: r() < 0.5 ? ZERO_COOKIE : { time: Math.floor(now) || 1, mac: Uint8Array.from({ length: 8 }, () => r() * 256) }, token: new Uint8Array(8) };
      else if (kind === 1) h = { type: pick([UdpType.Ack, UdpType.Data]), srcCtx: rid(), dstCtx: r() < 0.5 ? rid() : (me?.localId ?? rid()) };
      // A RESET knowing one of the two ids at most (both would be on-path: such a sender can
      // fail the context, as it could drop every datagram; see docs/resource-bounds.md).
      else if (kind === 2) h = r() < 0.5
        ? { type: UdpType.Reset, srcCtx: me?.peerId || rid(), dstCtx: rid(), token: new Uint8Array(8) }
        : { type: UdpType.Reset, srcCtx: rid(), dstCtx: me?.localId ?? 1, token: new Uint8Array(8) };
      else if (kind === 3) h = { type: UdpType.Cookie, srcCtx: rid(), dstCtx: rid(), cookie: { time: 9, mac: new Uint8Array(8) } };
      else {
        // On-path: the right ids, an ack or a SACK block outside what was sent.
        const cum = kind === 4 ? pick(far) : (me ? field(me, 'sndUna') >>> 0 : 0);
        const sack = kind === 5 ? [{ start: (cum + 1) >>> 0, end: pick(far) }] : [];
        h = { type: UdpType.Ack, srcCtx: me?.peerId || 1, dstCtx: me?.localId ?? 1, ackPsn: cum, sack, window: Math.floor(r() * 0x10000) };
      }
      return [seal(h), from, toB ? 'b' : 'a'];
    };
    const maxScan = { a: 0, b: 0 };
    for (let step = 0; step < 20_000 && (acked < N || sent < N); step++) {
      while (sent < N && sent - acked < 200) a.send(B, makePayload(sent++, 64 + (sent % 300)), now);
      const ra = a.poll(now);
      const rb = b.poll(now);
      acked += ra.acked.length;
      for (const f of ra.failed.concat(rb.failed)) failed.push(f.reason);
      for (const d of rb.delivered) {
        got.set(payloadIndex(d.payload), (got.get(payloadIndex(d.payload)) ?? 0) + 1);
        b.release(d.ctx);
      }
      const move = (ds: OutDatagram[], to: UdpEndpoint, from: { host: string; port: number }) => {
        for (const d of ds) if (d.to.host !== '10.9.9.9') to.receive(new Uint8Array(Buffer.concat(d.parts)), from, now);
      };
      move(ra.datagrams, b, A);
      move(rb.datagrams, a, B);
      for (const d of b.takeDelivered()) {
        got.set(payloadIndex(d.payload), (got.get(payloadIndex(d.payload)) ?? 0) + 1);
        b.release(d.ctx);
      }
      for (let i = 0; i < 40; i++) {
        const [bytes, from, to] = hostile();
        const ep = to === 'a' ? a : b;
        const ctx = to === 'a' ? a.context(B) : b.context(A);
        const before = ctx?.counters.scanned ?? 0;
        ep.receive(bytes, from, now);
        injected++;
        if (ctx) maxScan[to] = Math.max(maxScan[to], ctx.counters.scanned - before);
      }
      now += 0.05;
      a.tick(now);
      b.tick(now);
    }
    expect(failed).toEqual([]);
    expect(acked, JSON.stringify([a.stats(), b.stats(), a.context(B)?.stats, (a.context(B) as any)?.probing, a.context(B)?.peerId])).toBe(N);
    expect(got.size).toBe(N);
    for (const n of got.values()) expect(n).toBe(1);
    expect(injected).toBeGreaterThan(1000);
    expect(maxScan.a).toBeLessThanOrEqual(7 * 256);
    expect(maxScan.b).toBeLessThanOrEqual(7 * 256);
    const sa = a.stats();
    const sb = b.stats();
    expect(sa.contexts).toBe(1);
    expect(sb.contexts).toBe(1);
    expect(sa.peerRestarts + sb.peerRestarts + sa.resetsReceived + sb.resetsReceived).toBe(0);
    expect(sa.badAck + sa.badSack + sb.badAck + sb.badSack).toBeGreaterThan(0);
    expect(sa.cookiesFailed + sb.cookiesFailed + sa.cookiesSent + sb.cookiesSent).toBeGreaterThan(0);
    expect(sa.resetsInvalid + sb.resetsInvalid).toBeGreaterThan(0);
  });
});
