// The boundary between the RDMAP/DDP engine and whatever carries its segments.
//
// A transport moves *frames* between devices, reliably (each frame delivered exactly once;
// inproc is reliable by construction, UDP adds its own reliability underneath) but in no
// promised order: the engine restores order itself from the envelope. A frame is either a
// DDP segment (the RFC 5041/5040 bytes, identical on every transport) with a small envelope,
// or one of three tiny engine control frames.
//
// Envelope fields (what ordering and completion need, beyond the DDP header):
//   srcQpn/dstQpn  the QPs at both ends (DDP has no QP numbers: on TCP the connection names them)
//   ssn            message sequence number of this QP direction (1, 2, …), shared by every
//                  RDMAP message the QP sends — requests and responses alike. The receiver
//                  completes messages strictly in ssn order (RC ordering over a reordering link).
//   msgLen         payload bytes of the whole RDMAP message the segment belongs to
//   off            this segment's payload offset in the message (duplicate detection)
//   ack            optional piggy-backed cumulative acknowledgement (see AckFrame)
//
// Control frames:
//   ack    "every message with ssn <= ack from you has been completed here" (cumulative). A
//          Write/Send/atomic completes Success at the requester only once acked: placed and visible.
//   rnr    "message ssn found no posted receive": the requester retries it after its RNR timer.
//   hello  connection establishment for rc (both sides call connect; see QueuePair.connect).

/** A device address: a plain JSON-safe object. inproc: { transport: 'inproc', id }. */
export interface DeviceAddress {
  readonly transport: string;
  readonly [k: string]: unknown;
}

export interface Envelope {
  srcQpn: number;
  dstQpn: number;
  ssn: number;
  msgLen: number;
  off: number;
  ack?: number;
}

export interface SegFrame {
  kind: 'seg';
  env: Envelope;
  /** DDP header + RDMAP header/control payload. */
  hdr: Uint8Array;
  /** Data payload following hdr on the wire, as gathered views (may be empty). */
  payload: Uint8Array[];
}

export interface AckFrame {
  kind: 'ack';
  srcQpn: number;
  dstQpn: number;
  ssn: number;
}

export interface RnrFrame {
  kind: 'rnr';
  srcQpn: number;
  dstQpn: number;
  ssn: number;
}

export interface HelloFrame {
  kind: 'hello';
  srcQpn: number;
  dstQpn: number;
  reply: boolean;
}

export type Frame = SegFrame | AckFrame | RnrFrame | HelloFrame;

/** Received frames, with the sender's device address (srd flows and rc checks use it). */
export interface Inbound {
  from: DeviceAddress;
  frame: Frame;
}

export interface Transport {
  readonly address: DeviceAddress;
  /** Largest datagram / framed PDU this transport emits, where it has one (udp: the path MTU; tcp: the MULPDU). */
  readonly mtu?: number;
  /**
   * Hand frames to the link. The payload views must stay readable until the call returns or,
   * for asynchronous links, until delivery. The array itself passes to the transport: the
   * caller builds a fresh one per call and does not touch it again.
   */
  send(to: DeviceAddress, frames: Frame[]): void;
  /** Set once by the device: called with batches of frames (one placement batch each). */
  onReceive(handler: (batch: Inbound[]) => void): void;
  /** Whether `to` can be reached now (inproc: registered). */
  reachable(to: DeviceAddress): boolean;
  /**
   * Links that can lose a peer (UDP: retries exhausted, peer restarted and forgot our frames)
   * report it here, once per failure; the device fails the work that depended on that peer
   * with RetryExcErr. inproc never loses a frame and does not implement it.
   */
  onLinkFailure?(handler: (to: DeviceAddress) => void): void;
  /** Link counters, merged into Device.stats() as `link`. */
  stats?(): Record<string, number>;
  /** May be asynchronous (sockets): the device awaits it. */
  close(): void | Promise<void>;
}

/** Stable key for an address (map keys, flow ids). */
export function addressKey(a: DeviceAddress): string {
  const keys = Object.keys(a).sort();
  return keys.map((k) => `${k}=${String(a[k])}`).join('&');
}
