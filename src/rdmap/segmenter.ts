// Cutting RDMAP messages into DDP segments (RFC 5041): data messages become segments of at
// most `mss` payload bytes whose payload is a list of views into the source memory (gathered
// by the link, never copied here); control messages are one untagged segment whose RDMAP
// payload travels in the header buffer. Each frame carries its header decoded (`ddp`) as well,
// so a receiver handed the frame itself (inproc) does not decode it again.
import type { DdpHdr, Envelope, SegFrame } from '../core/frame.js';
import { ViewCursor } from '../core/gather.js';
import { encodeDdp, encodeImmediateData, Qn, RdmapOpcode, TAGGED_HDR_LEN, UNTAGGED_HDR_LEN } from '../wire/rdmap.js';

/** Immediate Data's RDMAP payload: imm and the write's length, 4 bytes each (RFC 7306 §4.2). */
const IMMEDIATE_DATA_LEN = 8;

export interface DataMsg {
  srcQpn: number;
  dstQpn: number;
  ssn: number;
  opcode: number;
  /** Tagged: sink STag and TO of the first byte. */
  tagged: boolean;
  stag?: number;
  to?: number;
  /** Untagged: QN, MSN, RsvdULP (imm for SendWithImm). */
  qn?: number;
  msn?: number;
  ulp?: number;
  parts: Uint8Array[];
  total: number;
  mss: number;
}

export function dataFrames(m: DataMsg, out: SegFrame[]): void {
  // A message that fits one segment (every small message) carries `parts` itself as its
  // payload: no cursor, no second list, no views cut from views — a few objects fewer per
  // message on the small-message path. The frame takes over `parts`.
  if (m.total <= m.mss) {
    out.push(dataFrame(m));
    return;
  }
  const cur = new ViewCursor(m.parts);
  let off = 0;
  do {
    const len = Math.min(m.mss, m.total - off);
    const payload: Uint8Array[] = [];
    cur.takeViews(len, payload);
    out.push(segFrame(m, off, len, payload));
    off += len;
  } while (off < m.total);
}

/** The one frame of a message that fits one segment (m.total <= m.mss); it takes over m.parts. */
export function dataFrame(m: DataMsg): SegFrame {
  return segFrame(m, 0, m.total, m.parts);
}

/** The segment of `m` at payload offset `off`, `len` bytes, carrying `payload`. */
function segFrame(m: DataMsg, off: number, len: number, payload: Uint8Array[]): SegFrame {
  const last = off + len === m.total;
  let hdr: Uint8Array;
  let ddp: DdpHdr;
  if (m.tagged) {
    hdr = new Uint8Array(TAGGED_HDR_LEN);
    ddp = { tagged: true, last, opcode: m.opcode, stag: m.stag!, to: m.to! + off };
  } else {
    hdr = new Uint8Array(UNTAGGED_HDR_LEN);
    ddp = { tagged: false, last, opcode: m.opcode, ulp: m.ulp ?? 0, qn: m.qn!, msn: m.msn!, mo: off };
  }
  encodeDdp(ddp, hdr, 0);
  const env: Envelope = { srcQpn: m.srcQpn, dstQpn: m.dstQpn, ssn: m.ssn, msgLen: m.total, off };
  return { kind: 'seg', env, hdr, payload, ddp };
}

export interface CtlMsg {
  srcQpn: number;
  dstQpn: number;
  ssn: number;
  opcode: number;
  qn: number;
  msn: number;
  ulp?: number;
  bodyLen: number;
  body: (buf: Uint8Array, off: number) => number;
  ack?: number;
}

/**
 * A one-segment untagged control message with room for `bodyLen` bytes of RDMAP payload after
 * its DDP header (written by the caller at UNTAGGED_HDR_LEN); msgLen says bodyLen.
 */
function ctlHead(srcQpn: number, dstQpn: number, ssn: number, opcode: number, qn: number, msn: number, ulp: number, bodyLen: number): SegFrame {
  const hdr = new Uint8Array(UNTAGGED_HDR_LEN + bodyLen);
  const ddp: DdpHdr = { tagged: false, last: true, opcode, ulp, qn, msn, mo: 0 };
  encodeDdp(ddp, hdr, 0);
  const env: Envelope = { srcQpn, dstQpn, ssn, msgLen: bodyLen, off: 0 };
  // A fresh empty payload list, not a shared frozen one: a frozen array takes every for-of over
  // payloads (arrival, the links) off V8's fast path, an iterator result per element.
  return { kind: 'seg', env, hdr, payload: [], ddp };
}

/** A one-segment untagged control message; its RDMAP payload is carried in hdr. */
export function ctlFrame(m: CtlMsg): SegFrame {
  const f = ctlHead(m.srcQpn, m.dstQpn, m.ssn, m.opcode, m.qn, m.msn, m.ulp ?? 0, m.bodyLen);
  const n = m.body(f.hdr, UNTAGGED_HDR_LEN);
  if (m.ack !== undefined) f.env.ack = m.ack;
  if (n !== m.bodyLen) {
    f.env.msgLen = n;
    f.hdr = f.hdr.subarray(0, UNTAGGED_HDR_LEN + n);
  }
  return f;
}

/**
 * RFC 7306 Immediate Data (after an RdmaWriteWithImm's write): ctlFrame without a CtlMsg and
 * a body closure per message, on the small-message path.
 */
export function immediateFrame(srcQpn: number, dstQpn: number, ssn: number, msn: number, imm: number, len: number): SegFrame {
  const f = ctlHead(srcQpn, dstQpn, ssn, RdmapOpcode.ImmediateData, Qn.Send, msn, 0, IMMEDIATE_DATA_LEN);
  encodeImmediateData({ imm, len }, f.hdr, UNTAGGED_HDR_LEN);
  return f;
}
