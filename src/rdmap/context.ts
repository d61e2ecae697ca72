// Per-QP and per-flow state of the engine. A flow is one direction pair between this QP and
// one remote QP: rc has exactly one, srd one per (peer device, remote qpn) it talks to.
import { Deque } from './deque.js';
import type { DeviceAddress } from '../core/address.js';
import type { Frame } from '../core/frame.js';
import type { QpStateValue, WcStatusValue } from '../core/enums.js';
import type { SendWr } from '../verbs/types.js';
import type { WorkCompletion, WrId } from '../core/work.js';
import type { MrRecord } from './memory.js';
import type { TermCode } from '../wire/terminate.js';
import type { Offsets } from './offsets.js';

/** Where completions go (a CompletionQueue). push returns false when the queue overran. */
export interface CompletionSink {
  push(wc: WorkCompletion): boolean;
}

/** A checked local segment. */
export interface Piece {
  rec: MrRecord;
  addr: number;
  len: number;
}

export const WrKind = { Send: 0, Write: 1, Read: 2, Atomic: 3 } as const;
export type WrKindValue = (typeof WrKind)[keyof typeof WrKind];

export interface WrCtx {
  wr: SendWr;
  kind: WrKindValue;
  signaled: boolean;
  pieces: Piece[];
  total: number;
  /** Data copied at post time (maxInline); replaces pieces when set. */
  inline?: Uint8Array;
  /** srd: the flow named by ah/remoteQpn (rc: the QP's flow). */
  flow?: Flow;
  /** Remote ranges touched (rc fence). */
  ranges?: { addr: number; len: number }[];
  /** Messages still awaiting an ack (Send/Write kinds). */
  pending: number;
  done: boolean;
  status: WcStatusValue;
  byteLen: number;
  rnrCount: number;
  /** Reads: the sinks the responder may write (ReadResponse targets are checked against them). */
  sinks?: { stag: number; to: number; len: number }[];
  /** Reads to a standard iWARP peer: RFC 5040 Read Requests whose last Read Response has not arrived yet. */
  readParts?: number;
}

export interface RecvCtx {
  wrId: WrId;
  pieces: Piece[];
  total: number;
  /** srd: a message claimed it. */
  claimed: boolean;
}

/** A message sent and not yet acknowledged. */
export interface OutMsg {
  wr?: WrCtx;
  /** Kept for messages that consume a receive: resent after an RNR NAK. */
  frames?: Frame[];
  rnrWait: boolean;
}

/** A message being received. */
export interface InMsg {
  ssn: number;
  msgLen: number;
  got: number;
  offs: Offsets;
  seen: boolean;
  opcode: number;
  /** untagged header fields of the first segment seen. */
  msn: number;
  ulp: number;
  /** Control payload (ReadRequest, atomics, immediate data, terminate …). */
  ctl?: Uint8Array;
  /** Copy of a DDP header of the message (for the Terminate's header copy). */
  hdr?: Uint8Array;
  hdrLen: number;
  segLen: number;
  fail?: { term: TermCode; local?: WcStatusValue; wr?: WrCtx };
  /** A copy arrived that needs a receive that is not there: NAK RNR when this message is next. */
  rnrArmed: boolean;
  recv?: RecvCtx;
  /** Terminate: the sender's cumulative ack — the failed message of ours is ackHint + 1. */
  ackHint?: number;
}

export class Flow {
  readonly peer: DeviceAddress;
  readonly peerKey: string;
  readonly rqpn: number;
  // outgoing direction
  nextSsn = 1;
  acked = 0;
  readonly inflight = new Map<number, OutMsg>();
  sendMsn = 1;
  reqMsn = 1;
  respMsn = 1;
  termMsn = 1;
  readonly reads = new Map<number, WrCtx>();
  readonly atomics = new Map<number, WrCtx>();
  // incoming direction
  expected = 1;
  readonly pending = new Map<number, InMsg>();
  needAck = false;
  // requester watchdog (engine.#arm): when the peer's engine was last heard from
  lastHeard = 0;
  /**
   * The peer speaks sabre's extension opcodes (SendWithImm, ReadRequestV, ReadComplete). Always
   * so on inproc/udp; the TCP transport clears it when the MPA exchange had no sabre block (a
   * standard iWARP peer): reads then go as RFC 5040 Read Requests and complete on the Read
   * Response with L, answers to its reads carry no ReadComplete, SendWithImm is refused.
   */
  sabreExt = true;
  watchdog = false;
  constructor(peer: DeviceAddress, peerKey: string, rqpn: number) {
    this.peer = peer;
    this.peerKey = peerKey;
    this.rqpn = rqpn;
  }
}

export interface QpCaps {
  maxSendWr: number;
  maxRecvWr: number;
  maxSge: number;
  maxInline: number;
  rnrRetry: number;
  rnrTimeoutMs: number;
  maxRdAtomic: number;
  /** Requests out and nothing heard from the peer's engine this long → RetryExcErr. */
  timeoutMs: number;
}

export class QpCtx {
  readonly qpn: number;
  readonly type: 'rc' | 'srd';
  readonly pd: number;
  readonly caps: QpCaps;
  readonly sendCq: CompletionSink;
  readonly recvCq: CompletionSink;
  state: QpStateValue;
  /** rc: the connected flow. */
  flow?: Flow;
  readonly flows = new Map<string, Flow>();
  readonly sq = new Deque<WrCtx>();
  /** Index in sq of the next WR to transmit. */
  tx = 0;
  readonly rq = new Deque<RecvCtx>();
  /** rc: receives consumed so far (a Send with MSN m takes receive m). */
  rqConsumed = 0;
  rdAtomic = 0;
  /** Bounding box of remote ranges possibly in flight (rc fence fast path). */
  fenceLo = Infinity;
  fenceHi = -Infinity;
  onConnected?: () => void;
  onError?: () => void;
  constructor(qpn: number, type: 'rc' | 'srd', pd: number, caps: QpCaps, sendCq: CompletionSink, recvCq: CompletionSink, state: QpStateValue) {
    this.qpn = qpn;
    this.type = type;
    this.pd = pd;
    this.caps = caps;
    this.sendCq = sendCq;
    this.recvCq = recvCq;
    this.state = state;
  }
}
