// MPA (RFC 5044, RFC 6581): the request/reply frames that open an iWARP TCP stream, FPDU framing
// (length, pad, CRC32C) and markers. Offsets and bits come from ./spec.ts, through the accessors
// generated from it (./fields.gen.ts).
//
// CRC: the codecs take the CRC32C function as a parameter (the data plane's kernel, or a
// reference in tests) so this file stays free of any particular implementation.
import {
  MPA_CRC_LEN, MPA_KEY_REP, MPA_KEY_REQ, MPA_MARKER_INTERVAL, MPA_MAX_PRIVATE_DATA, MPA_REVISION_1, MPA_REVISION_2,
  MPA_V2_IRD_ORD_MASK,
} from './spec.js';
import { badWindow, fail, need, rd32le, wr32le, type WireResult } from './codec.js';
import {
  MPA_FPDU_SIZE, MPA_MARKER_SIZE, MPA_REQ_REP_BITS_C, MPA_REQ_REP_BITS_H, MPA_REQ_REP_BITS_M, MPA_REQ_REP_BITS_R,
  MPA_REQ_REP_BITS_REV, MPA_REQ_REP_KEY_LEN, MPA_REQ_REP_KEY_OFF, MPA_REQ_REP_SIZE, MPA_V2_PRIVATE_IRD_IRD,
  MPA_V2_PRIVATE_IRD_P2_P, MPA_V2_PRIVATE_IRD_ZERO_LEN_SEND_RTR, MPA_V2_PRIVATE_ORD_ORD, MPA_V2_PRIVATE_ORD_READ_RTR,
  MPA_V2_PRIVATE_ORD_WRITE_RTR, MPA_V2_PRIVATE_SIZE, getMpaFpduUlpduLen, getMpaMarkerFpduPtr, getMpaReqRepBits,
  getMpaReqRepPdLen, getMpaV2PrivateIrd, getMpaV2PrivateOrd, setMpaFpduUlpduLen, setMpaMarkerFpduPtr, setMpaMarkerRsvd,
  setMpaReqRepBits, setMpaReqRepPdLen, setMpaV2PrivateIrd, setMpaV2PrivateOrd,
} from './fields.gen.js';
import { SabreError, ErrorCode } from '../core/errors.js';

export type { WireResult } from './codec.js';

/** CRC32C over buf[off, off+len): the standard (Castagnoli, reflected, ~init, ~final) value. */
export type Crc32c = (buf: Uint8Array, off: number, len: number) => number;

const KEY_LEN = MPA_REQ_REP_KEY_LEN;
const KEY_REQ = new TextEncoder().encode(MPA_KEY_REQ);
const KEY_REP = new TextEncoder().encode(MPA_KEY_REP);

export interface MpaFrame {
  /** false: MPA Request ("MPA ID Req Frame"); true: MPA Reply ("MPA ID Rep Frame"). */
  reply: boolean;
  markers: boolean;
  crc: boolean;
  reject: boolean;
  /** RFC 6581 enhanced setup: private data begins with the IRD/ORD word (MpaV2Private). */
  enhanced: boolean;
  revision: number;
  privateData: Uint8Array;
}

export function mpaFrameLength(f: Pick<MpaFrame, 'privateData'>): number {
  return MPA_REQ_REP_SIZE + f.privateData.length;
}

export function encodeMpaFrame(f: MpaFrame, buf: Uint8Array, off: number): number {
  if (f.privateData.length > MPA_MAX_PRIVATE_DATA) {
    throw new SabreError(ErrorCode.InvalidArgument, `MPA private data is ${f.privateData.length} bytes, max ${MPA_MAX_PRIVATE_DATA}`);
  }
  const len = mpaFrameLength(f);
  need(buf, off, len);
  buf.set(f.reply ? KEY_REP : KEY_REQ, off + MPA_REQ_REP_KEY_OFF);
  const bits = (f.markers ? MPA_REQ_REP_BITS_M : 0) | (f.crc ? MPA_REQ_REP_BITS_C : 0) | (f.reject ? MPA_REQ_REP_BITS_R : 0)
    | (f.enhanced ? MPA_REQ_REP_BITS_H : 0) | (f.revision & MPA_REQ_REP_BITS_REV);
  setMpaReqRepBits(buf, off, bits);
  setMpaReqRepPdLen(buf, off, f.privateData.length);
  buf.set(f.privateData, off + MPA_REQ_REP_SIZE);
  return len;
}

function keyIs(buf: Uint8Array, at: number, key: Uint8Array): boolean {
  for (let i = 0; i < KEY_LEN; i++) if (buf[at + i] !== key[i]) return false;
  return true;
}

/** TRUNCATED means "not all of it has arrived yet" on a stream: read more and retry. */
export function decodeMpaFrame(buf: Uint8Array, off: number, end: number): WireResult<MpaFrame> {
  if (badWindow(buf, off, end) || end - off < MPA_REQ_REP_SIZE) return fail('TRUNCATED');
  const at = off + MPA_REQ_REP_KEY_OFF;
  const reply = keyIs(buf, at, KEY_REP);
  if (!reply && !keyIs(buf, at, KEY_REQ)) return fail('BAD_MPA_KEY');
  const bits = getMpaReqRepBits(buf, off);
  const revision = bits & MPA_REQ_REP_BITS_REV;
  if (revision !== MPA_REVISION_1 && revision !== MPA_REVISION_2) return fail('BAD_MPA_REVISION');
  const pdLen = getMpaReqRepPdLen(buf, off);
  if (pdLen > MPA_MAX_PRIVATE_DATA) return fail('BAD_LENGTH');
  if (end - off < MPA_REQ_REP_SIZE + pdLen) return fail('TRUNCATED');
  const start = off + MPA_REQ_REP_SIZE;
  return {
    ok: true,
    value: {
      reply, markers: (bits & MPA_REQ_REP_BITS_M) !== 0, crc: (bits & MPA_REQ_REP_BITS_C) !== 0, reject: (bits & MPA_REQ_REP_BITS_R) !== 0,
      enhanced: (bits & MPA_REQ_REP_BITS_H) !== 0, revision, privateData: buf.slice(start, start + pdLen),
    },
    length: MPA_REQ_REP_SIZE + pdLen,
  };
}

// ---------------------------------------------------------------------------------------------
// MPA v2 private data prefix (RFC 6581)

export interface MpaV2Private {
  p2p: boolean;
  zeroLenSendRtr: boolean;
  writeRtr: boolean;
  readRtr: boolean;
  ird: number;
  ord: number;
}

export function encodeMpaV2Private(v: MpaV2Private, buf: Uint8Array, off: number): number {
  need(buf, off, MPA_V2_PRIVATE_SIZE);
  if (v.ird > MPA_V2_IRD_ORD_MASK || v.ord > MPA_V2_IRD_ORD_MASK || v.ird < 0 || v.ord < 0) {
    throw new SabreError(ErrorCode.InvalidArgument, `MPA v2 IRD/ORD must be 0..${MPA_V2_IRD_ORD_MASK}`);
  }
  setMpaV2PrivateIrd(buf, off, (v.p2p ? MPA_V2_PRIVATE_IRD_P2_P : 0) | (v.zeroLenSendRtr ? MPA_V2_PRIVATE_IRD_ZERO_LEN_SEND_RTR : 0) | v.ird);
  setMpaV2PrivateOrd(buf, off, (v.writeRtr ? MPA_V2_PRIVATE_ORD_WRITE_RTR : 0) | (v.readRtr ? MPA_V2_PRIVATE_ORD_READ_RTR : 0) | v.ord);
  return MPA_V2_PRIVATE_SIZE;
}

export function decodeMpaV2Private(buf: Uint8Array, off: number, end: number): WireResult<MpaV2Private> {
  if (badWindow(buf, off, end) || end - off < MPA_V2_PRIVATE_SIZE) return fail('TRUNCATED');
  const ird = getMpaV2PrivateIrd(buf, off);
  const ord = getMpaV2PrivateOrd(buf, off);
  return {
    ok: true,
    value: {
      p2p: (ird & MPA_V2_PRIVATE_IRD_P2_P) !== 0, zeroLenSendRtr: (ird & MPA_V2_PRIVATE_IRD_ZERO_LEN_SEND_RTR) !== 0,
      writeRtr: (ord & MPA_V2_PRIVATE_ORD_WRITE_RTR) !== 0, readRtr: (ord & MPA_V2_PRIVATE_ORD_READ_RTR) !== 0,
      ird: ird & MPA_V2_PRIVATE_IRD_IRD, ord: ord & MPA_V2_PRIVATE_ORD_ORD,
    },
    length: MPA_V2_PRIVATE_SIZE,
  };
}

// ---------------------------------------------------------------------------------------------
// FPDU framing (RFC 5044 §4): [ULPDU Length u16][ULPDU][pad 0-3][CRC32C]
// Markers are not part of these byte counts; they are inserted/removed at stream level.

export const MAX_ULPDU = 0xffff;

/** Zero bytes after the ULPDU so that length field + ULPDU + pad is a multiple of 4. */
export function fpduPadLength(ulpduLen: number): number {
  return (4 - ((MPA_FPDU_SIZE + ulpduLen) & 3)) & 3;
}

/** Whole FPDU length (without markers). */
export function fpduLength(ulpduLen: number): number {
  return MPA_FPDU_SIZE + ulpduLen + fpduPadLength(ulpduLen) + MPA_CRC_LEN;
}

/**
 * Frame the ULPDU already sitting at buf[off+2, off+2+ulpduLen): write the length, the pad and
 * the CRC (0 when crc32c is not given, as RFC 5044 requires without CRC). Returns the FPDU length.
 */
export function sealFpdu(buf: Uint8Array, off: number, ulpduLen: number, crc32c?: Crc32c): number {
  if (!Number.isInteger(ulpduLen) || ulpduLen < 0 || ulpduLen > MAX_ULPDU) {
    throw new SabreError(ErrorCode.InvalidArgument, `ULPDU length ${ulpduLen} out of range`);
  }
  const total = fpduLength(ulpduLen);
  need(buf, off, total);
  setMpaFpduUlpduLen(buf, off, ulpduLen);
  const padAt = off + MPA_FPDU_SIZE + ulpduLen;
  const crcAt = total - MPA_CRC_LEN + off;
  buf.fill(0, padAt, crcAt);
  wr32le(buf, crcAt, crc32c ? crc32c(buf, off, crcAt - off) : 0);
  return total;
}

export interface Fpdu { ulpduOff: number; ulpduLen: number; crc: number }

/**
 * Parse one FPDU at buf[off, end). With crc32c, a mismatching CRC is BAD_CRC (RFC 5044: the
 * stream is then terminated with LLP/MPA/CRC error). TRUNCATED: more bytes are needed.
 */
export function openFpdu(buf: Uint8Array, off: number, end: number, crc32c?: Crc32c): WireResult<Fpdu> {
  if (badWindow(buf, off, end) || end - off < MPA_FPDU_SIZE) return fail('TRUNCATED');
  const ulpduLen = getMpaFpduUlpduLen(buf, off);
  const total = fpduLength(ulpduLen);
  if (end - off < total) return fail('TRUNCATED');
  const crcAt = off + total - MPA_CRC_LEN;
  const crc = rd32le(buf, crcAt);
  if (crc32c && crc32c(buf, off, crcAt - off) >>> 0 !== crc) return fail('BAD_CRC');
  return { ok: true, value: { ulpduOff: off + MPA_FPDU_SIZE, ulpduLen, crc }, length: total };
}

// ---------------------------------------------------------------------------------------------
// Markers (RFC 5044 §4.3)

export const MARKER_INTERVAL = MPA_MARKER_INTERVAL;
export const MARKER_LEN = MPA_MARKER_SIZE;

/** Stream position of the first marker at or after `streamPos` (positions count from the first FPDU octet). */
export function nextMarkerPos(streamPos: number): number {
  return Math.ceil(streamPos / MARKER_INTERVAL) * MARKER_INTERVAL;
}

export function encodeMarker(fpduPtr: number, buf: Uint8Array, off: number): number {
  need(buf, off, MARKER_LEN);
  setMpaMarkerRsvd(buf, off, 0);
  setMpaMarkerFpduPtr(buf, off, fpduPtr);
  return MARKER_LEN;
}

export function decodeMarker(buf: Uint8Array, off: number, end: number): WireResult<{ fpduPtr: number }> {
  if (badWindow(buf, off, end) || end - off < MARKER_LEN) return fail('TRUNCATED');
  return { ok: true, value: { fpduPtr: getMpaMarkerFpduPtr(buf, off) }, length: MARKER_LEN };
}
