// sabre's UDP reliability header (mechanism M5) and the integrity trailer of each datagram:
//   [udpHdr 36 B][udpCookie 12 B, if flags.Cookie][udpToken 8 B, if flags.Token]
//   [udpInteg 4 B, if flags.Integ][udpSack 4 B + 8 B a block, if flags.Sack]
//   [DDP segment (DATA only)][trailer: CRC32C 4 B | XXH3-64 8 B | none, as flags.Trailer says]
// Big-endian fields; the trailer is least-significant byte first, as on MPA (one trailer writer).
// The trailer kind bits are not part of UdpHdr: the framer sets them (setUdpTrailer) and
// openUdpDatagram reports them, since which kind is acceptable is the transport's call
// (docs/integrity.md).
import { UDP_CRC_LEN, UDP_MAX_SACK, UDP_TRAILER_LENS, UDP_VERSION, UdpIntegrity, UdpType } from './spec.js';
import { badWindow, fail, need, rd16, rd32, rd32le, wr16, wr32, wr32le, type WireResult } from './codec.js';
import * as W from './fields.gen.js';
import {
  UDP_COOKIE_MAC_LEN, UDP_COOKIE_MAC_OFF, UDP_COOKIE_SIZE, UDP_HDR_SIZE, UDP_HDR_VER_TYPE_VER_SHIFT, UDP_INTEG_RSVD_LEN,
  UDP_INTEG_RSVD_OFF, UDP_INTEG_SIZE, UDP_SACK_BLOCK_SIZE, UDP_SACK_RSVD_LEN, UDP_SACK_RSVD_OFF, UDP_SACK_SIZE,
  UDP_TOKEN_SIZE, UDP_TOKEN_TOKEN_LEN, UDP_TOKEN_TOKEN_OFF, getUdpCookieTime, getUdpIntegWish,
  getUdpSackBlockEnd, getUdpSackBlockStart, getUdpSackCount, setUdpCookieTime, setUdpIntegWish,
  setUdpSackBlockEnd, setUdpSackBlockStart, setUdpSackCount,
} from './fields.gen.js';
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

export const UDP_HDR_LEN = UDP_HDR_SIZE;
export const UDP_TRAILER_LEN = UDP_CRC_LEN;

// The fixed header, once a datagram: its offsets and bits as this module's own consts, read with
// codec.ts's helpers. V8 folds a module's own consts into optimised code but loads an imported
// binding at every use, and the generated accessors cost a call-target check each; both measured
// slower here (bench/wire-codec.bench.mjs). The rarer blocks after it use the accessors.
const H_SIZE = W.UDP_HDR_SIZE;
const H_VER_TYPE_OFF = W.UDP_HDR_VER_TYPE_OFF;
const H_VER_TYPE_VER = W.UDP_HDR_VER_TYPE_VER;
const H_VER_TYPE_TYPE = W.UDP_HDR_VER_TYPE_TYPE;
const H_FLAGS_OFF = W.UDP_HDR_FLAGS_OFF;
const H_FLAGS_SACK = W.UDP_HDR_FLAGS_SACK;
const H_FLAGS_ACK_REQ = W.UDP_HDR_FLAGS_ACK_REQ;
const H_FLAGS_RETX = W.UDP_HDR_FLAGS_RETX;
const H_FLAGS_COOKIE = W.UDP_HDR_FLAGS_COOKIE;
const H_FLAGS_TOKEN = W.UDP_HDR_FLAGS_TOKEN;
const H_FLAGS_INTEG = W.UDP_HDR_FLAGS_INTEG;
const H_WINDOW_OFF = W.UDP_HDR_WINDOW_OFF;
const H_SRC_CTX_OFF = W.UDP_HDR_SRC_CTX_OFF;
const H_DST_CTX_OFF = W.UDP_HDR_DST_CTX_OFF;
const H_PSN_OFF = W.UDP_HDR_PSN_OFF;
const H_ACK_PSN_OFF = W.UDP_HDR_ACK_PSN_OFF;
const H_TS_VAL_OFF = W.UDP_HDR_TS_VAL_OFF;
const H_TS_ECR_OFF = W.UDP_HDR_TS_ECR_OFF;
const H_DST_QPN_OFF = W.UDP_HDR_DST_QPN_OFF;
const H_SRC_QPN_OFF = W.UDP_HDR_SRC_QPN_OFF;
const H_FLAGS_TRAILER = W.UDP_HDR_FLAGS_TRAILER;
const H_FLAGS_TRAILER_SHIFT = W.UDP_HDR_FLAGS_TRAILER_SHIFT;
const VER_BITS = (UDP_VERSION << UDP_HDR_VER_TYPE_VER_SHIFT) & H_VER_TYPE_VER;

function isIntegrity(c: number): boolean {
  return c === UdpIntegrity.Crc32c || c === UdpIntegrity.Xxh3 || c === UdpIntegrity.None;
}

export function udpHeaderLength(h: Pick<UdpHdr, 'sack' | 'cookie' | 'token' | 'integ'>): number {
  return H_SIZE + (h.cookie !== undefined ? UDP_COOKIE_SIZE : 0) + (h.token !== undefined ? UDP_TOKEN_SIZE : 0)
    + (h.integ !== undefined ? UDP_INTEG_SIZE : 0)
    + (h.sack.length > 0 ? UDP_SACK_SIZE + h.sack.length * UDP_SACK_BLOCK_SIZE : 0);
}

function isType(t: number): boolean {
  return t === UdpType.Data || t === UdpType.Ack || t === UdpType.Reset || t === UdpType.Cookie;
}

export function encodeUdpHdr(h: UdpHdr, buf: Uint8Array, off: number): number {
  const nSack = h.sack.length;
  if (nSack > UDP_MAX_SACK) throw new SabreError(ErrorCode.InvalidArgument, `at most ${UDP_MAX_SACK} SACK blocks, got ${nSack}`);
  if (!isType(h.type)) throw new SabreError(ErrorCode.InvalidArgument, `unknown UDP datagram type ${String(h.type)}`);
  if (h.cookie !== undefined && h.cookie.mac.length !== UDP_COOKIE_MAC_LEN) throw new SabreError(ErrorCode.InvalidArgument, `cookie mac must be ${UDP_COOKIE_MAC_LEN} bytes`);
  if (h.token !== undefined && h.token.length !== UDP_TOKEN_TOKEN_LEN) throw new SabreError(ErrorCode.InvalidArgument, `token must be ${UDP_TOKEN_TOKEN_LEN} bytes`);
  if (h.integ !== undefined && !isIntegrity(h.integ)) throw new SabreError(ErrorCode.InvalidArgument, `unknown integrity code ${String(h.integ)}`);
  const len = udpHeaderLength(h);
  need(buf, off, len);
  buf[off + H_VER_TYPE_OFF] = VER_BITS | h.type;
  buf[off + H_FLAGS_OFF] = (nSack > 0 ? H_FLAGS_SACK : 0) | (h.ackReq ? H_FLAGS_ACK_REQ : 0) | (h.retx ? H_FLAGS_RETX : 0)
    | (h.cookie !== undefined ? H_FLAGS_COOKIE : 0) | (h.token !== undefined ? H_FLAGS_TOKEN : 0)
    | (h.integ !== undefined ? H_FLAGS_INTEG : 0);
  wr16(buf, off + H_WINDOW_OFF, h.window);
  wr32(buf, off + H_SRC_CTX_OFF, h.srcCtx);
  wr32(buf, off + H_DST_CTX_OFF, h.dstCtx);
  wr32(buf, off + H_PSN_OFF, h.psn);
  wr32(buf, off + H_ACK_PSN_OFF, h.ackPsn);
  wr32(buf, off + H_TS_VAL_OFF, h.tsVal);
  wr32(buf, off + H_TS_ECR_OFF, h.tsEcr);
  wr32(buf, off + H_DST_QPN_OFF, h.dstQpn);
  wr32(buf, off + H_SRC_QPN_OFF, h.srcQpn);
  let x = off + H_SIZE;
  if (h.cookie !== undefined) {
    setUdpCookieTime(buf, x, h.cookie.time);
    buf.set(h.cookie.mac, x + UDP_COOKIE_MAC_OFF);
    x += UDP_COOKIE_SIZE;
  }
  if (h.token !== undefined) {
    buf.set(h.token, x + UDP_TOKEN_TOKEN_OFF);
    x += UDP_TOKEN_SIZE;
  }
  if (h.integ !== undefined) {
    setUdpIntegWish(buf, x, h.integ);
    buf.fill(0, x + UDP_INTEG_RSVD_OFF, x + UDP_INTEG_RSVD_OFF + UDP_INTEG_RSVD_LEN);
    x += UDP_INTEG_SIZE;
  }
  if (nSack > 0) {
    setUdpSackCount(buf, x, nSack);
    buf.fill(0, x + UDP_SACK_RSVD_OFF, x + UDP_SACK_RSVD_OFF + UDP_SACK_RSVD_LEN);
    let p = x + UDP_SACK_SIZE;
    for (const blk of h.sack) {
      setUdpSackBlockStart(buf, p, blk.start);
      setUdpSackBlockEnd(buf, p, blk.end);
      p += UDP_SACK_BLOCK_SIZE;
    }
  }
  return len;
}

export function decodeUdpHdr(buf: Uint8Array, off: number, end: number): WireResult<UdpHdr> {
  if (badWindow(buf, off, end) || end - off < H_SIZE) return fail('TRUNCATED');
  const vt = buf[off + H_VER_TYPE_OFF]!;
  if ((vt & H_VER_TYPE_VER) !== VER_BITS) return fail('BAD_UDP_VERSION');
  const type = vt & H_VER_TYPE_TYPE;
  if (!isType(type)) return fail('BAD_UDP_TYPE');
  const flags = buf[off + H_FLAGS_OFF]!;
  const sack: SackBlock[] = [];
  let len = H_SIZE;
  // The blocks are copied out (they are rare: handshake datagrams and RESETs only).
  let cookie: UdpCookie | undefined;
  let token: Uint8Array | undefined;
  if (flags & H_FLAGS_COOKIE) {
    if (end - off < len + UDP_COOKIE_SIZE) return fail('TRUNCATED');
    const p = off + len;
    cookie = { time: getUdpCookieTime(buf, p), mac: buf.slice(p + UDP_COOKIE_MAC_OFF, p + UDP_COOKIE_MAC_OFF + UDP_COOKIE_MAC_LEN) };
    len += UDP_COOKIE_SIZE;
  }
  if (flags & H_FLAGS_TOKEN) {
    if (end - off < len + UDP_TOKEN_SIZE) return fail('TRUNCATED');
    const p = off + len + UDP_TOKEN_TOKEN_OFF;
    token = buf.slice(p, p + UDP_TOKEN_TOKEN_LEN);
    len += UDP_TOKEN_SIZE;
  }
  let integ: number | undefined;
  if (flags & H_FLAGS_INTEG) {
    if (end - off < len + UDP_INTEG_SIZE) return fail('TRUNCATED');
    integ = getUdpIntegWish(buf, off + len);
    if (!isIntegrity(integ)) return fail('BAD_INTEG');
    len += UDP_INTEG_SIZE;
  }
  if (flags & H_FLAGS_SACK) {
    if (end - off < len + UDP_SACK_SIZE) return fail('TRUNCATED');
    const n = getUdpSackCount(buf, off + len);
    if (n < 1 || n > UDP_MAX_SACK) return fail('BAD_COUNT');
    let p = off + len + UDP_SACK_SIZE;
    len += UDP_SACK_SIZE + n * UDP_SACK_BLOCK_SIZE;
    if (end - off < len) return fail('TRUNCATED');
    for (let i = 0; i < n; i++, p += UDP_SACK_BLOCK_SIZE) sack.push({ start: getUdpSackBlockStart(buf, p), end: getUdpSackBlockEnd(buf, p) });
  }
  // Reserved flag bits are ignored on receipt, like every reserved field here.
  return {
    ok: true,
    value: {
      type: type as UdpTypeValue, ackReq: (flags & H_FLAGS_ACK_REQ) !== 0, retx: (flags & H_FLAGS_RETX) !== 0,
      window: rd16(buf, off + H_WINDOW_OFF), srcCtx: rd32(buf, off + H_SRC_CTX_OFF), dstCtx: rd32(buf, off + H_DST_CTX_OFF),
      psn: rd32(buf, off + H_PSN_OFF), ackPsn: rd32(buf, off + H_ACK_PSN_OFF), tsVal: rd32(buf, off + H_TS_VAL_OFF),
      tsEcr: rd32(buf, off + H_TS_ECR_OFF), dstQpn: rd32(buf, off + H_DST_QPN_OFF), srcQpn: rd32(buf, off + H_SRC_QPN_OFF),
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
  const f = off + H_FLAGS_OFF;
  buf[f] = (buf[f]! & ~H_FLAGS_TRAILER) | (kind << H_FLAGS_TRAILER_SHIFT);
}

/** The trailer kind a datagram's flags name (3: reserved). Reads one byte; checks nothing. */
export function udpTrailerKind(buf: Uint8Array, off = 0): number {
  return (buf[off + H_FLAGS_OFF]! & H_FLAGS_TRAILER) >>> H_FLAGS_TRAILER_SHIFT;
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
  if (badWindow(buf, off, end) || end - off < H_SIZE) return fail('TRUNCATED');
  const kind = udpTrailerKind(buf, off);
  if (kind >= UDP_TRAILER_LENS.length) return fail('BAD_TRAILER');
  const crcAt = end - UDP_TRAILER_LENS[kind]!;
  if (crcAt - off < H_SIZE) return fail('TRUNCATED');
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
