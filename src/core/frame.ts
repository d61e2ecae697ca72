// What a link carries between two engines: frames. A frame is either a DDP segment (the RFC
// 5041/5040 bytes, identical on every transport) with a small envelope, or one of three tiny
// engine control frames. Links move frames reliably (each delivered exactly once; inproc by
// construction, udp with its own reliability underneath, tcp by the stream) but in no promised
// order: the engine restores order itself from the envelope.
//
// Envelope fields (what ordering and completion need, beyond the DDP header):
//   srcQpn/dstQpn  the QPs at both ends (DDP has no QP numbers: on TCP the connection names them)
//   ssn            message sequence number of this QP direction (1, 2, …), shared by every
//                  RDMAP message the QP sends — requests and responses alike. The receiver
//                  completes messages strictly in ssn order (RC ordering over a reordering link).
//   msgLen         payload bytes of the whole RDMAP message the segment belongs to (-1: not known
//                  yet; a byte stream learns it from the segment with the DDP L flag)
//   off            this segment's payload offset in the message (duplicate detection)
//   ack            optional piggy-backed cumulative acknowledgement (see AckFrame)
//   epoch          srd only: the flow's epoch (src/rdmap/srd-epoch.ts); absent or 0 on rc
//
// Control frames:
//   ack    "every message with ssn <= ack from you has been completed here" (cumulative). A
//          Write/Send/atomic completes Success at the requester only once acked: placed and visible.
//   rnr    "message ssn found no posted receive": the requester retries it after its RNR timer.
//   hello  rc connection establishment on links without connections of their own (udp, inproc).
import type { DeviceAddress } from './address.js';

/** A DDP tagged header (RFC 5041 §5.2) as decoded: STag and TO of the first payload byte. */
export interface TaggedHdr { tagged: true; last: boolean; opcode: number; stag: number; to: number }
/** A DDP untagged header (RFC 5041 §5.3) as decoded. */
export interface UntaggedHdr {
  tagged: false; last: boolean; opcode: number;
  /** RsvdULP[8:39]: Invalidate STag (Send*Inv) or the immediate (SendWithImm); 0 otherwise. */
  ulp: number;
  qn: number; msn: number; mo: number;
}
export type DdpHdr = TaggedHdr | UntaggedHdr;

export interface Envelope {
  srcQpn: number;
  dstQpn: number;
  ssn: number;
  msgLen: number;
  off: number;
  ack?: number;
  /** srd: the flow's epoch (srd-epoch.ts). */
  epoch?: number;
}

export interface SegFrame {
  kind: 'seg';
  env: Envelope;
  /** DDP header + RDMAP header/control payload. */
  hdr: Uint8Array;
  /** Data payload following hdr on the wire, as gathered views (may be empty). */
  payload: Uint8Array[];
  /**
   * The DDP header of `hdr`, decoded, when whoever made the frame already had it (the sender's
   * segmenter, a link that had to read it to frame the stream): the engine then does not
   * decode it again. Absent: the engine decodes `hdr`.
   */
  ddp?: DdpHdr;
}

/**
 * The QPN both fields of a device-wide ack name (ssn 0): "this device is alive and not ready",
 * for every flow between the two devices' ends that carry it (src/rdmap/not-ready.ts). Never a
 * QP's number: user QPNs lie below 2^24 (src/verbs/qpn.ts), and CM_QPN is the one above this.
 */
export const DEVICE_QPN = 0xffff_fffe;

export interface AckFrame {
  kind: 'ack';
  srcQpn: number;
  dstQpn: number;
  ssn: number;
  /** srd: the flow's epoch (srd-epoch.ts). */
  epoch?: number;
}

export interface RnrFrame {
  kind: 'rnr';
  srcQpn: number;
  dstQpn: number;
  ssn: number;
  /** srd: the flow's epoch (srd-epoch.ts). */
  epoch?: number;
}

export interface HelloFrame {
  kind: 'hello';
  srcQpn: number;
  dstQpn: number;
  reply: boolean;
}

export type Frame = SegFrame | AckFrame | RnrFrame | HelloFrame;

/** A received frame with the sender's device address as the link observed it. */
export interface Inbound {
  from: DeviceAddress;
  frame: Frame;
}
