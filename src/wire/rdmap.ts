// DDP segment headers and RDMAP payloads (RFC 5040/5041, RFC 7306, sabre extensions).
// All multi-byte fields are big-endian on the wire. Every offset and mask comes from ./spec.ts,
// through the accessors scripts/gen-wire.mjs generates from it (./fields.gen.ts).
//
// Encoders write into a caller's buffer at an offset and return the bytes written; they throw
// SabreError(InvalidArgument) only when given a value that cannot be encoded (our bug).
// Decoders never throw: malformed input yields { ok: false, error: <stable code> }.
import { AtomicOp, DDP_VERSION, OPCODES, QN, RDMAP_VERSION, READ_V_MAX_ENTRIES, TERM_RDMAP_HDR_LEN, TERM_SEGLEN_LEN } from './spec.js';
import { badWindow, checkSafeTo, fail, need, rd32, rdSafe64, wr32, wrSafe64, type WireResult } from './codec.js';
import * as W from './fields.gen.js';
import {
  ATOMIC_REQUEST_OPCODE_ATOMIC_OP, ATOMIC_REQUEST_SIZE, ATOMIC_RESPONSE_SIZE, DDP_CTRL_DDP_DV, DDP_CTRL_DDP_T,
  DDP_CTRL_RDMAP_RV, DDP_CTRL_RDMAP_RV_SHIFT, IMMEDIATE_DATA_SIZE, READ_COMPLETE_SIZE, READ_REQUEST_SIZE,
  READ_REQUEST_V_SIZE, READ_VENTRY_SIZE, TAGGED_SIZE, TERMINATE_CONTROL_D, TERMINATE_CONTROL_ECODE,
  TERMINATE_CONTROL_ECODE_SHIFT, TERMINATE_CONTROL_ETYPE, TERMINATE_CONTROL_ETYPE_SHIFT, TERMINATE_CONTROL_LAYER,
  TERMINATE_CONTROL_LAYER_SHIFT, TERMINATE_CONTROL_M, TERMINATE_CONTROL_R, TERMINATE_SIZE, UNTAGGED_SIZE,
  getAtomicRequestAddOrSwapBig, getAtomicRequestAddOrSwapMaskBig, getAtomicRequestCompareBig, getAtomicRequestCompareMaskBig,
  getAtomicRequestOpcode, getAtomicRequestReqId, getAtomicRequestStag, getAtomicRequestTo, getAtomicResponseReqId,
  getAtomicResponseValueBig, getImmediateDataImm, getImmediateDataLen, getReadCompleteImm,
  getReadCompleteLen, getReadRequestSinkStag, getReadRequestSinkTo, getReadRequestSize, getReadRequestSrcStag,
  getReadRequestSrcTo, getReadRequestVNSink, getReadRequestVNSrc, getReadRequestVTotalLen, getReadVEntryLen,
  getReadVEntryStag, getReadVEntryTo, getTerminateControl, setAtomicRequestAddOrSwapBig, setAtomicRequestAddOrSwapMaskBig, setAtomicRequestCompareBig,
  setAtomicRequestCompareMaskBig, setAtomicRequestOpcode, setAtomicRequestReqId, setAtomicRequestStag, setAtomicRequestTo,
  setAtomicResponseReqId, setAtomicResponseValueBig, setImmediateDataImm, setImmediateDataLen, setReadCompleteImm,
  setReadCompleteLen, setReadRequestSinkStag, setReadRequestSinkTo, setReadRequestSize, setReadRequestSrcStag,
  setReadRequestSrcTo, setReadRequestVNSink, setReadRequestVNSrc, setReadRequestVTotalLen, setReadVEntryLen,
  setReadVEntryStag, setReadVEntryTo, setTerminateControl,
} from './fields.gen.js';
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

export const TAGGED_HDR_LEN = TAGGED_SIZE;
export const UNTAGGED_HDR_LEN = UNTAGGED_SIZE;

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

const DV_BITS = DDP_VERSION & DDP_CTRL_DDP_DV;
const RV_BITS = (RDMAP_VERSION << DDP_CTRL_RDMAP_RV_SHIFT) & DDP_CTRL_RDMAP_RV;

// The DDP header, once a segment: its offsets and bits as this module's own consts, read with
// codec.ts's helpers. V8 folds a module's own consts into optimised code but loads an imported
// binding at every use, and the generated accessors cost a call-target check each; both measured
// slower here (bench/wire-codec.bench.mjs). The colder payloads below use the accessors.
const H_DDP = W.DDP_CTRL_DDP_OFF;
const H_RDMAP = W.DDP_CTRL_RDMAP_OFF;
const F_T = W.DDP_CTRL_DDP_T;
const F_L = W.DDP_CTRL_DDP_L;
const M_DV = W.DDP_CTRL_DDP_DV;
const M_RV = W.DDP_CTRL_RDMAP_RV;
const M_OPCODE = W.DDP_CTRL_RDMAP_OPCODE;
const T_SIZE = W.TAGGED_SIZE;
const T_STAG = W.TAGGED_STAG_OFF;
const T_TO = W.TAGGED_TO_OFF;
const U_SIZE = W.UNTAGGED_SIZE;
const U_ULP = W.UNTAGGED_ULP_OFF;
const U_QN = W.UNTAGGED_QN_OFF;
const U_MSN = W.UNTAGGED_MSN_OFF;
const U_MO = W.UNTAGGED_MO_OFF;

export function encodeDdp(h: DdpHdr, buf: Uint8Array, off: number): number {
  const op = h.opcode;
  if (!(op >= 0 && op < N_OPCODES) || OPCODE_TAGGED[op] !== h.tagged) {
    throw new SabreError(ErrorCode.InvalidArgument, `opcode ${op} is not a ${h.tagged ? 'tagged' : 'untagged'} RDMAP opcode`);
  }
  if (h.tagged) {
    need(buf, off, T_SIZE);
    checkSafeTo(h.to, 'TO');
    buf[off + H_DDP] = F_T | (h.last ? F_L : 0) | DV_BITS;
    buf[off + H_RDMAP] = RV_BITS | op;
    wr32(buf, off + T_STAG, h.stag);
    wrSafe64(buf, off + T_TO, h.to);
    return T_SIZE;
  }
  need(buf, off, U_SIZE);
  buf[off + H_DDP] = (h.last ? F_L : 0) | DV_BITS;
  buf[off + H_RDMAP] = RV_BITS | op;
  wr32(buf, off + U_ULP, h.ulp);
  wr32(buf, off + U_QN, h.qn);
  wr32(buf, off + U_MSN, h.msn);
  wr32(buf, off + U_MO, h.mo);
  return U_SIZE;
}

export function decodeDdp(buf: Uint8Array, off: number, end: number): WireResult<DdpHdr> {
  if (badWindow(buf, off, end) || end - off < 2) return fail('TRUNCATED');
  const c0 = buf[off + H_DDP]!;
  const c1 = buf[off + H_RDMAP]!;
  if ((c0 & M_DV) !== DV_BITS) return fail('BAD_DDP_VERSION');
  if ((c1 & M_RV) !== RV_BITS) return fail('BAD_RDMAP_VERSION');
  const opcode = c1 & M_OPCODE;
  const tagged = (c0 & F_T) !== 0;
  if (opcode >= N_OPCODES || OPCODE_TAGGED[opcode] !== tagged) return fail('BAD_OPCODE');
  const last = (c0 & F_L) !== 0;
  if (tagged) {
    if (end - off < T_SIZE) return fail('TRUNCATED');
    const to = rdSafe64(buf, off + T_TO);
    if (to < 0) return fail('TO_RANGE');
    return { ok: true, value: { tagged: true, last, opcode, stag: rd32(buf, off + T_STAG), to }, length: T_SIZE };
  }
  if (end - off < U_SIZE) return fail('TRUNCATED');
  return {
    ok: true,
    value: {
      tagged: false, last, opcode,
      ulp: rd32(buf, off + U_ULP), qn: rd32(buf, off + U_QN), msn: rd32(buf, off + U_MSN), mo: rd32(buf, off + U_MO),
    },
    length: U_SIZE,
  };
}

// ---------------------------------------------------------------------------------------------
// Read Request (RFC 5040 §4.4)

export interface ReadRequest { sinkStag: number; sinkTo: number; size: number; srcStag: number; srcTo: number }

export function encodeReadRequest(v: ReadRequest, buf: Uint8Array, off: number): number {
  need(buf, off, READ_REQUEST_SIZE);
  checkSafeTo(v.sinkTo, 'sinkTo');
  checkSafeTo(v.srcTo, 'srcTo');
  setReadRequestSinkStag(buf, off, v.sinkStag);
  setReadRequestSinkTo(buf, off, v.sinkTo);
  setReadRequestSize(buf, off, v.size);
  setReadRequestSrcStag(buf, off, v.srcStag);
  setReadRequestSrcTo(buf, off, v.srcTo);
  return READ_REQUEST_SIZE;
}

export function decodeReadRequest(buf: Uint8Array, off: number, end: number): WireResult<ReadRequest> {
  if (badWindow(buf, off, end) || end - off < READ_REQUEST_SIZE) return fail('TRUNCATED');
  const sinkTo = getReadRequestSinkTo(buf, off);
  const srcTo = getReadRequestSrcTo(buf, off);
  if (sinkTo < 0 || srcTo < 0) return fail('TO_RANGE');
  return {
    ok: true,
    value: {
      sinkStag: getReadRequestSinkStag(buf, off), sinkTo, size: getReadRequestSize(buf, off),
      srcStag: getReadRequestSrcStag(buf, off), srcTo,
    },
    length: READ_REQUEST_SIZE,
  };
}

// ---------------------------------------------------------------------------------------------
// Vectored Read Request (sabre, M1)

export interface ReadVEntry { stag: number; to: number; len: number }
export interface ReadRequestV { srcs: ReadVEntry[]; sinks: ReadVEntry[] }

export function readRequestVLength(v: ReadRequestV): number {
  return readRequestVBytes(v.srcs.length, v.sinks.length);
}

/** The body of a ReadRequestV naming `srcs` sources and `sinks` sinks (a read of nothing still names one of each). */
export function readRequestVBytes(srcs: number, sinks: number): number {
  return READ_REQUEST_V_SIZE + (Math.max(1, srcs) + Math.max(1, sinks)) * READ_VENTRY_SIZE;
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
  setReadRequestVNSrc(buf, off, n);
  setReadRequestVNSink(buf, off, m);
  setReadRequestVTotalLen(buf, off, total);
  let p = off + READ_REQUEST_V_SIZE;
  for (const e of v.srcs.concat(v.sinks)) {
    checkSafeTo(e.to, 'entry TO');
    setReadVEntryStag(buf, p, e.stag);
    setReadVEntryTo(buf, p, e.to);
    setReadVEntryLen(buf, p, e.len);
    p += READ_VENTRY_SIZE;
  }
  return len;
}

export function decodeReadRequestV(buf: Uint8Array, off: number, end: number): WireResult<ReadRequestV> {
  if (badWindow(buf, off, end) || end - off < READ_REQUEST_V_SIZE) return fail('TRUNCATED');
  const n = getReadRequestVNSrc(buf, off);
  const m = getReadRequestVNSink(buf, off);
  const total = getReadRequestVTotalLen(buf, off);
  if (n < 1 || m < 1 || n > READ_V_MAX_ENTRIES || m > READ_V_MAX_ENTRIES) return fail('BAD_COUNT');
  const len = READ_REQUEST_V_SIZE + (n + m) * READ_VENTRY_SIZE;
  if (end - off < len) return fail('TRUNCATED');
  const srcs: ReadVEntry[] = [];
  const sinks: ReadVEntry[] = [];
  let sSrc = 0, sSink = 0;
  let p = off + READ_REQUEST_V_SIZE;
  for (let i = 0; i < n + m; i++, p += READ_VENTRY_SIZE) {
    const to = getReadVEntryTo(buf, p);
    if (to < 0) return fail('TO_RANGE');
    const e = { stag: getReadVEntryStag(buf, p), to, len: getReadVEntryLen(buf, p) };
    if (i < n) { srcs.push(e); sSrc += e.len; } else { sinks.push(e); sSink += e.len; }
  }
  if (sSrc !== total || sSink !== total) return fail('BAD_LENGTH');
  return { ok: true, value: { srcs, sinks }, length: len };
}

// ---------------------------------------------------------------------------------------------
// Read Complete (sabre, M1) and Immediate Data (RFC 7306): both two u32 words

export interface ReadComplete { imm: number; len: number }
export interface ImmediateData { imm: number; len: number }

export function encodeReadComplete(v: ReadComplete, buf: Uint8Array, off: number): number {
  need(buf, off, READ_COMPLETE_SIZE);
  setReadCompleteImm(buf, off, v.imm);
  setReadCompleteLen(buf, off, v.len);
  return READ_COMPLETE_SIZE;
}
export function decodeReadComplete(buf: Uint8Array, off: number, end: number): WireResult<ReadComplete> {
  if (badWindow(buf, off, end) || end - off < READ_COMPLETE_SIZE) return fail('TRUNCATED');
  return { ok: true, value: { imm: getReadCompleteImm(buf, off), len: getReadCompleteLen(buf, off) }, length: READ_COMPLETE_SIZE };
}
export function encodeImmediateData(v: ImmediateData, buf: Uint8Array, off: number): number {
  need(buf, off, IMMEDIATE_DATA_SIZE);
  setImmediateDataImm(buf, off, v.imm);
  setImmediateDataLen(buf, off, v.len);
  return IMMEDIATE_DATA_SIZE;
}
export function decodeImmediateData(buf: Uint8Array, off: number, end: number): WireResult<ImmediateData> {
  if (badWindow(buf, off, end) || end - off < IMMEDIATE_DATA_SIZE) return fail('TRUNCATED');
  return { ok: true, value: { imm: getImmediateDataImm(buf, off), len: getImmediateDataLen(buf, off) }, length: IMMEDIATE_DATA_SIZE };
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

export function encodeAtomicRequest(v: AtomicRequest, buf: Uint8Array, off: number): number {
  need(buf, off, ATOMIC_REQUEST_SIZE);
  checkSafeTo(v.to, 'atomic TO');
  let code: number;
  if (v.op === 'fetchAdd') code = AtomicOp.FetchAdd;
  else if (v.op === 'cmpSwap') code = AtomicOp.CmpSwap;
  else throw new SabreError(ErrorCode.InvalidArgument, `unknown atomic op ${String(v.op)}`);
  setAtomicRequestOpcode(buf, off, code);
  setAtomicRequestReqId(buf, off, v.reqId);
  setAtomicRequestStag(buf, off, v.stag);
  setAtomicRequestTo(buf, off, v.to);
  setAtomicRequestAddOrSwapBig(buf, off, v.addOrSwap);
  setAtomicRequestAddOrSwapMaskBig(buf, off, v.addOrSwapMask);
  setAtomicRequestCompareBig(buf, off, v.compare);
  setAtomicRequestCompareMaskBig(buf, off, v.compareMask);
  return ATOMIC_REQUEST_SIZE;
}

export function decodeAtomicRequest(buf: Uint8Array, off: number, end: number): WireResult<AtomicRequest> {
  if (badWindow(buf, off, end) || end - off < ATOMIC_REQUEST_SIZE) return fail('TRUNCATED');
  const code = getAtomicRequestOpcode(buf, off) & ATOMIC_REQUEST_OPCODE_ATOMIC_OP;
  let op: AtomicOpName;
  if (code === AtomicOp.FetchAdd) op = 'fetchAdd';
  else if (code === AtomicOp.CmpSwap) op = 'cmpSwap';
  else return fail('BAD_ATOMIC_OP');
  const to = getAtomicRequestTo(buf, off);
  if (to < 0) return fail('TO_RANGE');
  return {
    ok: true,
    value: {
      op, reqId: getAtomicRequestReqId(buf, off), stag: getAtomicRequestStag(buf, off), to,
      addOrSwap: getAtomicRequestAddOrSwapBig(buf, off), addOrSwapMask: getAtomicRequestAddOrSwapMaskBig(buf, off),
      compare: getAtomicRequestCompareBig(buf, off), compareMask: getAtomicRequestCompareMaskBig(buf, off),
    },
    length: ATOMIC_REQUEST_SIZE,
  };
}

export function encodeAtomicResponse(v: AtomicResponse, buf: Uint8Array, off: number): number {
  need(buf, off, ATOMIC_RESPONSE_SIZE);
  setAtomicResponseReqId(buf, off, v.reqId);
  setAtomicResponseValueBig(buf, off, v.value);
  return ATOMIC_RESPONSE_SIZE;
}

export function decodeAtomicResponse(buf: Uint8Array, off: number, end: number): WireResult<AtomicResponse> {
  if (badWindow(buf, off, end) || end - off < ATOMIC_RESPONSE_SIZE) return fail('TRUNCATED');
  return {
    ok: true,
    value: { reqId: getAtomicResponseReqId(buf, off), value: getAtomicResponseValueBig(buf, off) },
    length: ATOMIC_RESPONSE_SIZE,
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

/** Bytes the D/R flags promise after the control word, given the copied DDP control byte. */
function copyLength(d: boolean, r: boolean, copiedDdpCtrl: number): number {
  let n = 0;
  if (d) n += TERM_SEGLEN_LEN + ((copiedDdpCtrl & DDP_CTRL_DDP_T) !== 0 ? TAGGED_SIZE : UNTAGGED_SIZE);
  if (r) n += TERM_RDMAP_HDR_LEN;
  return n;
}

export function encodeTerminate(v: Terminate, buf: Uint8Array, off: number): number {
  const copy = v.hdrCopy ?? new Uint8Array(0);
  const d = v.d ?? false, r = v.r ?? false;
  if (copy.length !== copyLength(d, r, copy[TERM_SEGLEN_LEN] ?? 0)) {
    throw new SabreError(ErrorCode.InvalidArgument, `Terminate hdrCopy of ${copy.length} bytes does not match the D/R flags`);
  }
  const len = TERMINATE_SIZE + copy.length;
  need(buf, off, len);
  const ctrl =
    ((v.layer << TERMINATE_CONTROL_LAYER_SHIFT) & TERMINATE_CONTROL_LAYER) | ((v.etype << TERMINATE_CONTROL_ETYPE_SHIFT) & TERMINATE_CONTROL_ETYPE) |
    ((v.ecode << TERMINATE_CONTROL_ECODE_SHIFT) & TERMINATE_CONTROL_ECODE) |
    (v.m ? TERMINATE_CONTROL_M : 0) | (d ? TERMINATE_CONTROL_D : 0) | (r ? TERMINATE_CONTROL_R : 0);
  setTerminateControl(buf, off, ctrl >>> 0);
  buf.set(copy, off + TERMINATE_SIZE);
  return len;
}

export function decodeTerminate(buf: Uint8Array, off: number, end: number): WireResult<Terminate> {
  if (badWindow(buf, off, end) || end - off < TERMINATE_SIZE) return fail('TRUNCATED');
  const ctrl = getTerminateControl(buf, off);
  const m = (ctrl & TERMINATE_CONTROL_M) !== 0, d = (ctrl & TERMINATE_CONTROL_D) !== 0, r = (ctrl & TERMINATE_CONTROL_R) !== 0;
  const at = off + TERMINATE_SIZE;
  if (d && end - at < TERM_SEGLEN_LEN + 1) return fail('TRUNCATED');
  const n = copyLength(d, r, d ? buf[at + TERM_SEGLEN_LEN]! : 0);
  if (end - at < n) return fail('TRUNCATED');
  const value: Terminate = {
    layer: (ctrl & TERMINATE_CONTROL_LAYER) >>> TERMINATE_CONTROL_LAYER_SHIFT,
    etype: (ctrl & TERMINATE_CONTROL_ETYPE) >>> TERMINATE_CONTROL_ETYPE_SHIFT,
    ecode: (ctrl & TERMINATE_CONTROL_ECODE) >>> TERMINATE_CONTROL_ECODE_SHIFT, m, d, r,
  };
  if (n > 0) value.hdrCopy = buf.slice(at, at + n);
  return { ok: true, value, length: TERMINATE_SIZE + n };
}
