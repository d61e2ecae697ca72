// sabre's UDP reliability header (mechanism M5) and the CRC32C trailer of each datagram:
//   [udpHdr 36 B][udpCookie 12 B, if flags.Cookie][udpToken 8 B, if flags.Token]
//   [udpSack 4 B + 8 B a block, if flags.Sack][DDP segment (DATA only)][CRC32C 4 B]
// Big-endian fields; the CRC is least-significant byte first, as on MPA (one trailer writer).
import {
  UDP_COOKIE, UDP_CRC_LEN, UDP_HDR, UDP_MAX_SACK, UDP_SACK, UDP_SACK_BLOCK, UDP_TOKEN, UDP_TYPE_MASK, UDP_VER_SHIFT,
  UDP_VERSION, UdpFlag, UdpType,
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
}

const H = UDP_HDR.fields;
const S = UDP_SACK.fields;
const B = UDP_SACK_BLOCK.fields;
const C = UDP_COOKIE.fields;
const T = UDP_TOKEN.fields;

export const UDP_HDR_LEN = UDP_HDR.size;
export const UDP_TRAILER_LEN = UDP_CRC_LEN;

export function udpHeaderLength(h: Pick<UdpHdr, 'sack' | 'cookie' | 'token'>): number {
  return UDP_HDR.size + (h.cookie !== undefined ? UDP_COOKIE.size : 0) + (h.token !== undefined ? UDP_TOKEN.size : 0)
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
  const len = udpHeaderLength(h);
  need(buf, off, len);
  buf[off + H.verType.offset] = (UDP_VERSION << UDP_VER_SHIFT) | h.type;
  buf[off + H.flags.offset] = (nSack > 0 ? UdpFlag.Sack : 0) | (h.ackReq ? UdpFlag.AckReq : 0) | (h.retx ? UdpFlag.Retx : 0)
    | (h.cookie !== undefined ? UdpFlag.Cookie : 0) | (h.token !== undefined ? UdpFlag.Token : 0);
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
      sack, cookie, token,
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

export interface UdpDatagram { hdr: UdpHdr; segOff: number; segEnd: number }

/**
 * Check the trailer, then parse the header. DATA must carry a DDP segment (at least its two
 * control bytes); ACK, RESET and COOKIE carry none, and a COOKIE carries its udpCookie block.
 */
export function openUdpDatagram(buf: Uint8Array, off: number, end: number, crc32c: Crc32c): WireResult<UdpDatagram> {
  if (badWindow(buf, off, end) || end - off < UDP_HDR.size + UDP_CRC_LEN) return fail('TRUNCATED');
  const crcAt = end - UDP_CRC_LEN;
  if (crc32c(buf, off, crcAt - off) >>> 0 !== rd32le(buf, crcAt)) return fail('BAD_CRC');
  const r = decodeUdpHdr(buf, off, crcAt);
  if (!r.ok) return r;
  const segOff = off + r.length;
  if (r.value.type === UdpType.Data ? crcAt - segOff < 2 : crcAt !== segOff) return fail('BAD_LENGTH');
  if (r.value.type === UdpType.Cookie && r.value.cookie === undefined) return fail('BAD_COOKIE');
  return { ok: true, value: { hdr: r.value, segOff, segEnd: crcAt }, length: end - off };
}
