// Cutting RDMAP messages into DDP segments (RFC 5041): data messages become segments of at
// most `mss` payload bytes whose payload is a list of views into the source memory (gathered
// by the link, never copied here); control messages are one untagged segment whose RDMAP
// payload travels in the header buffer.
import type { Envelope, SegFrame } from '../core/frame.js';
import { encodeDdp, TAGGED_HDR_LEN, UNTAGGED_HDR_LEN } from '../wire/rdmap.js';

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
  let pi = 0;
  let po = 0;
  let off = 0;
  do {
    const len = Math.min(m.mss, m.total - off);
    const payload: Uint8Array[] = [];
    let need = len;
    while (need > 0) {
      const p = m.parts[pi]!;
      const take = Math.min(need, p.length - po);
      payload.push(po === 0 && take === p.length ? p : p.subarray(po, po + take));
      po += take;
      need -= take;
      if (po === p.length) {
        pi++;
        po = 0;
      }
    }
    const last = off + len === m.total;
    let hdr: Uint8Array;
    if (m.tagged) {
      hdr = new Uint8Array(TAGGED_HDR_LEN);
      encodeDdp({ tagged: true, last, opcode: m.opcode, stag: m.stag!, to: m.to! + off }, hdr, 0);
    } else {
      hdr = new Uint8Array(UNTAGGED_HDR_LEN);
      encodeDdp({ tagged: false, last, opcode: m.opcode, ulp: m.ulp ?? 0, qn: m.qn!, msn: m.msn!, mo: off }, hdr, 0);
    }
    const env: Envelope = { srcQpn: m.srcQpn, dstQpn: m.dstQpn, ssn: m.ssn, msgLen: m.total, off };
    out.push({ kind: 'seg', env, hdr, payload });
    off += len;
  } while (off < m.total);
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

/** A one-segment untagged control message; its RDMAP payload is carried in hdr. */
export function ctlFrame(m: CtlMsg): SegFrame {
  const hdr = new Uint8Array(UNTAGGED_HDR_LEN + m.bodyLen);
  encodeDdp({ tagged: false, last: true, opcode: m.opcode, ulp: m.ulp ?? 0, qn: m.qn, msn: m.msn, mo: 0 }, hdr, 0);
  const n = m.body(hdr, UNTAGGED_HDR_LEN);
  const env: Envelope = { srcQpn: m.srcQpn, dstQpn: m.dstQpn, ssn: m.ssn, msgLen: n, off: 0 };
  if (m.ack !== undefined) env.ack = m.ack;
  return { kind: 'seg', env, hdr: n === m.bodyLen ? hdr : hdr.subarray(0, UNTAGGED_HDR_LEN + n), payload: [] };
}
