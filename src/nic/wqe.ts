// Codecs of the NIC's ring records (layouts in src/wire/nic-spec.ts): send and receive WQEs
// (application → NIC thread, one device-wide RecordRing, kinds interleaved in posting order)
// and CQEs (NIC thread → application, one device-wide RecordRing). Writers reserve one record
// and fill it; they do not commit: the poster commits after its batch and rings the doorbell
// (src/nic/ring.ts). Readers take a DataView and the offset peek() gave; they can refill an
// object the caller keeps (`into`), so a loop over a ring allocates nothing per record but
// what the record itself carries (an atomic's bigints, a CQE's source address).
import { ErrorCode, SabreError } from '../core/errors.js';
import * as W from '../wire/fields.gen.js';
import { CQE_KIND, WQE_KIND_RECV, WQE_KIND_SEND } from '../wire/nic-spec.js';
import type { RecordRing } from './ring.js';

export { CQE_KIND, WQE_KIND_RECV, WQE_KIND_SEND };

export interface WqeSge {
  addr: number;
  length: number;
  lkey: number;
}
export interface WqeRemoteSge {
  addr: number;
  length: number;
  rkey: number;
}

export interface SendWqe {
  qpn: number;
  token: number;
  /** verbs Opcode. */
  opcode: number;
  signaled: boolean;
  imm?: number;
  remoteAddr?: number;
  rkey?: number;
  remoteQpn?: number;
  ah?: number;
  compareAdd?: bigint;
  swap?: bigint;
  // readonly for posters; a reader refilling `into` reuses (and resizes) these arrays.
  sges: readonly WqeSge[];
  remoteSges?: readonly WqeRemoteSge[];
  /** Read back as a view of the ring: valid until the record is advanced past; copy to keep. */
  inline?: Uint8Array;
}

export interface RecvWqe {
  qpn: number;
  token: number;
  sges: readonly WqeSge[];
}

export interface Cqe {
  cq: number;
  token: number;
  qpn: number;
  /** WcStatus. */
  status: number;
  /** WcOpcode. */
  opcode: number;
  byteLen: number;
  imm?: number;
  srcQpn?: number;
  /** Read back as a copy (it outlives the record in a work completion). */
  src?: Uint8Array;
}

// Offsets, sizes and flag bits as this module's own consts (from the generated accessors of
// src/wire/nic-spec.ts): V8 folds those into optimised code but loads an imported binding, or a
// property of the spec object, at every use (bench/wire-codec.bench.mjs).
const S_AH = W.SEND_WQE_AH_OFF;
const S_COMPARE_ADD = W.SEND_WQE_COMPARE_ADD_OFF;
const S_FLAGS = W.SEND_WQE_FLAGS_OFF;
const S_IMM = W.SEND_WQE_IMM_OFF;
const S_INLINE_LEN = W.SEND_WQE_INLINE_LEN_OFF;
const S_KIND = W.SEND_WQE_KIND_OFF;
const S_N_REMOTE = W.SEND_WQE_N_REMOTE_OFF;
const S_N_SGE = W.SEND_WQE_N_SGE_OFF;
const S_OPCODE = W.SEND_WQE_OPCODE_OFF;
const S_QPN = W.SEND_WQE_QPN_OFF;
const S_REMOTE_ADDR = W.SEND_WQE_REMOTE_ADDR_OFF;
const S_REMOTE_QPN = W.SEND_WQE_REMOTE_QPN_OFF;
const S_RKEY = W.SEND_WQE_RKEY_OFF;
const S_RSVD = W.SEND_WQE_RSVD_OFF;
const S_RSVD2 = W.SEND_WQE_RSVD2_OFF;
const S_SWAP = W.SEND_WQE_SWAP_OFF;
const S_TOKEN = W.SEND_WQE_TOKEN_OFF;
const R_KIND = W.RECV_WQE_KIND_OFF;
const R_N_SGE = W.RECV_WQE_N_SGE_OFF;
const R_QPN = W.RECV_WQE_QPN_OFF;
const R_RSVD = W.RECV_WQE_RSVD_OFF;
const R_RSVD2 = W.RECV_WQE_RSVD2_OFF;
const R_TOKEN = W.RECV_WQE_TOKEN_OFF;
const C_BYTE_LEN = W.CQE_BYTE_LEN_OFF;
const C_CQ = W.CQE_CQ_OFF;
const C_FLAGS = W.CQE_FLAGS_OFF;
const C_IMM = W.CQE_IMM_OFF;
const C_KIND = W.CQE_KIND_OFF;
const C_OPCODE = W.CQE_OPCODE_OFF;
const C_QPN = W.CQE_QPN_OFF;
const C_RSVD = W.CQE_RSVD_OFF;
const C_SRC_LEN = W.CQE_SRC_LEN_OFF;
const C_SRC_QPN = W.CQE_SRC_QPN_OFF;
const C_STATUS = W.CQE_STATUS_OFF;
const C_TOKEN = W.CQE_TOKEN_OFF;
const G_ADDR = W.WQE_SGE_ADDR_OFF;
const G_LENGTH = W.WQE_SGE_LENGTH_OFF;
const G_LKEY = W.WQE_SGE_LKEY_OFF;
const RG_ADDR = W.WQE_REMOTE_SGE_ADDR_OFF;
const RG_LENGTH = W.WQE_REMOTE_SGE_LENGTH_OFF;
const RG_RKEY = W.WQE_REMOTE_SGE_RKEY_OFF;
const SEND_SIZE = W.SEND_WQE_SIZE;
const RECV_SIZE = W.RECV_WQE_SIZE;
const CQE_SIZE = W.CQE_SIZE;
const SGE_BYTES = W.WQE_SGE_SIZE;
const F_SIGNALED = W.SEND_WQE_FLAGS_SIGNALED;
const F_IMM = W.SEND_WQE_FLAGS_HAS_IMM;
const F_REMOTE_LIST = W.SEND_WQE_FLAGS_REMOTE_LIST;
const F_INLINE = W.SEND_WQE_FLAGS_INLINE;
const F_SRD = W.SEND_WQE_FLAGS_SRD;
const F_REMOTE = W.SEND_WQE_FLAGS_HAS_REMOTE;
const F_ATOMIC = W.SEND_WQE_FLAGS_HAS_ATOMIC;
const CF_IMM = W.CQE_FLAGS_HAS_IMM;
const CF_SRC_QPN = W.CQE_FLAGS_HAS_SRC_QPN;
const CF_SRC = W.CQE_FLAGS_HAS_SRC;
const TWO32 = 4294967296;

// u64 fields hold JS safe integers (addresses): two u32 halves, no BigInt on the way.
function setU64(dv: DataView, at: number, v: number): void {
  dv.setUint32(at, v >>> 0, true);
  dv.setUint32(at + 4, Math.floor(v / TWO32) >>> 0, true);
}
function getU64(dv: DataView, at: number): number {
  return dv.getUint32(at, true) + dv.getUint32(at + 4, true) * TWO32;
}

function count(n: number, what: string): number {
  if (n > 0xffff) throw new SabreError(ErrorCode.LimitExceeded, `a WQE carries at most 65535 ${what}, got ${n}`);
  return n;
}

/** Body bytes of a send WQE record. */
export function sendWqeBytes(w: SendWqe): number {
  return SEND_SIZE + (w.sges.length + (w.remoteSges?.length ?? 0)) * SGE_BYTES + (w.inline?.length ?? 0);
}

/** Kind byte of the record at off (WQE_KIND_SEND, WQE_KIND_RECV, CQE_KIND …). */
export function recordKind(dv: DataView, off: number): number {
  return dv.getUint8(off);
}

/**
 * Reserve and fill one send WQE in the ring; false when the ring has no room (nothing written).
 * Throws ERR_LIMIT_EXCEEDED for a record the ring can never hold or more than 65535 SGEs.
 */
export function writeSendWqe(ring: RecordRing, w: SendWqe): boolean {
  const nSge = count(w.sges.length, 'SGEs');
  const nRemote = count(w.remoteSges?.length ?? 0, 'remote SGEs');
  const inl = w.inline?.length ?? 0;
  const off = ring.reserve(SEND_SIZE + (nSge + nRemote) * SGE_BYTES + inl);
  if (off < 0) return false;
  const dv = ring.dv;
  let flags = w.signaled ? F_SIGNALED : 0;
  if (w.imm !== undefined) flags |= F_IMM;
  if (w.remoteSges !== undefined) flags |= F_REMOTE_LIST;
  if (w.inline !== undefined) flags |= F_INLINE;
  if (w.ah !== undefined || w.remoteQpn !== undefined) flags |= F_SRD;
  if (w.remoteAddr !== undefined || w.rkey !== undefined) flags |= F_REMOTE;
  if (w.compareAdd !== undefined || w.swap !== undefined) flags |= F_ATOMIC;
  dv.setUint8(off + S_KIND, WQE_KIND_SEND);
  dv.setUint8(off + S_OPCODE, w.opcode);
  dv.setUint8(off + S_FLAGS, flags);
  dv.setUint8(off + S_RSVD, 0);
  dv.setUint16(off + S_N_SGE, nSge, true);
  dv.setUint16(off + S_N_REMOTE, nRemote, true);
  dv.setUint32(off + S_QPN, w.qpn, true);
  dv.setUint32(off + S_TOKEN, w.token, true);
  dv.setUint32(off + S_IMM, w.imm ?? 0, true);
  dv.setUint32(off + S_RKEY, w.rkey ?? 0, true);
  setU64(dv, off + S_REMOTE_ADDR, w.remoteAddr ?? 0);
  dv.setUint32(off + S_REMOTE_QPN, w.remoteQpn ?? 0, true);
  dv.setUint32(off + S_AH, w.ah ?? 0, true);
  dv.setBigUint64(off + S_COMPARE_ADD, w.compareAdd ?? 0n, true);
  dv.setBigUint64(off + S_SWAP, w.swap ?? 0n, true);
  dv.setUint32(off + S_INLINE_LEN, inl, true);
  dv.setUint32(off + S_RSVD2, 0, true);
  let at = off + SEND_SIZE;
  for (let i = 0; i < nSge; i++, at += SGE_BYTES) {
    const g = w.sges[i]!;
    setU64(dv, at + G_ADDR, g.addr);
    dv.setUint32(at + G_LENGTH, g.length, true);
    dv.setUint32(at + G_LKEY, g.lkey, true);
  }
  for (let i = 0; i < nRemote; i++, at += SGE_BYTES) {
    const g = w.remoteSges![i]!;
    setU64(dv, at + RG_ADDR, g.addr);
    dv.setUint32(at + RG_LENGTH, g.length, true);
    dv.setUint32(at + RG_RKEY, g.rkey, true);
  }
  if (inl > 0) ring.u8.set(w.inline!, at);
  return true;
}

function sgeInto(list: WqeSge[], i: number): WqeSge {
  return (list[i] ??= { addr: 0, length: 0, lkey: 0 });
}

/**
 * The send WQE at off. With `into`, refills that object (its SGE objects reused) and returns it;
 * fields whose flag is clear are set to undefined.
 */
export function readSendWqe(dv: DataView, off: number, into?: SendWqe): SendWqe {
  const flags = dv.getUint8(off + S_FLAGS);
  const nSge = dv.getUint16(off + S_N_SGE, true);
  const nRemote = dv.getUint16(off + S_N_REMOTE, true);
  const w: SendWqe = into ?? { qpn: 0, token: 0, opcode: 0, signaled: false, sges: [] };
  w.qpn = dv.getUint32(off + S_QPN, true);
  w.token = dv.getUint32(off + S_TOKEN, true);
  w.opcode = dv.getUint8(off + S_OPCODE);
  w.signaled = (flags & F_SIGNALED) !== 0;
  w.imm = flags & F_IMM ? dv.getUint32(off + S_IMM, true) : undefined;
  if (flags & F_REMOTE) {
    w.remoteAddr = getU64(dv, off + S_REMOTE_ADDR);
    w.rkey = dv.getUint32(off + S_RKEY, true);
  } else w.remoteAddr = w.rkey = undefined;
  if (flags & F_SRD) {
    w.remoteQpn = dv.getUint32(off + S_REMOTE_QPN, true);
    w.ah = dv.getUint32(off + S_AH, true);
  } else w.remoteQpn = w.ah = undefined;
  if (flags & F_ATOMIC) {
    w.compareAdd = dv.getBigUint64(off + S_COMPARE_ADD, true);
    w.swap = dv.getBigUint64(off + S_SWAP, true);
  } else w.compareAdd = w.swap = undefined;
  let at = off + SEND_SIZE;
  const sges = w.sges as WqeSge[];
  for (let i = 0; i < nSge; i++, at += SGE_BYTES) {
    const g = sgeInto(sges, i);
    g.addr = getU64(dv, at + G_ADDR);
    g.length = dv.getUint32(at + G_LENGTH, true);
    g.lkey = dv.getUint32(at + G_LKEY, true);
  }
  sges.length = nSge;
  if (flags & F_REMOTE_LIST) {
    const rs = (w.remoteSges ??= []) as WqeRemoteSge[];
    for (let i = 0; i < nRemote; i++, at += SGE_BYTES) {
      const g = (rs[i] ??= { addr: 0, length: 0, rkey: 0 });
      g.addr = getU64(dv, at + RG_ADDR);
      g.length = dv.getUint32(at + RG_LENGTH, true);
      g.rkey = dv.getUint32(at + RG_RKEY, true);
    }
    rs.length = nRemote;
  } else {
    w.remoteSges = undefined;
    at += nRemote * SGE_BYTES;
  }
  w.inline = flags & F_INLINE ? new Uint8Array(dv.buffer, dv.byteOffset + at, dv.getUint32(off + S_INLINE_LEN, true)) : undefined;
  return w;
}

/** Reserve and fill one receive WQE; false when the ring has no room (nothing written). */
export function writeRecvWqe(ring: RecordRing, w: RecvWqe): boolean {
  const nSge = count(w.sges.length, 'SGEs');
  const off = ring.reserve(RECV_SIZE + nSge * SGE_BYTES);
  if (off < 0) return false;
  const dv = ring.dv;
  dv.setUint8(off + R_KIND, WQE_KIND_RECV);
  dv.setUint8(off + R_RSVD, 0);
  dv.setUint16(off + R_N_SGE, nSge, true);
  dv.setUint32(off + R_QPN, w.qpn, true);
  dv.setUint32(off + R_TOKEN, w.token, true);
  dv.setUint32(off + R_RSVD2, 0, true);
  let at = off + RECV_SIZE;
  for (let i = 0; i < nSge; i++, at += SGE_BYTES) {
    const g = w.sges[i]!;
    setU64(dv, at + G_ADDR, g.addr);
    dv.setUint32(at + G_LENGTH, g.length, true);
    dv.setUint32(at + G_LKEY, g.lkey, true);
  }
  return true;
}

/** The receive WQE at off (refilling `into` when given). */
export function readRecvWqe(dv: DataView, off: number, into?: RecvWqe): RecvWqe {
  const w: RecvWqe = into ?? { qpn: 0, token: 0, sges: [] };
  const nSge = dv.getUint16(off + R_N_SGE, true);
  w.qpn = dv.getUint32(off + R_QPN, true);
  w.token = dv.getUint32(off + R_TOKEN, true);
  let at = off + RECV_SIZE;
  for (let i = 0; i < nSge; i++, at += SGE_BYTES) {
    const g = sgeInto(w.sges as WqeSge[], i);
    g.addr = getU64(dv, at + G_ADDR);
    g.length = dv.getUint32(at + G_LENGTH, true);
    g.lkey = dv.getUint32(at + G_LKEY, true);
  }
  (w.sges as WqeSge[]).length = nSge;
  return w;
}

/** Body bytes of `c` as a CQE record (what writeCqe reserves). */
export function cqeBodyLength(c: Cqe): number {
  return CQE_SIZE + (c.src?.length ?? 0);
}

/** Reserve and fill one CQE; false when the ring has no room (nothing written). */
export function writeCqe(ring: RecordRing, c: Cqe): boolean {
  const srcLen = c.src?.length ?? 0;
  if (srcLen > 0xffff) throw new SabreError(ErrorCode.LimitExceeded, `a CQE source address is at most 65535 bytes, got ${srcLen}`);
  const off = ring.reserve(CQE_SIZE + srcLen);
  if (off < 0) return false;
  const dv = ring.dv;
  let flags = 0;
  if (c.imm !== undefined) flags |= CF_IMM;
  if (c.srcQpn !== undefined) flags |= CF_SRC_QPN;
  if (c.src !== undefined) flags |= CF_SRC;
  dv.setUint8(off + C_KIND, CQE_KIND);
  dv.setUint8(off + C_STATUS, c.status);
  dv.setUint8(off + C_OPCODE, c.opcode);
  dv.setUint8(off + C_FLAGS, flags);
  dv.setUint32(off + C_CQ, c.cq, true);
  dv.setUint32(off + C_TOKEN, c.token, true);
  dv.setUint32(off + C_QPN, c.qpn, true);
  dv.setUint32(off + C_BYTE_LEN, c.byteLen, true);
  dv.setUint32(off + C_IMM, c.imm ?? 0, true);
  dv.setUint32(off + C_SRC_QPN, c.srcQpn ?? 0, true);
  dv.setUint16(off + C_SRC_LEN, srcLen, true);
  dv.setUint16(off + C_RSVD, 0, true);
  if (srcLen > 0) ring.u8.set(c.src!, off + CQE_SIZE);
  return true;
}

/** The CQE at off (refilling `into` when given; fields whose flag is clear become undefined). */
export function readCqe(dv: DataView, off: number, into?: Cqe): Cqe {
  const flags = dv.getUint8(off + C_FLAGS);
  const c: Cqe = into ?? { cq: 0, token: 0, qpn: 0, status: 0, opcode: 0, byteLen: 0 };
  c.cq = dv.getUint32(off + C_CQ, true);
  c.token = dv.getUint32(off + C_TOKEN, true);
  c.qpn = dv.getUint32(off + C_QPN, true);
  c.status = dv.getUint8(off + C_STATUS);
  c.opcode = dv.getUint8(off + C_OPCODE);
  c.byteLen = dv.getUint32(off + C_BYTE_LEN, true);
  c.imm = flags & CF_IMM ? dv.getUint32(off + C_IMM, true) : undefined;
  c.srcQpn = flags & CF_SRC_QPN ? dv.getUint32(off + C_SRC_QPN, true) : undefined;
  if (flags & CF_SRC) {
    // slice() copies into a fresh (unshared) ArrayBuffer.
    c.src = new Uint8Array(dv.buffer, dv.byteOffset + off + CQE_SIZE, dv.getUint16(off + C_SRC_LEN, true)).slice();
  } else c.src = undefined;
  return c;
}

/**
 * Whether the send WQE at off, of `bodyLen` bytes (the ring's record length), holds what its
 * counts claim: the NIC thread reads records a SharedArrayBuffer exposes to the application's
 * code, so the counts are checked before anything is read past the fixed part.
 */
export function sendWqeFits(dv: DataView, off: number, bodyLen: number): boolean {
  if (bodyLen < SEND_SIZE) return false;
  const flags = dv.getUint8(off + S_FLAGS);
  const lists = (dv.getUint16(off + S_N_SGE, true) + dv.getUint16(off + S_N_REMOTE, true)) * SGE_BYTES;
  const inl = flags & F_INLINE ? dv.getUint32(off + S_INLINE_LEN, true) : 0;
  return SEND_SIZE + lists + inl <= bodyLen;
}

/** Whether the receive WQE at off, of `bodyLen` bytes, holds the SGEs it claims (see sendWqeFits). */
export function recvWqeFits(dv: DataView, off: number, bodyLen: number): boolean {
  return bodyLen >= RECV_SIZE && RECV_SIZE + dv.getUint16(off + R_N_SGE, true) * SGE_BYTES <= bodyLen;
}
