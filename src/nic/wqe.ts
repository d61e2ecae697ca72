// Codecs of the NIC's ring records (layouts in src/wire/nic-spec.ts): send and receive WQEs
// (application → NIC thread, one device-wide RecordRing, kinds interleaved in posting order)
// and CQEs (NIC thread → application, one device-wide RecordRing). Writers reserve one record
// and fill it; they do not commit: the poster commits after its batch and rings the doorbell
// (src/nic/ring.ts). Readers take a DataView and the offset peek() gave; they can refill an
// object the caller keeps (`into`), so a loop over a ring allocates nothing per record but
// what the record itself carries (an atomic's bigints, a CQE's source address).
import { ErrorCode, SabreError } from '../core/errors.js';
import { CQE, CQE_KIND, RECV_WQE, SEND_WQE, WQE_KIND_RECV, WQE_KIND_SEND, WQE_REMOTE_SGE, WQE_SGE } from '../wire/nic-spec.js';
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

const S = SEND_WQE.fields;
const R = RECV_WQE.fields;
const C = CQE.fields;
const G = WQE_SGE.fields;
const RG = WQE_REMOTE_SGE.fields;
const SF = S.flags.bits!;
const CF = C.flags.bits!;
const F_SIGNALED = SF.Signaled!.mask;
const F_IMM = SF.HasImm!.mask;
const F_REMOTE_LIST = SF.RemoteList!.mask;
const F_INLINE = SF.Inline!.mask;
const F_SRD = SF.Srd!.mask;
const F_REMOTE = SF.HasRemote!.mask;
const F_ATOMIC = SF.HasAtomic!.mask;
const C_IMM = CF.HasImm!.mask;
const C_SRC_QPN = CF.HasSrcQpn!.mask;
const C_SRC = CF.HasSrc!.mask;
const SGE_BYTES = WQE_SGE.size;
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
  return SEND_WQE.size + (w.sges.length + (w.remoteSges?.length ?? 0)) * SGE_BYTES + (w.inline?.length ?? 0);
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
  const off = ring.reserve(SEND_WQE.size + (nSge + nRemote) * SGE_BYTES + inl);
  if (off < 0) return false;
  const dv = ring.dv;
  let flags = w.signaled ? F_SIGNALED : 0;
  if (w.imm !== undefined) flags |= F_IMM;
  if (w.remoteSges !== undefined) flags |= F_REMOTE_LIST;
  if (w.inline !== undefined) flags |= F_INLINE;
  if (w.ah !== undefined || w.remoteQpn !== undefined) flags |= F_SRD;
  if (w.remoteAddr !== undefined || w.rkey !== undefined) flags |= F_REMOTE;
  if (w.compareAdd !== undefined || w.swap !== undefined) flags |= F_ATOMIC;
  dv.setUint8(off + S.kind.offset, WQE_KIND_SEND);
  dv.setUint8(off + S.opcode.offset, w.opcode);
  dv.setUint8(off + S.flags.offset, flags);
  dv.setUint8(off + S.rsvd.offset, 0);
  dv.setUint16(off + S.nSge.offset, nSge, true);
  dv.setUint16(off + S.nRemote.offset, nRemote, true);
  dv.setUint32(off + S.qpn.offset, w.qpn, true);
  dv.setUint32(off + S.token.offset, w.token, true);
  dv.setUint32(off + S.imm.offset, w.imm ?? 0, true);
  dv.setUint32(off + S.rkey.offset, w.rkey ?? 0, true);
  setU64(dv, off + S.remoteAddr.offset, w.remoteAddr ?? 0);
  dv.setUint32(off + S.remoteQpn.offset, w.remoteQpn ?? 0, true);
  dv.setUint32(off + S.ah.offset, w.ah ?? 0, true);
  dv.setBigUint64(off + S.compareAdd.offset, w.compareAdd ?? 0n, true);
  dv.setBigUint64(off + S.swap.offset, w.swap ?? 0n, true);
  dv.setUint32(off + S.inlineLen.offset, inl, true);
  dv.setUint32(off + S.rsvd2.offset, 0, true);
  let at = off + SEND_WQE.size;
  for (let i = 0; i < nSge; i++, at += SGE_BYTES) {
    const g = w.sges[i]!;
    setU64(dv, at + G.addr.offset, g.addr);
    dv.setUint32(at + G.length.offset, g.length, true);
    dv.setUint32(at + G.lkey.offset, g.lkey, true);
  }
  for (let i = 0; i < nRemote; i++, at += SGE_BYTES) {
    const g = w.remoteSges![i]!;
    setU64(dv, at + RG.addr.offset, g.addr);
    dv.setUint32(at + RG.length.offset, g.length, true);
    dv.setUint32(at + RG.rkey.offset, g.rkey, true);
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
  const flags = dv.getUint8(off + S.flags.offset);
  const nSge = dv.getUint16(off + S.nSge.offset, true);
  const nRemote = dv.getUint16(off + S.nRemote.offset, true);
  const w: SendWqe = into ?? { qpn: 0, token: 0, opcode: 0, signaled: false, sges: [] };
  w.qpn = dv.getUint32(off + S.qpn.offset, true);
  w.token = dv.getUint32(off + S.token.offset, true);
  w.opcode = dv.getUint8(off + S.opcode.offset);
  w.signaled = (flags & F_SIGNALED) !== 0;
  w.imm = flags & F_IMM ? dv.getUint32(off + S.imm.offset, true) : undefined;
  if (flags & F_REMOTE) {
    w.remoteAddr = getU64(dv, off + S.remoteAddr.offset);
    w.rkey = dv.getUint32(off + S.rkey.offset, true);
  } else w.remoteAddr = w.rkey = undefined;
  if (flags & F_SRD) {
    w.remoteQpn = dv.getUint32(off + S.remoteQpn.offset, true);
    w.ah = dv.getUint32(off + S.ah.offset, true);
  } else w.remoteQpn = w.ah = undefined;
  if (flags & F_ATOMIC) {
    w.compareAdd = dv.getBigUint64(off + S.compareAdd.offset, true);
    w.swap = dv.getBigUint64(off + S.swap.offset, true);
  } else w.compareAdd = w.swap = undefined;
  let at = off + SEND_WQE.size;
  const sges = w.sges as WqeSge[];
  for (let i = 0; i < nSge; i++, at += SGE_BYTES) {
    const g = sgeInto(sges, i);
    g.addr = getU64(dv, at + G.addr.offset);
    g.length = dv.getUint32(at + G.length.offset, true);
    g.lkey = dv.getUint32(at + G.lkey.offset, true);
  }
  sges.length = nSge;
  if (flags & F_REMOTE_LIST) {
    const rs = (w.remoteSges ??= []) as WqeRemoteSge[];
    for (let i = 0; i < nRemote; i++, at += SGE_BYTES) {
      const g = (rs[i] ??= { addr: 0, length: 0, rkey: 0 });
      g.addr = getU64(dv, at + RG.addr.offset);
      g.length = dv.getUint32(at + RG.length.offset, true);
      g.rkey = dv.getUint32(at + RG.rkey.offset, true);
    }
    rs.length = nRemote;
  } else {
    w.remoteSges = undefined;
    at += nRemote * SGE_BYTES;
  }
  w.inline = flags & F_INLINE ? new Uint8Array(dv.buffer, dv.byteOffset + at, dv.getUint32(off + S.inlineLen.offset, true)) : undefined;
  return w;
}

/** Reserve and fill one receive WQE; false when the ring has no room (nothing written). */
export function writeRecvWqe(ring: RecordRing, w: RecvWqe): boolean {
  const nSge = count(w.sges.length, 'SGEs');
  const off = ring.reserve(RECV_WQE.size + nSge * SGE_BYTES);
  if (off < 0) return false;
  const dv = ring.dv;
  dv.setUint8(off + R.kind.offset, WQE_KIND_RECV);
  dv.setUint8(off + R.rsvd.offset, 0);
  dv.setUint16(off + R.nSge.offset, nSge, true);
  dv.setUint32(off + R.qpn.offset, w.qpn, true);
  dv.setUint32(off + R.token.offset, w.token, true);
  dv.setUint32(off + R.rsvd2.offset, 0, true);
  let at = off + RECV_WQE.size;
  for (let i = 0; i < nSge; i++, at += SGE_BYTES) {
    const g = w.sges[i]!;
    setU64(dv, at + G.addr.offset, g.addr);
    dv.setUint32(at + G.length.offset, g.length, true);
    dv.setUint32(at + G.lkey.offset, g.lkey, true);
  }
  return true;
}

/** The receive WQE at off (refilling `into` when given). */
export function readRecvWqe(dv: DataView, off: number, into?: RecvWqe): RecvWqe {
  const w: RecvWqe = into ?? { qpn: 0, token: 0, sges: [] };
  const nSge = dv.getUint16(off + R.nSge.offset, true);
  w.qpn = dv.getUint32(off + R.qpn.offset, true);
  w.token = dv.getUint32(off + R.token.offset, true);
  let at = off + RECV_WQE.size;
  for (let i = 0; i < nSge; i++, at += SGE_BYTES) {
    const g = sgeInto(w.sges as WqeSge[], i);
    g.addr = getU64(dv, at + G.addr.offset);
    g.length = dv.getUint32(at + G.length.offset, true);
    g.lkey = dv.getUint32(at + G.lkey.offset, true);
  }
  (w.sges as WqeSge[]).length = nSge;
  return w;
}

/** Reserve and fill one CQE; false when the ring has no room (nothing written). */
export function writeCqe(ring: RecordRing, c: Cqe): boolean {
  const srcLen = c.src?.length ?? 0;
  if (srcLen > 0xffff) throw new SabreError(ErrorCode.LimitExceeded, `a CQE source address is at most 65535 bytes, got ${srcLen}`);
  const off = ring.reserve(CQE.size + srcLen);
  if (off < 0) return false;
  const dv = ring.dv;
  let flags = 0;
  if (c.imm !== undefined) flags |= C_IMM;
  if (c.srcQpn !== undefined) flags |= C_SRC_QPN;
  if (c.src !== undefined) flags |= C_SRC;
  dv.setUint8(off + C.kind.offset, CQE_KIND);
  dv.setUint8(off + C.status.offset, c.status);
  dv.setUint8(off + C.opcode.offset, c.opcode);
  dv.setUint8(off + C.flags.offset, flags);
  dv.setUint32(off + C.cq.offset, c.cq, true);
  dv.setUint32(off + C.token.offset, c.token, true);
  dv.setUint32(off + C.qpn.offset, c.qpn, true);
  dv.setUint32(off + C.byteLen.offset, c.byteLen, true);
  dv.setUint32(off + C.imm.offset, c.imm ?? 0, true);
  dv.setUint32(off + C.srcQpn.offset, c.srcQpn ?? 0, true);
  dv.setUint16(off + C.srcLen.offset, srcLen, true);
  dv.setUint16(off + C.rsvd.offset, 0, true);
  if (srcLen > 0) ring.u8.set(c.src!, off + CQE.size);
  return true;
}

/** The CQE at off (refilling `into` when given; fields whose flag is clear become undefined). */
export function readCqe(dv: DataView, off: number, into?: Cqe): Cqe {
  const flags = dv.getUint8(off + C.flags.offset);
  const c: Cqe = into ?? { cq: 0, token: 0, qpn: 0, status: 0, opcode: 0, byteLen: 0 };
  c.cq = dv.getUint32(off + C.cq.offset, true);
  c.token = dv.getUint32(off + C.token.offset, true);
  c.qpn = dv.getUint32(off + C.qpn.offset, true);
  c.status = dv.getUint8(off + C.status.offset);
  c.opcode = dv.getUint8(off + C.opcode.offset);
  c.byteLen = dv.getUint32(off + C.byteLen.offset, true);
  c.imm = flags & C_IMM ? dv.getUint32(off + C.imm.offset, true) : undefined;
  c.srcQpn = flags & C_SRC_QPN ? dv.getUint32(off + C.srcQpn.offset, true) : undefined;
  if (flags & C_SRC) {
    // slice() copies into a fresh (unshared) ArrayBuffer.
    c.src = new Uint8Array(dv.buffer, dv.byteOffset + off + CQE.size, dv.getUint16(off + C.srcLen.offset, true)).slice();
  } else c.src = undefined;
  return c;
}
