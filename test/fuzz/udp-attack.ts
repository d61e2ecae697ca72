// The three udp attackers of the campaign and the datagrams they build (sabre's framing:
// src/wire/udp.ts reliability header, src/transport/udp/frame-codec.ts engine envelopes,
// docs/wire.md), each sealed with a valid trailer of the kind the target context settled
// (docs/integrity.md): CRC32C by an independent implementation (@node-rs/crc32), XXH3-64 by
// sabre's own kernel (src/kernels/xxh3-64.ts; test/kernels checks it against xxHash's vectors).
// A trailer of the wrong kind stops a datagram at badIntegrity before any check behind it runs,
// so every attacker seals with the kind its target expects, and each one that hits a context on
// purpose learns that kind from the datagrams it sees (the on-path one from what it replays,
// the validated one from the victim's first answer):
//
// - OffPath: raw node:dgram sockets that never saw the real traffic. Guessed context ids,
//   first contacts with forged or zero cookies, RESETs and COOKIEs for nothing, truncated,
//   bad-CRC and garbage datagrams, every header field at its edges; it knows the victim's
//   context id only when it names it with a wrong peer id (a stale-id probe).
// - Validated: a socket that completed the cookie handshake, so it owns a transport context on
//   the victim and a peered rc QP (qp2, another protection domain); everything on its own
//   context is fair: PSNs at and past the window edges, acks and SACK ranges anywhere, packed
//   engine frames with hostile envelopes (ssn, msgLen, off, piggy-backed acks, kinds, chain
//   lengths) and hostile DDP segments (ddp.ts) for qp2, for the real QP (it is not its peer),
//   for QPs that do not exist.
// - OnPath: sees every datagram of the real connection through the relay's tap, learns both
//   context ids, PSNs, acks and STags, and injects replays (exact, repeated, delayed) and
//   mutations. It holds every field in the zones that cannot be genuine (docs/resource-bounds.md:
//   with both ids an on-path attacker can forge acks, RESETs and in-window data, which no
//   checksum-only protocol can refuse): PSNs already acknowledged or past the receive window,
//   ack/SACK values already acknowledged or past anything sent, RESETs only with one id wrong.
import dgram from 'node:dgram';
import { crc32c as refCrc } from '@node-rs/crc32';
import { xxh3_64 } from '../../src/kernels/xxh3-64.js';
import { UDP_ENV, UDP_ENV_SEG, UDP_TRAILER_LENS, UdpEnvFlag, UdpEnvKind, UdpIntegrity } from '../../src/wire/spec.js';
import {
  UdpType, decodeUdpHdr, encodeUdpHdr, setUdpTrailer, udpHeaderLength, udpTrailerKind, type SackBlock, type UdpHdr,
} from '../../src/wire/udp.js';
import { hostileSegment, type Targets } from './ddp.js';
import type { Gen } from './rng.js';

export const MAX_WINDOW = 1024;
/** The trailer kinds a blind sender may pick (the reserved kind 3 is off/flags's). */
const TRAILERS = [UdpIntegrity.Crc32c, UdpIntegrity.Xxh3, UdpIntegrity.None];
const psnDiff = (a: number, b: number): number => (a - b) | 0;

/** Trailer bytes of a datagram, as the kind its flags name says (the reserved kind 3: none). */
export function trailerLen(b: Uint8Array): number {
  return UDP_TRAILER_LENS[udpTrailerKind(b)] ?? 0;
}

/** A datagram with a valid trailer of kind `trailer` (a UdpIntegrity code; default CRC32C). */
export function seal(h: Partial<UdpHdr>, payload?: Uint8Array, rawType?: number, trailer: number = UdpIntegrity.Crc32c): Uint8Array {
  const hdr: UdpHdr = {
    type: UdpType.Data, ackReq: false, retx: false, window: 64, srcCtx: 0x77, dstCtx: 0, psn: 0, ackPsn: 0,
    tsVal: 1, tsEcr: 0, dstQpn: 0, srcQpn: 0, sack: [], ...h,
  };
  const hl = udpHeaderLength(hdr);
  const p = payload ?? new Uint8Array(0);
  const buf = Buffer.alloc(hl + p.length + (UDP_TRAILER_LENS[trailer] ?? 0));
  encodeUdpHdr(hdr, buf, 0);
  if (rawType !== undefined) buf[0] = rawType;
  setUdpTrailer(buf, 0, trailer);
  buf.set(p, hl);
  return reseal(buf);
}

/**
 * Recompute the trailer of a datagram built or mutated in place, of the kind its flags name
 * now (a mutated flags byte may name another: the trailer follows, so the datagram still gets
 * past the check to whatever the mutation aims at). "none" and the reserved kind write nothing.
 */
export function reseal(b: Uint8Array): Uint8Array {
  const kind = udpTrailerKind(b);
  const buf = Buffer.from(b.buffer, b.byteOffset, b.length);
  if (kind === UdpIntegrity.Crc32c) buf.writeUInt32LE(refCrc(buf.subarray(0, b.length - 4)), b.length - 4);
  else if (kind === UdpIntegrity.Xxh3 && b.length >= 8) buf.writeBigUInt64LE(xxh3_64(buf.subarray(0, b.length - 8)), b.length - 8);
  return b;
}

const E = UDP_ENV.fields;
const S = UDP_ENV_SEG.fields;

/** One engine frame (udpEnv [+ udpEnvSeg + DDP segment]) with hostile envelope fields. */
export function hostileFrame(g: Gen, t: Targets, ssn: number): { bytes: Uint8Array; cls: string } {
  const k = g.int(20);
  if (k < 14) {
    const seg = hostileSegment(g, t);
    const b = new Uint8Array(UDP_ENV.size + UDP_ENV_SEG.size + seg.bytes.length);
    b[E.kind.offset] = UdpEnvKind.Seg;
    const ackP = g.chance(0.3);
    b[E.flags.offset] = (ackP ? UdpEnvFlag.AckPresent : 0) | (g.chance(0.05) ? g.int(64) << 2 : 0);
    const dv = new DataView(b.buffer);
    dv.setUint32(E.ssn.offset, g.chance(0.7) ? ssn : g.edge32(ssn, 64));
    const s = UDP_ENV.size;
    const msgLen = g.chance(0.6) ? seg.dataLen : g.pick([0, seg.dataLen + 1, 0xffffffff, 1 << 20, g.u32()]);
    dv.setUint32(s + S.msgLen.offset, msgLen >>> 0);
    dv.setUint32(s + S.off.offset, g.chance(0.7) ? 0 : g.pick([1, msgLen >>> 0, (msgLen - seg.dataLen) >>> 0, 0xffffffff, g.u32()]));
    dv.setUint32(s + S.ack.offset, ackP ? g.edge32(ssn, 64) : 0);
    b.set(seg.bytes, UDP_ENV.size + UDP_ENV_SEG.size);
    return { bytes: b, cls: `seg/${seg.cls}` };
  }
  const b = new Uint8Array(UDP_ENV.size + (g.chance(0.05) ? g.int(8) : 0));
  const kinds = [UdpEnvKind.Ack, UdpEnvKind.Rnr, UdpEnvKind.Hello, 0, 5, 0xff];
  const kind = g.pick(kinds);
  b[E.kind.offset] = kind;
  b[E.flags.offset] = g.int(256);
  new DataView(b.buffer).setUint32(E.ssn.offset, g.edge32(ssn, 64));
  return { bytes: b, cls: `env${kind}${b.length > UDP_ENV.size ? '+junk' : ''}` };
}

/** 1–3 frames packed in one payload (udpEnv.len chains them), or a single one (len 0). */
export function hostilePayload(g: Gen, t: Targets, ssn: number): { bytes: Uint8Array; cls: string } {
  const n = g.chance(0.8) ? 1 : g.range(2, 3);
  if (n === 1) return hostileFrame(g, t, ssn);
  const parts = Array.from({ length: n }, (_, i) => hostileFrame(g, t, (ssn + i) >>> 0));
  const total = parts.reduce((a, p) => a + p.bytes.length, 0);
  const b = new Uint8Array(total);
  let o = 0;
  for (let i = 0; i < n; i++) {
    const p = parts[i]!.bytes;
    b.set(p, o);
    // Chain length: right, 0 (the rest), or wrong.
    const len = i === n - 1 && g.chance(0.5) ? 0 : g.chance(0.85) ? p.length : g.pick([1, 7, p.length + 1, 0xffff, total - o]);
    b[o + E.len.offset] = len >>> 8;
    b[o + E.len.offset + 1] = len & 0xff;
    o += p.length;
  }
  return { bytes: b, cls: `packed${n}/${parts.map((p) => p.cls.split('/')[0]).join('+')}` };
}

function sackBlocks(g: Gen, base: number): SackBlock[] {
  const n = g.range(1, 8);
  return Array.from({ length: n }, () => {
    const start = g.edge32(base, MAX_WINDOW);
    return { start, end: g.chance(0.7) ? (start + g.range(0, 40)) >>> 0 : g.edge32(base, MAX_WINDOW) };
  });
}

// ------------------------------------------------------------------------------------ sockets

export class UdpAttackSocket {
  sent = 0;
  readonly sock: dgram.Socket;
  private constructor(sock: dgram.Socket) {
    this.sock = sock;
    sock.on('error', () => {});
  }
  static async open(): Promise<UdpAttackSocket> {
    const s = dgram.createSocket('udp4');
    await new Promise<void>((res) => s.bind(0, '127.0.0.1', () => res()));
    return new UdpAttackSocket(s);
  }
  get port(): number {
    return this.sock.address().port;
  }
  send(to: { host: string; port: number }, b: Uint8Array): void {
    this.sent++;
    this.sock.send(b, to.port, to.host);
  }
  close(): void {
    try {
      this.sock.close();
    } catch {
      // already closed
    }
  }
}

// ------------------------------------------------------------------------------------ off-path

export interface Learned {
  /** The victim's context id for the real peer, and the peer's own (0 until seen). */
  victimCtx: number;
  peerCtx: number;
  /** Highest PSN the peer sent the victim; the victim's latest cumulative ack to the peer. */
  maxPeerPsn: number;
  victimAck: number;
  /** Highest PSN the victim sent the peer; the peer's latest cumulative ack to the victim. */
  maxVictimPsn: number;
  peerAck: number;
  seen: boolean;
  /** victimAck came from the victim itself (until then nothing is known to be behind it). */
  victimAckKnown: boolean;
  /** Captured peer → victim datagrams: the last ones and a sample of older ones. */
  recent: Uint8Array[];
  old: Uint8Array[];
  stags: Map<number, number>;
}

export function newLearned(): Learned {
  return { victimCtx: 0, peerCtx: 0, maxPeerPsn: 0, victimAck: 0, maxVictimPsn: 0, peerAck: 0, seen: false, victimAckKnown: false, recent: [], old: [], stags: new Map() };
}

/** What the on-path observer takes from one datagram of the real connection. */
export function observe(l: Learned, msg: Uint8Array, toVictim: boolean, captured: number): void {
  const tl = trailerLen(msg);
  const r = decodeUdpHdr(msg, 0, msg.length - tl);
  if (!r.ok) return;
  const h = r.value;
  if (h.type === UdpType.Cookie || h.type === UdpType.Reset) return;
  if (toVictim) {
    if (h.dstCtx !== 0 && (h.dstCtx !== l.victimCtx || h.srcCtx !== l.peerCtx)) {
      // New ids (first sight or a restart): the PSN spaces start again.
      l.victimCtx = h.dstCtx;
      l.peerCtx = h.srcCtx;
      l.seen = false;
      l.victimAckKnown = false;
    }
    if (l.victimCtx === 0) return;
    if (h.type === UdpType.Data && (!l.seen || psnDiff(h.psn, l.maxPeerPsn) > 0)) l.maxPeerPsn = h.psn;
    if (!l.seen || psnDiff(h.ackPsn, l.peerAck) > 0) l.peerAck = h.ackPsn;
    // The peer's ack: the victim has sent at least up to it.
    if (!l.seen) l.maxVictimPsn = h.ackPsn;
    l.seen = true;
    if (h.type === UdpType.Data) {
      const c = Uint8Array.from(msg);
      l.recent.push(c);
      if (l.recent.length > 64) l.recent.shift();
      if (captured % 97 === 0) {
        l.old.push(c);
        if (l.old.length > 64) l.old.shift();
      }
      // A tagged segment's STag: the envelope is 20 bytes after the reliability header.
      const seg = r.length + UDP_ENV.size + UDP_ENV_SEG.size;
      if (msg[r.length] === UdpEnvKind.Seg && msg.length >= seg + 14 + tl && (msg[seg]! & 0x80) !== 0 && l.stags.size < 256) {
        const dv = new DataView(msg.buffer, msg.byteOffset);
        l.stags.set(dv.getUint32(seg + 2), dv.getUint32(seg + 10));
      }
    }
  } else if (l.seen && h.dstCtx === l.peerCtx && h.srcCtx === l.victimCtx) {
    if (h.type === UdpType.Data && psnDiff(h.psn, l.maxVictimPsn) > 0) l.maxVictimPsn = h.psn;
    if (!l.victimAckKnown || psnDiff(h.ackPsn, l.victimAck) > 0) l.victimAck = h.ackPsn;
    l.victimAckKnown = true;
  }
}

export function offPathDatagram(g: Gen, l: Learned, t: Targets): { bytes: Uint8Array; cls: string; refused: true } {
  const k = g.int(20);
  const rand = (): number => g.u32() || 1;
  const ts = { tsVal: g.u32(), tsEcr: g.chance(0.5) ? 0 : g.u32() };
  if (k === 0) return { bytes: g.bytes(g.range(0, 1600)), cls: 'off/garbage', refused: true };
  if (k === 1) return { bytes: g.bytes(g.range(0, 39)), cls: 'off/short', refused: true };
  if (k === 2) {
    const b = seal({ srcCtx: rand(), dstCtx: rand(), psn: g.u32(), ...ts }, hostilePayload(g, t, 1).bytes);
    b[g.int(b.length)]! ^= 1 << g.int(8);
    return { bytes: b, cls: 'off/bad-crc', refused: true };
  }
  if (k === 3) {
    // A well-sealed header with a bad version or type nibble.
    const b = seal({ srcCtx: rand(), dstCtx: rand(), ...ts }, g.bytes(g.range(2, 64)));
    b[0] = g.chance(0.5) ? (g.pick([0, 1, 3, 15]) << 4) | 1 : (2 << 4) | g.pick([0, 5, 6, 15]);
    return { bytes: reseal(b), cls: 'off/bad-vertype', refused: true };
  }
  if (k === 4) {
    // Flags promising blocks the datagram does not hold, or a SACK count of 0 / past 8.
    const b = seal({ srcCtx: rand(), dstCtx: rand(), ...ts }, g.bytes(g.range(0, 12)));
    b[1] = g.int(256);
    return { bytes: reseal(b), cls: 'off/flags', refused: true };
  }
  if (k <= 7) {
    // A first contact: zero cookie (answered by a COOKIE when long enough), a forged one, or none.
    const cookie = g.chance(0.5) ? { time: 0, mac: new Uint8Array(8) } : g.chance(0.5) ? { time: g.u32(), mac: g.bytes(8) } : undefined;
    const token = g.chance(0.3) ? g.bytes(8) : undefined;
    const b = seal({ srcCtx: rand(), dstCtx: 0, psn: g.u32(), ...ts, ...(cookie ? { cookie } : {}), ...(token ? { token } : {}), dstQpn: g.u32(), srcQpn: g.u32() }, g.chance(0.5) ? hostilePayload(g, t, 1).bytes : g.bytes(g.range(2, 20)));
    return { bytes: b, cls: `off/first-contact-${cookie ? (cookie.time ? 'forged' : 'zero') : 'none'}`, refused: true };
  }
  if (k <= 9) {
    // Non-DATA first contacts: an ACK, a RESET, a COOKIE naming nothing we know.
    const type = g.pick([UdpType.Ack, UdpType.Reset, UdpType.Cookie]);
    const b = seal({
      type, srcCtx: rand(), dstCtx: g.chance(0.5) ? 0 : rand(), ackPsn: g.u32(), ...ts,
      ...(type === UdpType.Cookie ? { cookie: { time: g.u32(), mac: g.bytes(8) } } : {}),
      ...(type === UdpType.Reset || g.chance(0.2) ? { token: g.bytes(8) } : {}),
      ...(g.chance(0.2) ? { sack: sackBlocks(g, g.u32()) } : {}),
    });
    return { bytes: b, cls: `off/type${type}`, refused: true };
  }
  if (k <= 12 && l.victimCtx !== 0) {
    // The victim's id (a blind guess that happened to hit, or a leak) with a wrong peer id.
    let src = rand();
    if (src === l.peerCtx) src ^= 1;
    const type = g.pick([UdpType.Data, UdpType.Ack, UdpType.Reset, UdpType.Cookie]);
    // DATA and ACK under any trailer kind (the peer id is judged before the kind); RESET and
    // COOKIE are only ever CRC32C.
    const trailer = type === UdpType.Data || type === UdpType.Ack ? g.pick(TRAILERS) : UdpIntegrity.Crc32c;
    const b = seal({
      type, srcCtx: src, dstCtx: l.victimCtx, psn: g.edge32(l.maxPeerPsn), ackPsn: g.edge32(l.maxVictimPsn), ...ts,
      ...(type === UdpType.Cookie ? { cookie: { time: g.u32() || 1, mac: g.bytes(8) } } : {}),
      ...(type === UdpType.Reset ? { token: g.bytes(8) } : {}),
    }, type === UdpType.Data ? hostilePayload(g, t, 1).bytes : undefined, undefined, trailer);
    return { bytes: b, cls: `off/victim-id-wrong-peer/type${type}`, refused: true };
  }
  // Guessed ids on both sides, every field hostile.
  const b = seal({ srcCtx: rand(), dstCtx: rand(), psn: g.u32(), ackPsn: g.u32(), window: g.int(0x10000), ...ts, ackReq: g.chance(0.5), retx: g.chance(0.5), dstQpn: g.u32(), srcQpn: g.u32(), ...(g.chance(0.3) ? { sack: sackBlocks(g, g.u32()) } : {}) }, hostilePayload(g, t, 1).bytes, undefined, g.pick(TRAILERS));
  return { bytes: b, cls: 'off/guessed-ids', refused: true };
}

// ------------------------------------------------------------------------------------ on-path

/**
 * A datagram the on-path attacker injects toward the victim, or undefined before it has seen
 * the real connection. `refused`: every field lies where the victim must drop it whole.
 */
export function onPathDatagram(g: Gen, l: Learned, t: Targets): { bytes: Uint8Array; cls: string; refused: boolean; delayMs: number; copies: number } | undefined {
  if (!l.seen || l.recent.length === 0) return undefined;
  const src = g.chance(0.8) ? g.pick(l.recent) : g.pick(l.old.length ? l.old : l.recent);
  const delay = g.chance(0.2) ? g.int(20) : 0;
  const k = g.int(10);
  if (k <= 2) {
    const delayMs = delay;
    // Exact replay, once or several times, now or a little later: byte for byte what the peer sent.
    return { bytes: src, cls: 'on/replay', refused: false, delayMs, copies: g.chance(0.3) ? g.range(2, 4) : 1 };
  }
  // The trailer kind of what it captured is the one the context settled: mutations keep it.
  const trailer = udpTrailerKind(src);
  const r = decodeUdpHdr(src, 0, src.length - trailerLen(src));
  if (!r.ok) return undefined;
  const h = { ...r.value };
  let payload = src.subarray(r.length, src.length - trailerLen(src));
  // PSN already acknowledged by the victim, or past its receive window whatever it has since received.
  const lowPsn = (): number => !l.victimAckKnown ? highPsn() : (l.victimAck - g.pick([1, 2, 3, MAX_WINDOW, MAX_WINDOW + 1, 0x7fffffff, 0x80000000, g.range(1, 0x7fffffff)])) >>> 0;
  const highPsn = (): number => (l.maxPeerPsn + 1 + MAX_WINDOW + g.pick([0, 1, 2, MAX_WINDOW, g.int(0x7fff0000)])) >>> 0;
  // An ack the peer already sent, or past anything the victim can have sent (its window beyond what we saw).
  const oldAck = (): number => (l.peerAck - g.pick([0, 1, MAX_WINDOW - 1, MAX_WINDOW, MAX_WINDOW + 1, g.int(0x7fffffff)])) >>> 0;
  const pastAck = (): number => (l.maxVictimPsn + 2 * MAX_WINDOW + 2 + g.pick([0, 1, g.int(0x7fff0000)])) >>> 0;
  let cls = 'on/';
  const refused = true;
  // A mutation goes at once: its PSN zone holds for the peer PSNs seen so far, not for later ones.
  const delayMs = 0;
  if (k <= 5) {
    // A data datagram at a PSN that cannot be new, its payload mutated (hostile frames or bit flips).
    h.type = UdpType.Data;
    h.psn = g.chance(0.5) ? lowPsn() : highPsn();
    h.ackPsn = g.chance(0.7) ? oldAck() : pastAck();
    h.retx = g.chance(0.5);
    h.ackReq = g.chance(0.5);
    if (g.chance(0.5)) payload = hostilePayload(g, t, g.u32()).bytes;
    else {
      payload = Uint8Array.from(payload.length ? payload : g.bytes(8));
      for (let i = g.range(1, 4); i > 0; i--) payload[g.int(payload.length)] = g.int(256);
    }
    // Only a refused ack may carry a hostile window or timestamps.
    cls += `data-${l.victimAckKnown && psnDiff(h.psn, l.victimAck) < 0 ? 'behind' : 'past-window'}`;
  } else if (k <= 7) {
    // Ack fields out of range: whole datagram refused before any work.
    h.type = g.pick([UdpType.Ack, UdpType.Data]);
    if (h.type === UdpType.Data) h.psn = g.chance(0.5) ? lowPsn() : highPsn();
    else payload = new Uint8Array(0);
    if (g.chance(0.5)) {
      h.ackPsn = pastAck();
      cls += 'ack-past';
    } else {
      h.ackPsn = oldAck();
      // Every block past anything sent, or empty/reversed at an old PSN: never one that could
      // select PSNs the peer has not acknowledged itself.
      const n = g.range(1, 8);
      h.sack = Array.from({ length: n }, (_, i) => {
        if (i === 0 || g.chance(0.5)) {
          const start = pastAck();
          return { start, end: (start + g.range(0, 50)) >>> 0 };
        }
        const start = oldAck();
        return { start, end: g.chance(0.5) ? start : (start - 1 - g.int(100)) >>> 0 };
      });
      if (g.chance(0.5)) h.sack.reverse();
      cls += 'sack-out';
    }
    h.window = g.int(0x10000);
    h.tsEcr = g.u32();
  } else {
    // One id wrong (stale peer id, unknown victim id), or a COOKIE / RESET that must be ignored.
    const which = g.int(4);
    if (which === 0) {
      h.srcCtx = (l.peerCtx ^ (1 + g.int(0xffff))) >>> 0 || 1;
      cls += 'stale-src';
    } else if (which === 1) {
      h.dstCtx = (l.victimCtx ^ (1 + g.int(0xffff))) >>> 0;
      cls += 'unknown-dst';
    } else if (which === 2) {
      h.type = UdpType.Cookie;
      h.cookie = { time: g.u32() || 1, mac: g.bytes(8) };
      payload = new Uint8Array(0);
      cls += 'cookie';
    } else {
      h.type = UdpType.Reset;
      h.token = g.bytes(8);
      payload = new Uint8Array(0);
      // Never both ids right: that RESET is the documented on-path exposure (resource-bounds.md).
      if (g.chance(0.5)) h.srcCtx = (l.peerCtx ^ (1 + g.int(0xffff))) >>> 0 || 1;
      else h.dstCtx = (l.victimCtx ^ (1 + g.int(0xffff))) >>> 0 || 1;
      cls += 'reset-one-id';
    }
    if (h.type === UdpType.Data) h.psn = g.chance(0.5) ? lowPsn() : highPsn();
  }
  // COOKIE and RESET are CRC32C whatever the context settled (docs/integrity.md).
  const kind = h.type === UdpType.Cookie || h.type === UdpType.Reset ? UdpIntegrity.Crc32c : trailer;
  return { bytes: seal(h, payload, undefined, kind), cls, refused, delayMs, copies: 1 };
}
