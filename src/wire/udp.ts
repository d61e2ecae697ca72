// sabre's UDP reliability header (mechanism M5) and the integrity trailer of each datagram:
//   [udpHdr 36 B][udpCookie 12 B, if flags.Cookie][udpToken 8 B, if flags.Token]
//   [udpInteg 4 B, if flags.Integ][udpSack 4 B + 8 B a block, if flags.Sack]
//   [DDP segment (DATA only)][trailer: CRC32C 4 B | XXH3-64 8 B | none, as flags.Trailer says]
// Big-endian fields; the trailer is least-significant byte first, as on MPA (one trailer writer).
// The trailer kind bits are not part of UdpHdr: the framer sets them (setUdpTrailer) and
// openUdpDatagram reports them, since which kind is acceptable is the transport's call
// (docs/integrity.md).
import {
  UDP_COOKIE, UDP_CRC_LEN, UDP_HDR, UDP_INTEG, UDP_MAX_SACK, UDP_SACK, UDP_SACK_BLOCK, UDP_TOKEN, UDP_TRAILER_LENS,
  UDP_TRAILER_MASK, UDP_TRAILER_SHIFT, UDP_TYPE_MASK, UDP_VER_SHIFT, UDP_VERSION, UdpFlag, UdpIntegrity, UdpType,
} from './spec.js';
import { badWindow, fail, need, rd32, rd32le, wr16, wr32, wr32le, rd16, type WireResult } from './codec.js';
import type { Crc32c } from './mpa.js';
import { SabreError, ErrorCode } from '../core/errors.js';

export type { WireResult } from './codec.js';
export { UdpType } from './spec.js';

export type UdpTypeValue = (typeof UdpType)[keyof typeof UdpType];

export interface SackBlock { start: number; end: number }

/** An address-validation cookie: `time` 0 and an all-zero `mac` mean "none yet". */
export interface UdpCookie { time: number; mac: Uint8Array }

export interface UdpHdr {
  type: UdpTypeValue;
  ackReq: boolean;
  retx: boolean;
  window: number;
  srcCtx: number;
  dstCtx: number;
  psn: number;
  ackPsn: number;
  tsVal: number;
  tsEcr: number;
  dstQpn: number;
  srcQpn: number;
  /** Empty: no SACK flag, no block list. */
  sack: SackBlock[];
  /** The udpCookie block (flags.Cookie); decoded headers always carry the key. */
  cookie?: UdpCookie | undefined;
  /** The udpToken block (flags.Token): 8 bytes. */
  token?: Uint8Array | undefined;
  /** The udpInteg block (flags.Integ): the sender's integrity wish, a UdpIntegrity code. */
  integ?: number | undefined;
}

const H = UDP_HDR.fields;
const S = UDP_SACK.fields;
const B = UDP_SACK_BLOCK.fields;
const C = UDP_COOKIE.fields;
const T = UDP_TOKEN.fields;

export const UDP_HDR_LEN = UDP_HDR.size;
export const UDP_TRAILER_LEN = UDP_CRC_LEN;

const I = UDP_INTEG.fields;

function isIntegrity(c: number): boolean {
  return c === UdpIntegrity.Crc32c || c === UdpIntegrity.Xxh3 || c === UdpIntegrity.None;
}

export function udpHeaderLength(h: Pick<UdpHdr, 'sack' | 'cookie' | 'token' | 'integ'>): number {
  return UDP_HDR.size + (h.cookie !== undefined ? UDP_COOKIE.size : 0) + (h.token !== undefined ? UDP_TOKEN.size : 0)
    + (h.integ !== undefined ? UDP_INTEG.size : 0)
    + (h.sack.length > 0 ? UDP_SACK.size + h.sack.length * UDP_SACK_BLOCK.size : 0);
}

function isType(t: number): boolean {
  return t === UdpType.Data || t === UdpType.Ack || t === UdpType.Reset || t === UdpType.Cookie;
}

export function encodeUdpHdr(h: UdpHdr, buf: Uint8Array, off: number): number {
  const nSack = h.sack.length;
  if (nSack > UDP_MAX_SACK) throw new SabreError(ErrorCode.InvalidArgument, `at most ${UDP_MAX_SACK} SACK blocks, got ${nSack}`);
  if (!isType(h.type)) throw new SabreError(ErrorCode.InvalidArgument, `unknown UDP datagram type ${String(h.type)}`);
  if (h.cookie !== undefined && h.cookie.mac.length !== C.mac.size) throw new SabreError(ErrorCode.InvalidArgument, `cookie mac must be ${C.mac.size} bytes`);
  if (h.token !== undefined && h.token.length !== T.token.size) throw new SabreError(ErrorCode.InvalidArgument, `token must be ${T.token.size} bytes`);
  if (h.integ !== undefined && !isIntegrity(h.integ)) throw new SabreError(ErrorCode.InvalidArgument, `unknown integrity code ${String(h.integ)}`);
  const len = udpHeaderLength(h);
  need(buf, off, len);
  buf[off + H.verType.offset] = (UDP_VERSION << UDP_VER_SHIFT) | h.type;
  buf[off + H.flags.offset] = (nSack > 0 ? UdpFlag.Sack : 0) | (h.ackReq ? UdpFlag.AckReq : 0) | (h.retx ? UdpFlag.Retx : 0)
    | (h.cookie !== undefined ? UdpFlag.Cookie : 0) | (h.token !== undefined ? UdpFlag.Token : 0) | (h.integ !== undefined ? UdpFlag.Integ : 0);
  wr16(buf, off + H.window.offset, h.window);
  wr32(buf, off + H.srcCtx.offset, h.srcCtx);
  wr32(buf, off + H.dstCtx.offset, h.dstCtx);
  wr32(buf, off + H.psn.offset, h.psn);
  wr32(buf, off + H.ackPsn.offset, h.ackPsn);
  wr32(buf, off + H.tsVal.offset, h.tsVal);
  wr32(buf, off + H.tsEcr.offset, h.tsEcr);
  wr32(buf, off + H.dstQpn.offset, h.dstQpn);
  wr32(buf, off + H.srcQpn.offset, h.srcQpn);
  let x = off + UDP_HDR.size;
  if (h.cookie !== undefined) {
    wr32(buf, x + C.time.offset, h.cookie.time);
    buf.set(h.cookie.mac, x + C.mac.offset);
    x += UDP_COOKIE.size;
  }
  if (h.token !== undefined) {
    buf.set(h.token, x + T.token.offset);
    x += UDP_TOKEN.size;
  }
  if (h.integ !== undefined) {
    buf[x + I.wish.offset] = h.integ;
    buf.fill(0, x + I.rsvd.offset, x + I.rsvd.offset + I.rsvd.size);
    x += UDP_INTEG.size;
  }
  if (nSack > 0) {
    const s = x;
    buf[s + S.count.offset] = nSack;
    buf.fill(0, s + S.rsvd.offset, s + S.rsvd.offset + S.rsvd.size);
    let p = s + UDP_SACK.size;
    for (const blk of h.sack) {
      wr32(buf, p + B.start.offset, blk.start);
      wr32(buf, p + B.end.offset, blk.end);
      p += UDP_SACK_BLOCK.size;
    }
  }
  return len;
}

export function decodeUdpHdr(buf: Uint8Array, off: number, end: number): WireResult<UdpHdr> {
  if (badWindow(buf, off, end) || end - off < UDP_HDR.size) return fail('TRUNCATED');
  const vt = buf[off + H.verType.offset]!;
  if (vt >>> UDP_VER_SHIFT !== UDP_VERSION) return fail('BAD_UDP_VERSION');
  const type = vt & UDP_TYPE_MASK;
  if (!isType(type)) return fail('BAD_UDP_TYPE');
  const flags = buf[off + H.flags.offset]!;
  const sack: SackBlock[] = [];
  let len = UDP_HDR.size;
  // The blocks are copied out (they are rare: handshake datagrams and RESETs only).
  let cookie: UdpCookie | undefined;
  let token: Uint8Array | undefined;
  if (flags & UdpFlag.Cookie) {
    if (end - off < len + UDP_COOKIE.size) return fail('TRUNCATED');
    const p = off + len;
    cookie = { time: rd32(buf, p + C.time.offset), mac: buf.slice(p + C.mac.offset, p + C.mac.offset + C.mac.size) };
    len += UDP_COOKIE.size;
  }
  if (flags & UdpFlag.Token) {
    if (end - off < len + UDP_TOKEN.size) return fail('TRUNCATED');
    const p = off + len + T.token.offset;
    token = buf.slice(p, p + T.token.size);
    len += UDP_TOKEN.size;
  }
  let integ: number | undefined;
  if (flags & UdpFlag.Integ) {
    if (end - off < len + UDP_INTEG.size) return fail('TRUNCATED');
    integ = buf[off + len + I.wish.offset]!;
    if (!isIntegrity(integ)) return fail('BAD_INTEG');
    len += UDP_INTEG.size;
  }
  if (flags & UdpFlag.Sack) {
    if (end - off < len + UDP_SACK.size) return fail('TRUNCATED');
    const n = buf[off + len + S.count.offset]!;
    if (n < 1 || n > UDP_MAX_SACK) return fail('BAD_COUNT');
    let p = off + len + UDP_SACK.size;
    len += UDP_SACK.size + n * UDP_SACK_BLOCK.size;
    if (end - off < len) return fail('TRUNCATED');
    for (let i = 0; i < n; i++, p += UDP_SACK_BLOCK.size) sack.push({ start: rd32(buf, p + B.start.offset), end: rd32(buf, p + B.end.offset) });
  }
  // Reserved flag bits are ignored on receipt, like every reserved field here.
  return {
    ok: true,
    value: {
      type: type as UdpTypeValue, ackReq: (flags & UdpFlag.AckReq) !== 0, retx: (flags & UdpFlag.Retx) !== 0,
      window: rd16(buf, off + H.window.offset), srcCtx: rd32(buf, off + H.srcCtx.offset), dstCtx: rd32(buf, off + H.dstCtx.offset),
      psn: rd32(buf, off + H.psn.offset), ackPsn: rd32(buf, off + H.ackPsn.offset), tsVal: rd32(buf, off + H.tsVal.offset),
      tsEcr: rd32(buf, off + H.tsEcr.offset), dstQpn: rd32(buf, off + H.dstQpn.offset), srcQpn: rd32(buf, off + H.srcQpn.offset),
      sack, cookie, token, integ,
    },
    length: len,
  };
}

/** Append the CRC32C of buf[off, end) at `end`; returns the datagram length (end - off + 4). */
export function sealUdpDatagram(buf: Uint8Array, off: number, end: number, crc32c: Crc32c): number {
  need(buf, end, UDP_CRC_LEN);
  wr32le(buf, end, crc32c(buf, off, end - off));
  return end - off + UDP_CRC_LEN;
}

/** `trailer`: the UdpIntegrity code the datagram's trailer was checked under. */
export interface UdpDatagram { hdr: UdpHdr; segOff: number; segEnd: number; trailer: number }

/** Set the trailer kind (a UdpIntegrity code) of the header encoded at buf[off]. */
export function setUdpTrailer(buf: Uint8Array, off: number, kind: number): void {
  const f = off + UDP_HDR.fields.flags.offset;
  buf[f] = (buf[f]! & ~UDP_TRAILER_MASK) | (kind << UDP_TRAILER_SHIFT);
}

/** The trailer kind a datagram's flags name (3: reserved). Reads one byte; checks nothing. */
export function udpTrailerKind(buf: Uint8Array, off = 0): number {
  return (buf[off + UDP_HDR.fields.flags.offset]! & UDP_TRAILER_MASK) >>> UDP_TRAILER_SHIFT;
}

/** Whether buf[off, end - 8) hashes (XXH3-64) to the 8 bytes (LSB first) ending at `end`. */
export type Xxh3Check = (buf: Uint8Array, off: number, end: number) => boolean;

/**
 * Check the trailer flags.Trailer names, then parse the header. DATA must carry a DDP segment
 * (at least its two control bytes); ACK, RESET and COOKIE carry none, and a COOKIE carries its
 * udpCookie block. Whether that trailer kind is the one expected is the caller's to judge
 * (`trailer` in the result); without `xxh3` an XXH3-64 trailer cannot be checked: BAD_HASH.
 */
export function openUdpDatagram(buf: Uint8Array, off: number, end: number, crc32c: Crc32c, xxh3?: Xxh3Check): WireResult<UdpDatagram> {
  if (badWindow(buf, off, end) || end - off < UDP_HDR.size) return fail('TRUNCATED');
  const kind = udpTrailerKind(buf, off);
  if (kind >= UDP_TRAILER_LENS.length) return fail('BAD_TRAILER');
  const crcAt = end - UDP_TRAILER_LENS[kind]!;
  if (crcAt - off < UDP_HDR.size) return fail('TRUNCATED');
  if (kind === UdpIntegrity.Crc32c) {
    if (crc32c(buf, off, crcAt - off) >>> 0 !== rd32le(buf, crcAt)) return fail('BAD_CRC');
  } else if (kind === UdpIntegrity.Xxh3) {
    if (xxh3 === undefined || !xxh3(buf, off, end)) return fail('BAD_HASH');
  }
  const r = decodeUdpHdr(buf, off, crcAt);
  if (!r.ok) return r;
  const segOff = off + r.length;
  if (r.value.type === UdpType.Data ? crcAt - segOff < 2 : crcAt !== segOff) return fail('BAD_LENGTH');
  if (r.value.type === UdpType.Cookie && r.value.cookie === undefined) return fail('BAD_COOKIE');
  return { ok: true, value: { hdr: r.value, segOff, segEnd: crcAt, trailer: kind }, length: end - off };
}
