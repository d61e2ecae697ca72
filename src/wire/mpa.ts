// MPA (RFC 5044, RFC 6581): the request/reply frames that open an iWARP TCP stream, FPDU framing
// (length, pad, CRC32C) and markers. Offsets and bits come from ./spec.ts.
//
// CRC: the codecs take the CRC32C function as a parameter (the data plane's kernel, or a
// reference in tests) so this file stays free of any particular implementation.
import {
  MPA_C, MPA_CRC_LEN, MPA_FPDU, MPA_H, MPA_HDR_LEN, MPA_KEY_REP, MPA_KEY_REQ, MPA_M, MPA_MARKER,
  MPA_MARKER_INTERVAL, MPA_MAX_PRIVATE_DATA, MPA_R, MPA_REQ_REP, MPA_REV_MASK, MPA_REVISION_1,
  MPA_REVISION_2, MPA_V2_IRD_ORD_MASK, MPA_V2_PRIVATE,
} from './spec.js';
import { badWindow, fail, need, rd16, rd32le, wr16, wr32le, type WireResult } from './codec.js';
import { SabreError, ErrorCode } from '../core/errors.js';

export type { WireResult } from './codec.js';

/** CRC32C over buf[off, off+len): the standard (Castagnoli, reflected, ~init, ~final) value. */
export type Crc32c = (buf: Uint8Array, off: number, len: number) => number;

const KEY_LEN = MPA_REQ_REP.fields.key.size;
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

const F = MPA_REQ_REP.fields;

export function mpaFrameLength(f: Pick<MpaFrame, 'privateData'>): number {
  return MPA_REQ_REP.size + f.privateData.length;
}

export function encodeMpaFrame(f: MpaFrame, buf: Uint8Array, off: number): number {
  if (f.privateData.length > MPA_MAX_PRIVATE_DATA) {
    throw new SabreError(ErrorCode.InvalidArgument, `MPA private data is ${f.privateData.length} bytes, max ${MPA_MAX_PRIVATE_DATA}`);
  }
  const len = mpaFrameLength(f);
  need(buf, off, len);
  buf.set(f.reply ? KEY_REP : KEY_REQ, off + F.key.offset);
  const bits = (f.markers ? MPA_M : 0) | (f.crc ? MPA_C : 0) | (f.reject ? MPA_R : 0) | (f.enhanced ? MPA_H : 0) | (f.revision & MPA_REV_MASK);
  wr16(buf, off + F.bits.offset, bits);
  wr16(buf, off + F.pdLen.offset, f.privateData.length);
  buf.set(f.privateData, off + MPA_REQ_REP.size);
  return len;
}

function keyIs(buf: Uint8Array, at: number, key: Uint8Array): boolean {
  for (let i = 0; i < KEY_LEN; i++) if (buf[at + i] !== key[i]) return false;
  return true;
}

/** TRUNCATED means "not all of it has arrived yet" on a stream: read more and retry. */
export function decodeMpaFrame(buf: Uint8Array, off: number, end: number): WireResult<MpaFrame> {
  if (badWindow(buf, off, end) || end - off < MPA_REQ_REP.size) return fail('TRUNCATED');
  const at = off + F.key.offset;
  const reply = keyIs(buf, at, KEY_REP);
  if (!reply && !keyIs(buf, at, KEY_REQ)) return fail('BAD_MPA_KEY');
  const bits = rd16(buf, off + F.bits.offset);
  const revision = bits & MPA_REV_MASK;
  if (revision !== MPA_REVISION_1 && revision !== MPA_REVISION_2) return fail('BAD_MPA_REVISION');
  const pdLen = rd16(buf, off + F.pdLen.offset);
  if (pdLen > MPA_MAX_PRIVATE_DATA) return fail('BAD_LENGTH');
  if (end - off < MPA_REQ_REP.size + pdLen) return fail('TRUNCATED');
  const start = off + MPA_REQ_REP.size;
  return {
    ok: true,
    value: {
      reply, markers: (bits & MPA_M) !== 0, crc: (bits & MPA_C) !== 0, reject: (bits & MPA_R) !== 0,
      enhanced: (bits & MPA_H) !== 0, revision, privateData: buf.slice(start, start + pdLen),
    },
    length: MPA_REQ_REP.size + pdLen,
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

const V = MPA_V2_PRIVATE.fields;
const IRD_BITS = V.ird.bits!;
const ORD_BITS = V.ord.bits!;

export function encodeMpaV2Private(v: MpaV2Private, buf: Uint8Array, off: number): number {
  need(buf, off, MPA_V2_PRIVATE.size);
  if (v.ird > MPA_V2_IRD_ORD_MASK || v.ord > MPA_V2_IRD_ORD_MASK || v.ird < 0 || v.ord < 0) {
    throw new SabreError(ErrorCode.InvalidArgument, `MPA v2 IRD/ORD must be 0..${MPA_V2_IRD_ORD_MASK}`);
  }
  wr16(buf, off + V.ird.offset, (v.p2p ? IRD_BITS.P2P.mask : 0) | (v.zeroLenSendRtr ? IRD_BITS.ZeroLenSendRtr.mask : 0) | v.ird);
  wr16(buf, off + V.ord.offset, (v.writeRtr ? ORD_BITS.WriteRtr.mask : 0) | (v.readRtr ? ORD_BITS.ReadRtr.mask : 0) | v.ord);
  return MPA_V2_PRIVATE.size;
}

export function decodeMpaV2Private(buf: Uint8Array, off: number, end: number): WireResult<MpaV2Private> {
  if (badWindow(buf, off, end) || end - off < MPA_V2_PRIVATE.size) return fail('TRUNCATED');
  const ird = rd16(buf, off + V.ird.offset);
  const ord = rd16(buf, off + V.ord.offset);
  return {
    ok: true,
    value: {
      p2p: (ird & IRD_BITS.P2P.mask) !== 0, zeroLenSendRtr: (ird & IRD_BITS.ZeroLenSendRtr.mask) !== 0,
      writeRtr: (ord & ORD_BITS.WriteRtr.mask) !== 0, readRtr: (ord & ORD_BITS.ReadRtr.mask) !== 0,
      ird: ird & MPA_V2_IRD_ORD_MASK, ord: ord & MPA_V2_IRD_ORD_MASK,
    },
    length: MPA_V2_PRIVATE.size,
  };
}

// ---------------------------------------------------------------------------------------------
// FPDU framing (RFC 5044 §4): [ULPDU Length u16][ULPDU][pad 0-3][CRC32C]
// Markers are not part of these byte counts; they are inserted/removed at stream level.

const FPDU_LEN = MPA_FPDU.fields.ulpduLen.offset;
export const MAX_ULPDU = 0xffff;

/** Zero bytes after the ULPDU so that length field + ULPDU + pad is a multiple of 4. */
export function fpduPadLength(ulpduLen: number): number {
  return (4 - ((MPA_HDR_LEN + ulpduLen) & 3)) & 3;
}

/** Whole FPDU length (without markers). */
export function fpduLength(ulpduLen: number): number {
  return MPA_HDR_LEN + ulpduLen + fpduPadLength(ulpduLen) + MPA_CRC_LEN;
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
  wr16(buf, off + FPDU_LEN, ulpduLen);
  const padAt = off + MPA_HDR_LEN + ulpduLen;
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
  if (badWindow(buf, off, end) || end - off < MPA_HDR_LEN) return fail('TRUNCATED');
  const ulpduLen = rd16(buf, off + FPDU_LEN);
  const total = fpduLength(ulpduLen);
  if (end - off < total) return fail('TRUNCATED');
  const crcAt = off + total - MPA_CRC_LEN;
  const crc = rd32le(buf, crcAt);
  if (crc32c && crc32c(buf, off, crcAt - off) >>> 0 !== crc) return fail('BAD_CRC');
  return { ok: true, value: { ulpduOff: off + MPA_HDR_LEN, ulpduLen, crc }, length: total };
}

// ---------------------------------------------------------------------------------------------
// Markers (RFC 5044 §4.3)

export const MARKER_INTERVAL = MPA_MARKER_INTERVAL;
export const MARKER_LEN = MPA_MARKER.size;

/** Stream position of the first marker at or after `streamPos` (positions count from the first FPDU octet). */
export function nextMarkerPos(streamPos: number): number {
  return Math.ceil(streamPos / MARKER_INTERVAL) * MARKER_INTERVAL;
}

export function encodeMarker(fpduPtr: number, buf: Uint8Array, off: number): number {
  need(buf, off, MARKER_LEN);
  wr16(buf, off + MPA_MARKER.fields.rsvd.offset, 0);
  wr16(buf, off + MPA_MARKER.fields.fpduPtr.offset, fpduPtr);
  return MARKER_LEN;
}

export function decodeMarker(buf: Uint8Array, off: number, end: number): WireResult<{ fpduPtr: number }> {
  if (badWindow(buf, off, end) || end - off < MARKER_LEN) return fail('TRUNCATED');
  return { ok: true, value: { fpduPtr: rd16(buf, off + MPA_MARKER.fields.fpduPtr.offset) }, length: MARKER_LEN };
}
