// DDP segment headers and RDMAP payloads (RFC 5040/5041, RFC 7306, sabre extensions).
// All multi-byte fields are big-endian on the wire. Every offset comes from ./spec.ts.
//
// Encoders write into a caller's buffer at an offset and return the bytes written; they throw
// SabreError(InvalidArgument) only when given a value that cannot be encoded (our bug).
// Decoders never throw: malformed input yields { ok: false, error: <stable code> }.
import {
  ATOMIC_OP_MASK, ATOMIC_REQUEST, ATOMIC_RESPONSE, AtomicOp, DDP_DV_MASK, DDP_L, DDP_T, DDP_VERSION,
  IMMEDIATE_DATA, OPCODES, QN, RDMAP_OPCODE_MASK, RDMAP_RV_MASK, RDMAP_RV_SHIFT, RDMAP_VERSION,
  READ_COMPLETE, READ_REQUEST, READ_REQUEST_V, READ_V_ENTRY, READ_V_MAX_ENTRIES, TAGGED, TERM_D,
  TERM_ECODE_SHIFT, TERM_ETYPE_SHIFT, TERM_LAYER_SHIFT, TERM_M, TERM_R, TERM_RDMAP_HDR_LEN,
  TERM_SEGLEN_LEN, TERMINATE, UNTAGGED,
} from './spec.js';
import {
  badWindow, checkSafeTo, fail, need, rd16, rd32, rdBig64, rdSafe64, wr16, wr32, wrBig64, wrSafe64,
  type WireResult,
} from './codec.js';
import { SabreError, ErrorCode } from '../core/errors.js';
import type { DdpHdr } from '../core/frame.js';

export type { WireResult } from './codec.js';

export const RdmapOpcode = {
  RdmaWrite: 0, ReadRequest: 1, ReadResponse: 2, Send: 3, SendInv: 4, SendSe: 5, SendSeInv: 6,
  Terminate: 7, ImmediateData: 8, ImmediateDataSe: 9, AtomicRequest: 10, AtomicResponse: 11,
  /* sabre extensions (IANA-unassigned 0xC-0xE; documented in docs/wire.md) */
  SendWithImm: 12, ReadRequestV: 13, ReadComplete: 14,
  /* sabre's TCP control message (IANA-reserved 0xF; untagged; only between sabre peers) */
  SabreControl: 15,
} as const;

/** DDP untagged queue numbers (IANA registry from RFC 7306; see spec.ts). */
export const Qn = QN;

export const TAGGED_HDR_LEN = TAGGED.size;
export const UNTAGGED_HDR_LEN = UNTAGGED.size;

export type { DdpHdr, TaggedHdr, UntaggedHdr } from '../core/frame.js';

/** Whether each opcode uses the tagged model (index = opcode); 15 is sabre's untagged TCP control. */
const OPCODE_TAGGED: readonly boolean[] = OPCODES.map((o) => o.tagged);
const OPCODE_DATA: readonly boolean[] = OPCODES.map((o) => o.data);
const OPCODE_SABRE: readonly boolean[] = OPCODES.map((o) => o.sabre === true);
const N_OPCODES = OPCODES.length;

/**
 * Whether a segment of RDMAP opcode `op` carries message data after its DDP header (tagged
 * data, the Send family) rather than an RDMAP control body (spec.ts OPCODES `data`). Links
 * that hand segments to the engine cut data segments into header + payload views and leave
 * control bodies in the header buffer.
 */
export function carriesData(op: number): boolean {
  return OPCODE_DATA[op] === true;
}

/** Whether RDMAP opcode `op` is one of sabre's extensions (12-15), which only sabre peers speak. */
export function isSabreExtension(op: number): boolean {
  return OPCODE_SABRE[op] === true;
}

const T_DDP = TAGGED.fields.ddpCtrl.offset;
const T_RDMAP = TAGGED.fields.rdmapCtrl.offset;
const T_STAG = TAGGED.fields.stag.offset;
const T_TO = TAGGED.fields.to.offset;
const U_ULP = UNTAGGED.fields.ulp.offset;
const U_QN = UNTAGGED.fields.qn.offset;
const U_MSN = UNTAGGED.fields.msn.offset;
const U_MO = UNTAGGED.fields.mo.offset;
const DV_BITS = DDP_VERSION & DDP_DV_MASK;
const RV_BITS = (RDMAP_VERSION << RDMAP_RV_SHIFT) & RDMAP_RV_MASK;

export function encodeDdp(h: DdpHdr, buf: Uint8Array, off: number): number {
  const op = h.opcode;
  if (!(op >= 0 && op < N_OPCODES) || OPCODE_TAGGED[op] !== h.tagged) {
    throw new SabreError(ErrorCode.InvalidArgument, `opcode ${op} is not a ${h.tagged ? 'tagged' : 'untagged'} RDMAP opcode`);
  }
  if (h.tagged) {
    need(buf, off, TAGGED.size);
    checkSafeTo(h.to, 'TO');
    buf[off + T_DDP] = DDP_T | (h.last ? DDP_L : 0) | DV_BITS;
    buf[off + T_RDMAP] = RV_BITS | op;
    wr32(buf, off + T_STAG, h.stag);
    wrSafe64(buf, off + T_TO, h.to);
    return TAGGED.size;
  }
  need(buf, off, UNTAGGED.size);
  buf[off + T_DDP] = (h.last ? DDP_L : 0) | DV_BITS;
  buf[off + T_RDMAP] = RV_BITS | op;
  wr32(buf, off + U_ULP, h.ulp);
  wr32(buf, off + U_QN, h.qn);
  wr32(buf, off + U_MSN, h.msn);
  wr32(buf, off + U_MO, h.mo);
  return UNTAGGED.size;
}

export function decodeDdp(buf: Uint8Array, off: number, end: number): WireResult<DdpHdr> {
  if (badWindow(buf, off, end) || end - off < 2) return fail('TRUNCATED');
  const c0 = buf[off + T_DDP]!;
  const c1 = buf[off + T_RDMAP]!;
  if ((c0 & DDP_DV_MASK) !== DV_BITS) return fail('BAD_DDP_VERSION');
  if ((c1 & RDMAP_RV_MASK) !== RV_BITS) return fail('BAD_RDMAP_VERSION');
  const opcode = c1 & RDMAP_OPCODE_MASK;
  const tagged = (c0 & DDP_T) !== 0;
  if (opcode >= N_OPCODES || OPCODE_TAGGED[opcode] !== tagged) return fail('BAD_OPCODE');
  const last = (c0 & DDP_L) !== 0;
  if (tagged) {
    if (end - off < TAGGED.size) return fail('TRUNCATED');
    const to = rdSafe64(buf, off + T_TO);
    if (to < 0) return fail('TO_RANGE');
    return { ok: true, value: { tagged: true, last, opcode, stag: rd32(buf, off + T_STAG), to }, length: TAGGED.size };
  }
  if (end - off < UNTAGGED.size) return fail('TRUNCATED');
  return {
    ok: true,
    value: {
      tagged: false, last, opcode,
      ulp: rd32(buf, off + U_ULP), qn: rd32(buf, off + U_QN), msn: rd32(buf, off + U_MSN), mo: rd32(buf, off + U_MO),
    },
    length: UNTAGGED.size,
  };
}

// ---------------------------------------------------------------------------------------------
// Read Request (RFC 5040 §4.4)

export interface ReadRequest { sinkStag: number; sinkTo: number; size: number; srcStag: number; srcTo: number }

const RR = READ_REQUEST.fields;

export function encodeReadRequest(v: ReadRequest, buf: Uint8Array, off: number): number {
  need(buf, off, READ_REQUEST.size);
  checkSafeTo(v.sinkTo, 'sinkTo');
  checkSafeTo(v.srcTo, 'srcTo');
  wr32(buf, off + RR.sinkStag.offset, v.sinkStag);
  wrSafe64(buf, off + RR.sinkTo.offset, v.sinkTo);
  wr32(buf, off + RR.size.offset, v.size);
  wr32(buf, off + RR.srcStag.offset, v.srcStag);
  wrSafe64(buf, off + RR.srcTo.offset, v.srcTo);
  return READ_REQUEST.size;
}

export function decodeReadRequest(buf: Uint8Array, off: number, end: number): WireResult<ReadRequest> {
  if (badWindow(buf, off, end) || end - off < READ_REQUEST.size) return fail('TRUNCATED');
  const sinkTo = rdSafe64(buf, off + RR.sinkTo.offset);
  const srcTo = rdSafe64(buf, off + RR.srcTo.offset);
  if (sinkTo < 0 || srcTo < 0) return fail('TO_RANGE');
  return {
    ok: true,
    value: {
      sinkStag: rd32(buf, off + RR.sinkStag.offset), sinkTo, size: rd32(buf, off + RR.size.offset),
      srcStag: rd32(buf, off + RR.srcStag.offset), srcTo,
    },
    length: READ_REQUEST.size,
  };
}

// ---------------------------------------------------------------------------------------------
// Vectored Read Request (sabre, M1)

export interface ReadVEntry { stag: number; to: number; len: number }
export interface ReadRequestV { srcs: ReadVEntry[]; sinks: ReadVEntry[] }

const RV = READ_REQUEST_V.fields;
const VE = READ_V_ENTRY.fields;

export function readRequestVLength(v: ReadRequestV): number {
  return READ_REQUEST_V.size + (v.srcs.length + v.sinks.length) * READ_V_ENTRY.size;
}

function sumLen(es: readonly ReadVEntry[]): number {
  let s = 0;
  for (const e of es) s += e.len;
  return s;
}

export function encodeReadRequestV(v: ReadRequestV, buf: Uint8Array, off: number): number {
  const n = v.srcs.length, m = v.sinks.length;
  if (n < 1 || m < 1 || n > READ_V_MAX_ENTRIES || m > READ_V_MAX_ENTRIES) {
    throw new SabreError(ErrorCode.InvalidArgument, `ReadRequestV needs 1..${READ_V_MAX_ENTRIES} sources and sinks, got ${n}/${m}`);
  }
  const total = sumLen(v.srcs);
  if (total !== sumLen(v.sinks) || total > 0xffff_ffff) {
    throw new SabreError(ErrorCode.InvalidArgument, 'ReadRequestV source and sink lengths must sum to the same u32 total');
  }
  const len = readRequestVLength(v);
  need(buf, off, len);
  wr16(buf, off + RV.nSrc.offset, n);
  wr16(buf, off + RV.nSink.offset, m);
  wr32(buf, off + RV.totalLen.offset, total);
  let p = off + READ_REQUEST_V.size;
  for (const e of v.srcs.concat(v.sinks)) {
    checkSafeTo(e.to, 'entry TO');
    wr32(buf, p + VE.stag.offset, e.stag);
    wrSafe64(buf, p + VE.to.offset, e.to);
    wr32(buf, p + VE.len.offset, e.len);
    p += READ_V_ENTRY.size;
  }
  return len;
}

export function decodeReadRequestV(buf: Uint8Array, off: number, end: number): WireResult<ReadRequestV> {
  if (badWindow(buf, off, end) || end - off < READ_REQUEST_V.size) return fail('TRUNCATED');
  const n = rd16(buf, off + RV.nSrc.offset);
  const m = rd16(buf, off + RV.nSink.offset);
  const total = rd32(buf, off + RV.totalLen.offset);
  if (n < 1 || m < 1 || n > READ_V_MAX_ENTRIES || m > READ_V_MAX_ENTRIES) return fail('BAD_COUNT');
  const len = READ_REQUEST_V.size + (n + m) * READ_V_ENTRY.size;
  if (end - off < len) return fail('TRUNCATED');
  const srcs: ReadVEntry[] = [];
  const sinks: ReadVEntry[] = [];
  let sSrc = 0, sSink = 0;
  let p = off + READ_REQUEST_V.size;
  for (let i = 0; i < n + m; i++, p += READ_V_ENTRY.size) {
    const to = rdSafe64(buf, p + VE.to.offset);
    if (to < 0) return fail('TO_RANGE');
    const e = { stag: rd32(buf, p + VE.stag.offset), to, len: rd32(buf, p + VE.len.offset) };
    if (i < n) { srcs.push(e); sSrc += e.len; } else { sinks.push(e); sSink += e.len; }
  }
  if (sSrc !== total || sSink !== total) return fail('BAD_LENGTH');
  return { ok: true, value: { srcs, sinks }, length: len };
}

// ---------------------------------------------------------------------------------------------
// Read Complete (sabre, M1) and Immediate Data (RFC 7306): both two u32 words

export interface ReadComplete { imm: number; len: number }
export interface ImmediateData { imm: number; len: number }

function encodePair(layout: typeof READ_COMPLETE | typeof IMMEDIATE_DATA, v: { imm: number; len: number }, buf: Uint8Array, off: number): number {
  need(buf, off, layout.size);
  wr32(buf, off + layout.fields.imm.offset, v.imm);
  wr32(buf, off + layout.fields.len.offset, v.len);
  return layout.size;
}

function decodePair(layout: typeof READ_COMPLETE | typeof IMMEDIATE_DATA, buf: Uint8Array, off: number, end: number): WireResult<{ imm: number; len: number }> {
  if (badWindow(buf, off, end) || end - off < layout.size) return fail('TRUNCATED');
  return {
    ok: true,
    value: { imm: rd32(buf, off + layout.fields.imm.offset), len: rd32(buf, off + layout.fields.len.offset) },
    length: layout.size,
  };
}

export function encodeReadComplete(v: ReadComplete, buf: Uint8Array, off: number): number {
  return encodePair(READ_COMPLETE, v, buf, off);
}
export function decodeReadComplete(buf: Uint8Array, off: number, end: number): WireResult<ReadComplete> {
  return decodePair(READ_COMPLETE, buf, off, end);
}
export function encodeImmediateData(v: ImmediateData, buf: Uint8Array, off: number): number {
  return encodePair(IMMEDIATE_DATA, v, buf, off);
}
export function decodeImmediateData(buf: Uint8Array, off: number, end: number): WireResult<ImmediateData> {
  return decodePair(IMMEDIATE_DATA, buf, off, end);
}

// ---------------------------------------------------------------------------------------------
// Atomics (RFC 7306 §5)

export type AtomicOpName = 'fetchAdd' | 'cmpSwap';

export interface AtomicRequest {
  op: AtomicOpName;
  reqId: number;
  stag: number;
  to: number;
  /** Add Data (fetchAdd) or Swap Data (cmpSwap). */
  addOrSwap: bigint;
  /** Add Mask or Swap Mask, as RFC 7306 defines them; the engine decides what it honours. */
  addOrSwapMask: bigint;
  /** Compare Data (cmpSwap; 0 for fetchAdd). */
  compare: bigint;
  compareMask: bigint;
}

export interface AtomicResponse { reqId: number; value: bigint }

const AQ = ATOMIC_REQUEST.fields;
const AR = ATOMIC_RESPONSE.fields;

export function encodeAtomicRequest(v: AtomicRequest, buf: Uint8Array, off: number): number {
  need(buf, off, ATOMIC_REQUEST.size);
  checkSafeTo(v.to, 'atomic TO');
  let code: number;
  if (v.op === 'fetchAdd') code = AtomicOp.FetchAdd;
  else if (v.op === 'cmpSwap') code = AtomicOp.CmpSwap;
  else throw new SabreError(ErrorCode.InvalidArgument, `unknown atomic op ${String(v.op)}`);
  wr32(buf, off + AQ.opcode.offset, code);
  wr32(buf, off + AQ.reqId.offset, v.reqId);
  wr32(buf, off + AQ.stag.offset, v.stag);
  wrSafe64(buf, off + AQ.to.offset, v.to);
  wrBig64(buf, off + AQ.addOrSwap.offset, v.addOrSwap);
  wrBig64(buf, off + AQ.addOrSwapMask.offset, v.addOrSwapMask);
  wrBig64(buf, off + AQ.compare.offset, v.compare);
  wrBig64(buf, off + AQ.compareMask.offset, v.compareMask);
  return ATOMIC_REQUEST.size;
}

export function decodeAtomicRequest(buf: Uint8Array, off: number, end: number): WireResult<AtomicRequest> {
  if (badWindow(buf, off, end) || end - off < ATOMIC_REQUEST.size) return fail('TRUNCATED');
  const code = rd32(buf, off + AQ.opcode.offset) & ATOMIC_OP_MASK;
  let op: AtomicOpName;
  if (code === AtomicOp.FetchAdd) op = 'fetchAdd';
  else if (code === AtomicOp.CmpSwap) op = 'cmpSwap';
  else return fail('BAD_ATOMIC_OP');
  const to = rdSafe64(buf, off + AQ.to.offset);
  if (to < 0) return fail('TO_RANGE');
  return {
    ok: true,
    value: {
      op, reqId: rd32(buf, off + AQ.reqId.offset), stag: rd32(buf, off + AQ.stag.offset), to,
      addOrSwap: rdBig64(buf, off + AQ.addOrSwap.offset), addOrSwapMask: rdBig64(buf, off + AQ.addOrSwapMask.offset),
      compare: rdBig64(buf, off + AQ.compare.offset), compareMask: rdBig64(buf, off + AQ.compareMask.offset),
    },
    length: ATOMIC_REQUEST.size,
  };
}

export function encodeAtomicResponse(v: AtomicResponse, buf: Uint8Array, off: number): number {
  need(buf, off, ATOMIC_RESPONSE.size);
  wr32(buf, off + AR.reqId.offset, v.reqId);
  wrBig64(buf, off + AR.value.offset, v.value);
  return ATOMIC_RESPONSE.size;
}

export function decodeAtomicResponse(buf: Uint8Array, off: number, end: number): WireResult<AtomicResponse> {
  if (badWindow(buf, off, end) || end - off < ATOMIC_RESPONSE.size) return fail('TRUNCATED');
  return {
    ok: true,
    value: { reqId: rd32(buf, off + AR.reqId.offset), value: rdBig64(buf, off + AR.value.offset) },
    length: ATOMIC_RESPONSE.size,
  };
}

// ---------------------------------------------------------------------------------------------
// Terminate (RFC 5040 §4.8)

export interface Terminate {
  layer: number;
  etype: number;
  ecode: number;
  /** Hdrct M: the DDP Segment Length in hdrCopy is valid. */
  m?: boolean;
  /** Hdrct D: hdrCopy starts with u16 DDP Segment Length + the terminated DDP header. */
  d?: boolean;
  /** Hdrct R: hdrCopy ends with the 28-byte terminated RDMAP header. */
  r?: boolean;
  /** The copied bytes named by D and R, exactly as they follow the Terminate Control. */
  hdrCopy?: Uint8Array;
}

const TERM_CTRL = TERMINATE.fields.control.offset;

/** Bytes the D/R flags promise after the control word, given the copied DDP control byte. */
function copyLength(d: boolean, r: boolean, copiedDdpCtrl: number): number {
  let n = 0;
  if (d) n += TERM_SEGLEN_LEN + ((copiedDdpCtrl & DDP_T) !== 0 ? TAGGED.size : UNTAGGED.size);
  if (r) n += TERM_RDMAP_HDR_LEN;
  return n;
}

export function encodeTerminate(v: Terminate, buf: Uint8Array, off: number): number {
  const copy = v.hdrCopy ?? new Uint8Array(0);
  const d = v.d ?? false, r = v.r ?? false;
  if (copy.length !== copyLength(d, r, copy[TERM_SEGLEN_LEN] ?? 0)) {
    throw new SabreError(ErrorCode.InvalidArgument, `Terminate hdrCopy of ${copy.length} bytes does not match the D/R flags`);
  }
  const len = TERMINATE.size + copy.length;
  need(buf, off, len);
  const ctrl =
    ((v.layer & 0xf) << TERM_LAYER_SHIFT) | ((v.etype & 0xf) << TERM_ETYPE_SHIFT) | ((v.ecode & 0xff) << TERM_ECODE_SHIFT) |
    (v.m ? TERM_M : 0) | (d ? TERM_D : 0) | (r ? TERM_R : 0);
  wr32(buf, off + TERM_CTRL, ctrl >>> 0);
  buf.set(copy, off + TERMINATE.size);
  return len;
}

export function decodeTerminate(buf: Uint8Array, off: number, end: number): WireResult<Terminate> {
  if (badWindow(buf, off, end) || end - off < TERMINATE.size) return fail('TRUNCATED');
  const ctrl = rd32(buf, off + TERM_CTRL);
  const m = (ctrl & TERM_M) !== 0, d = (ctrl & TERM_D) !== 0, r = (ctrl & TERM_R) !== 0;
  const at = off + TERMINATE.size;
  if (d && end - at < TERM_SEGLEN_LEN + 1) return fail('TRUNCATED');
  const n = copyLength(d, r, d ? buf[at + TERM_SEGLEN_LEN]! : 0);
  if (end - at < n) return fail('TRUNCATED');
  const value: Terminate = {
    layer: ctrl >>> TERM_LAYER_SHIFT, etype: (ctrl >>> TERM_ETYPE_SHIFT) & 0xf, ecode: (ctrl >>> TERM_ECODE_SHIFT) & 0xff, m, d, r,
  };
  if (n > 0) value.hdrCopy = buf.slice(at, at + n);
  return { ok: true, value, length: TERMINATE.size + n };
}
