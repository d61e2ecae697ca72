// What the engine keeps: per QP, per flow, per work request, per message. A flow is one
// direction pair between a QP and one remote QP: rc has exactly one, srd one per (peer device,
// remote qpn) it talks to. Plain data: the engine's parts (requester.ts, responder.ts,
// arrival.ts, placement.ts, completion.ts) act on it with functions; engine.ts owns it.
import type { DeviceAddress } from '../core/address.js';
import { GatherCursor } from '../core/gather.js';
import { QpState, WcStatus, type OpcodeValue, type QpStateValue, type WcOpcodeValue, type WcStatusValue } from '../core/enums.js';
import type { Frame } from '../core/frame.js';
import { SABRE_PEER, type PeerProfile } from '../core/peer.js';
import type { CompletionSink, WrId } from '../core/work.js';
import type { TermCode } from '../wire/terminate.js';
import type { ReadVEntry } from '../wire/rdmap.js';
import { Deque } from '../core/deque.js';
import type { EngineEvent } from './events.js';
import type { DeviceCounters, EngineMemory, MrRecord } from './memory.js';
import { newCounters } from './memory.js';
import { DEFAULT_BOUNDS, type EngineBounds } from './bounds.js';
import type { Offsets } from './offsets.js';
import { type OpcodeRow, SEND_TAKES_COMPARE_ADD, SEND_TAKES_IMM, SEND_TAKES_REMOTE, SEND_TAKES_REMOTE_LIST, SEND_TAKES_SWAP, sendFieldsTaken, type WrKindValue } from './opcodes.js';
import { TimerTable } from './timers.js';
import type { PendingWrites } from './write-index.js';

/** A checked local segment of registered memory. */
export interface Piece {
  rec: MrRecord;
  addr: number;
  len: number;
}

/**
 * A posted send work request, as the engine keeps it: everything the requester needs later is
 * copied out of the caller's SendWr at post time (ibverbs providers copy the WR too), so the
 * caller may reuse or change its object as soon as postSend returns.
 */
export interface SendWork {
  readonly wrId: WrId;
  readonly opcode: OpcodeValue;
  /** The RDMAP message the request starts (opcodes.ts). */
  readonly row: OpcodeRow;
  readonly kind: WrKindValue;
  /** Completion opcode. */
  readonly wc: WcOpcodeValue;
  readonly signaled: boolean;
  readonly pieces: Piece[];
  readonly total: number;
  /** Data copied at post time (maxInline); replaces pieces when set. */
  inline?: Uint8Array;
  /** Remote side, copied: one segment (remoteAddr/rkey) or the sources of a vectored read. */
  readonly remoteAddr: number;
  readonly rkey: number;
  readonly srcs: ReadVEntry[] | undefined;
  readonly imm: number;
  readonly compareAdd: bigint;
  readonly swap: bigint;
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
  /** srd: its flow's `flushes` when it was posted — the flow failed since if they differ (srd-epoch.ts). */
  flushMark: number;
  /** Reads: the sinks the responder may write (ReadResponse targets are checked against them). */
  sinks?: ReadVEntry[];
  /** Reads to a standard iWARP peer: RFC 5040 Read Requests whose last Read Response has not arrived yet. */
  readParts?: number;
}

/** A posted receive. */
export interface RecvWork {
  wrId: WrId;
  /**
   * Its scatter list; one segment is kept as the piece itself, not a list of one, and no
   * segment as one shared empty list (newRecvWork): an idle QP keeps a dozen receives posted,
   * most of them empty (a channel's notifications), and a list of its own is 32-56 bytes each.
   */
  pieces: Piece[] | Piece;
  total: number;
  /** srd: a message claimed it. */
  claimed: boolean;
}

/** The scatter list of every receive posted without one (zero-length receives): shared, never written. */
const NO_PIECES: Piece[] = [];

/**
 * newRecvWork's record: three fields, not four — whether an srd message claimed it is kept as
 * the sign of the stored total (an idle QP keeps a dozen receives posted, on each of thousands
 * of QPs, and every field is a word of each).
 */
class PostedRecv implements RecvWork {
  readonly wrId: WrId;
  readonly pieces: Piece[] | Piece;
  /** The total, or -total - 1 once claimed. */
  #t: number;
  constructor(wrId: WrId, pieces: Piece[] | Piece, total: number) {
    this.wrId = wrId;
    this.pieces = pieces;
    this.#t = total;
  }

  get total(): number {
    const t = this.#t;
    return t < 0 ? -t - 1 : t;
  }

  get claimed(): boolean {
    return this.#t < 0;
  }

  set claimed(v: boolean) {
    if (v !== this.#t < 0) this.#t = -this.#t - 1;
  }
}

/** The engine's record of a checked receive. */
export function newRecvWork(wrId: WrId, pieces: Piece[], total: number): RecvWork {
  return new PostedRecv(wrId, pieces.length === 1 ? pieces[0]! : pieces.length === 0 ? NO_PIECES : pieces, total);
}

/** The spans of receive `r` that its bytes [off, off + n) land in, in order. */
export function recvSpans(r: RecvWork, off: number, n: number): { p: Piece; at: number; n: number }[] {
  if (!Array.isArray(r.pieces)) {
    const p = r.pieces;
    return off < p.len && n > 0 ? [{ p, at: off, n: Math.min(n, p.len - off) }] : [];
  }
  const spans: { p: Piece; at: number; n: number }[] = [];
  const cur = new GatherCursor(r.pieces, pieceLength);
  cur.skip(off);
  cur.take(n, (p, at, k) => spans.push({ p, at, n: k }));
  return spans;
}

const pieceLength = (p: Piece): number => p.len;

/**
 * The table of a flow or QP map nothing was put in yet: one shared empty Map stands in until
 * the first write (the owner's own…() replaces it), so an idle QP carries no table of its
 * own for what it never uses (an empty Map is about 180 bytes: an idle rc QP had six). It
 * refuses set(): a write that skipped own…() would land in every flow's table at once.
 */
const NO_ENTRIES = new Map<never, never>();
Object.defineProperty(NO_ENTRIES, 'set', {
  value: () => {
    throw new Error('internal: write to the shared empty table (own…() first)');
  },
});
// clear() on an empty Map still allocates a fresh table; this one has nothing to clear.
Object.defineProperty(NO_ENTRIES, 'clear', { value: () => {} });

export function noEntries<K, V>(): Map<K, V> {
  return NO_ENTRIES as unknown as Map<K, V>;
}

/** A message sent and not yet acknowledged. */
export interface OutMessage {
  wr?: SendWork;
  /** Kept for messages that consume a receive, and every srd message: resent after an RNR NAK. */
  frames?: Frame[];
  rnrWait: boolean;
  /** RNR NAKs met by a message that is no work request of ours (an answer to the peer's read or atomic). */
  rnrCount?: number;
  /** The last message of our answer to one of the peer's reads (or an atomic's answer): acked, it leaves the IRD count… */
  endsRead?: boolean;
  /** … and its bytes leave the answer budget. */
  readBytes?: number;
}

/** A message being received. */
export interface InMessage {
  ssn: number;
  msgLen: number;
  got: number;
  offs: Offsets;
  seen: boolean;
  opcode: number;
  /** Untagged header fields of the first segment seen. */
  msn: number;
  ulp: number;
  /** Control payload (ReadRequest, atomics, immediate data, terminate …); borrowed during its step as `hdr` is. */
  ctl?: Uint8Array;
  /**
   * Copy of a DDP header of the message (for the Terminate's header copy). During the receive
   * step that brought it, possibly the arriving frame's own header (EngineState.borrowed).
   */
  hdr?: Uint8Array;
  hdrLen: number;
  segLen: number;
  fail?: { term: TermCode; local?: WcStatusValue };
  /** A copy arrived that needs a receive that is not there: NAK RNR when this message is next. */
  rnrArmed: boolean;
  /** rc: an RNR NAK went for it: its sender sends it again after its RNR timer (or, closing, never). */
  rnrNaked: boolean;
  recv?: RecvWork;
  /** Terminate: the sender's cumulative ack — the failed message of ours is ackHint + 1. */
  ackHint?: number;
  /** What this message is charged against its QP's out-of-order budget (budget.ts). */
  held: number;
  heldEntries: number;
  /** A Write: its STag and the TO of its offset 0 (-1 until a segment names them): write-order.ts. */
  stag: number;
  toBase: number;
}

export class Flow {
  readonly peer: DeviceAddress;
  readonly peerKey: string;
  /** srd: the source host its QP's per-host cap counts it under (core/address sourceKey); '' for rc. */
  source = '';
  readonly rqpn: number;
  /** What the peer speaks (core/peer.ts): sabre unless a connection link said otherwise. */
  profile: PeerProfile = SABRE_PEER;
  /** rc: the peer's close notice came ahead of its turn (responder.ts advance acts on it if the turn waits for a receive). */
  closeAhead = false;
  // outgoing direction
  nextSsn = 1;
  acked = 0;
  readonly inflight = new Map<number, OutMessage>();
  sendMsn = 1;
  reqMsn = 1;
  respMsn = 1;
  termMsn = 1;
  /** Reads and atomics of ours awaiting their response, by MSN (written through ownReads / ownAtomics). */
  reads: Map<number, SendWork> = noEntries();
  atomics: Map<number, SendWork> = noEntries();
  /** The peer's reads we answered whose answer is not acknowledged yet (bounds.ts maxIrd), and their bytes (maxAnswerBytes). */
  readsIn = 0;
  #answerBytes = 0;
  /** srd: its QP's total of its flows' answerBytes (bounds.ts maxQpAnswerBytes), kept by the setter. */
  answers: { bytes: number } | undefined;
  get answerBytes(): number {
    return this.#answerBytes;
  }
  set answerBytes(v: number) {
    if (this.answers) this.answers.bytes += v - this.#answerBytes;
    this.#answerBytes = v;
  }
  // incoming direction
  expected = 1;
  readonly pending = new Map<number, InMessage>();
  /**
   * rc: the pending Writes (a tagged segment seen), indexed by STag and TO, made at the first
   * one; a segment of a Write below the highest ssn in it arrived late (write-order.ts). Entries
   * that left `pending` otherwise (a flow error) are stale: readers check them against `pending`.
   */
  writes: PendingWrites<InMessage> | undefined = undefined;
  /**
   * srd: the ssns refused for want of a receive, to be asked for again (RNR NAK) in their turn,
   * as one range (empty while askedHi < askedLo), and the ssn whose NAK went out for the
   * current refusal (0: none): srd-refusal.ts.
   */
  askedLo = 1;
  askedHi = 0;
  askedNak = 0;

  /** Nothing is asked for any more (a new epoch, the flow dropped or in error). */
  clearAsked(): void {
    this.askedLo = 1;
    this.askedHi = 0;
    this.askedNak = 0;
  }
  needAck = false;
  /** On EngineState's touched list of this receive step (touch()). */
  touched = false;
  /** When the peer's engine was last heard from (the requester watchdog, requester.ts). */
  lastHeard = 0;
  /** Counted in EngineState.peerEnds (not-ready.ts). */
  inPeerEnds = false;
  /** srd (srd-epoch.ts): a flow of an srd QP, and its epoch, carried in its frames. */
  srd = false;
  epoch = 0;
  /** srd: how often the flow failed, and the status its work posted before and not yet sent gets. */
  flushes = 0;
  flushStatus: WcStatusValue = WcStatus.WrFlushErr;
  /** srd epochs (bounds.ts): the last segment from the peer, and the last of ours sent or acked. */
  lastSegIn: number;
  lastOut: number;
  constructor(peer: DeviceAddress, peerKey: string, rqpn: number, now = 0) {
    this.peer = peer;
    this.peerKey = peerKey;
    this.rqpn = rqpn;
    this.lastSegIn = now;
    this.lastOut = now;
  }

  ownReads(): Map<number, SendWork> {
    return this.reads === NO_ENTRIES ? (this.reads = new Map()) : this.reads;
  }

  ownAtomics(): Map<number, SendWork> {
    return this.atomics === NO_ENTRIES ? (this.atomics = new Map()) : this.atomics;
  }

  /** Requests out: unacknowledged messages, reads or atomics awaiting their response. */
  get outstanding(): boolean {
    return this.inflight.size > 0 || this.reads.size > 0 || this.atomics.size > 0;
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

/** The caps of the QP made last: a QP with equal caps shares them (caps are never written). */
let lastCaps: QpCaps | undefined;

/** `c`, or an equal caps object already held: thousands of QPs made alike hold one. */
export function sharedCaps(c: QpCaps): QpCaps {
  const l = lastCaps;
  if (l !== undefined && sameFields(l, c)) return l;
  return (lastCaps = c);
}

function sameFields(a: object, b: object): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if ((a as Record<string, unknown>)[k] !== (b as Record<string, unknown>)[k]) return false;
  return true;
}

export class EngineQp {
  readonly qpn: number;
  readonly type: 'rc' | 'srd';
  readonly pd: number;
  readonly caps: QpCaps;
  readonly sendCq: CompletionSink;
  readonly recvCq: CompletionSink;
  state: QpStateValue;
  /** rc: ERROR came from the peer's side (its close notice, it was lost): a close tells it nothing. */
  peerGone = false;
  /** rc: the connected flow (not in `flows`). */
  flow?: Flow;
  /** srd: its flows by flowKey (written through ownFlows). */
  flows: Map<string, Flow> = noEntries();
  readonly sq = new Deque<SendWork>();
  /** Index in sq of the next WR to transmit. */
  tx = 0;
  readonly rq = new Deque<RecvWork>();
  /** rc: receives consumed so far (a Send with MSN m takes receive m). */
  rqConsumed = 0;
  rdAtomic = 0;
  /** Reads and atomics out at once as the connection negotiated them (tcp: the peer's IRD); caps.maxRdAtomic too. */
  ordLimit = Infinity;
  /** Bounding box of remote ranges possibly in flight (rc fence fast path). */
  fenceLo = Infinity;
  fenceHi = -Infinity;
  /** The same, of the reads and atomics alone (what a write is fenced by). */
  fenceRaLo = Infinity;
  fenceRaHi = -Infinity;
  /** srd receive completions carry the sender's address (`src`): the reserved CM QP asks for it. */
  readonly reportSource: boolean;
  /** Out-of-order state held for all flows (budget.ts), in entries and bytes. */
  oooEntries = 0;
  oooBytes = 0;
  /** srd: bytes of read answers its flows hold (Flow.answers). */
  readonly answers = { bytes: 0 };
  /** srd: flows per peer address key and per source host (core/address sourceKey), and when a full table is next worth scanning for an idle flow. */
  peerFlows: Map<string, number> = noEntries();
  hostFlows: Map<string, number> = noEntries();
  evictRetryAt = 0;
  /**
   * srd: the pending messages that claimed a posted receive, with their flows (receives.ts:
   * the one a flow's turn may rob). At most one per claimed receive; a message leaves it when
   * it leaves its flow (budget.ts release).
   */
  recvHolders: Map<InMessage, Flow> = noEntries();
  /** On EngineState's changed list (changed()). */
  changed = false;
  constructor(qpn: number, type: 'rc' | 'srd', pd: number, caps: QpCaps, sendCq: CompletionSink, recvCq: CompletionSink, reportSource: boolean) {
    this.qpn = qpn;
    // The literal, not the argument: a type that crossed from another thread is a string of its own per QP.
    this.type = type === 'srd' ? 'srd' : 'rc';
    this.pd = pd;
    this.caps = sharedCaps(caps);
    this.sendCq = sendCq;
    this.recvCq = recvCq;
    this.state = type === 'srd' ? QpState.Rts : QpState.Init;
    this.reportSource = reportSource;
  }

  ownFlows(): Map<string, Flow> {
    return this.flows === NO_ENTRIES ? (this.flows = new Map()) : this.flows;
  }

  ownPeerFlows(): Map<string, number> {
    return this.peerFlows === NO_ENTRIES ? (this.peerFlows = new Map()) : this.peerFlows;
  }

  ownHostFlows(): Map<string, number> {
    return this.hostFlows === NO_ENTRIES ? (this.hostFlows = new Map()) : this.hostFlows;
  }

  ownRecvHolders(): Map<InMessage, Flow> {
    return this.recvHolders === NO_ENTRIES ? (this.recvHolders = new Map()) : this.recvHolders;
  }

  /** Every flow: rc's one, or srd's table. */
  allFlows(): Iterable<Flow> {
    return this.type === 'rc' ? (this.flow ? [this.flow] : []) : this.flows.values();
  }

  /** RTR or RTS: frames may flow. */
  get live(): boolean {
    return this.state === QpState.Rts || this.state === QpState.Rtr;
  }
}

/** The engine's timers (timers.ts), by kind; requester.ts arms both. */
export type EngineTimer =
  /** The requester watchdog of a flow with requests out. */
  | { kind: 'watchdog'; key: Flow; at: number; qp: EngineQp; flow: Flow }
  /** A message waiting out its RNR back-off before it is sent again. */
  | { kind: 'rnrRetry'; key: OutMessage; at: number; qp: EngineQp; flow: Flow; ssn: number; m: OutMessage }
  /** The device holds its input: the next not-ready word to its peers (not-ready.ts). */
  | { kind: 'notReady'; key: EngineState; at: number };

/** A frame for the link, with its destination. */
export interface OutItem {
  to: DeviceAddress;
  frame: Frame;
}

/** A segment being placed (one or more descriptors of one placement batch). */
export interface SegmentPlacement {
  qp: EngineQp;
  flow: Flow;
  m: InMessage;
  off: number;
  len: number;
  remaining: number;
  bad: number;
  /** Placed into a local receive (a Send) rather than at a peer-named STag. */
  recvLocal: boolean;
  /** Tagged into our own sinks (a Read Response): the status our work request gets if placement fails. */
  local: WcStatusValue | undefined;
}

/** One placement descriptor's target (the indirect path copies to it). */
export interface PlaceTarget {
  seg: SegmentPlacement;
  stag: number;
  to: number;
  len: number;
  /** The payload, when it lies outside device memory and this side copies it once the kernel's checks pass (PLACE_SRC_CALLER). */
  parts: Uint8Array[] | undefined;
}

/** Everything one engine owns; the parts take it as their first argument. */
export class EngineState {
  readonly mem: EngineMemory;
  readonly counters: DeviceCounters = newCounters();
  readonly qps = new Map<number, EngineQp>();
  /** Largest payload of an untagged segment, and of a tagged one (a link that cuts tagged segments itself takes them whole). */
  readonly mss: number;
  readonly taggedMss: number;
  /** The largest control message the link carries in one segment (EngineOptions.maxControl). */
  maxControl: number;
  /** Frames to hand to the link, in order. */
  outbox: OutItem[] = [];
  /** Local segments of send work flushed since the last takeFlushed (copies: pieces may be reused): views of them the link holds must be detached. */
  flushed: Piece[] = [];
  readonly events: EngineEvent[] = [];
  readonly timers = new TimerTable<EngineTimer>();
  now = 0;
  /** The device holds its input (RdmapEngine.holdReceive). */
  holding = false;
  /** When each peer end last said it is alive and not ready (not-ready.ts), by its address key: only peer ends in peerEnds. */
  readonly notReadyFrom = new Map<string, number>();
  /** Flows per peer end key, over every QP (not-ready.ts flowMade / flowGone): whose not-ready words are taken. */
  readonly peerEnds = new Map<string, number>();
  // one receive step
  descs: PlaceTarget[] = [];
  /**
   * Where this batch's caller copies go (a box over their targets): those copies run after the
   * kernel's, so a later segment landing there flushes the batch first (placement.ts).
   */
  callerLo = Infinity;
  callerHi = -Infinity;
  /**
   * Flows (with their QPs) that need their in-order step at the end of this receive step, in
   * the order first touched; Flow.touched marks membership. Lists rather than a Map: a Map's
   * clear() allocates a new table, once per receive step. Slots past
   * touchedCount are undefined.
   */
  readonly touchedFlows: (Flow | undefined)[] = [];
  readonly touchedQps: (EngineQp | undefined)[] = [];
  touchedCount = 0;
  /**
   * Messages of this step whose `hdr` and `ctl` are views of the arriving frame, not copies
   * (arrival.ts): the frame is only valid during the step, so the step's end copies the header
   * of those still pending. Most messages complete in the step that brings them, and then
   * never need the copy (a slice per message on the small-message path). Slots
   * past `borrowedCount` are undefined.
   */
  readonly borrowed: (InMessage | undefined)[] = [];
  borrowedCount = 0;
  /** Answers sent this second to segments for QPNs that do not exist (arrival.ts noSuchQp). */
  noQpSince = 0;
  noQpAnswers = 0;
  // completions
  readonly overrun = new Set<CompletionSink>();
  readonly keys = new WeakMap<DeviceAddress, string>();

  readonly bounds: EngineBounds;

  /**
   * QPs whose state or queue lengths changed since the owner last took the list
   * (RdmapEngine.takeChanged): a shell that mirrors them elsewhere visits these, not every QP.
   */
  readonly changedQps: EngineQp[] = [];
  /** Kept only for an owner that takes it (a list nobody empties would hold destroyed QPs). */
  trackChanges = false;

  changed(qp: EngineQp): void {
    if (qp.changed || !this.trackChanges) return;
    qp.changed = true;
    this.changedQps.push(qp);
  }

  /** The flow needs its in-order step (and maybe an ack) at the end of this receive step. */
  touch(flow: Flow, qp: EngineQp): void {
    if (flow.touched) return;
    flow.touched = true;
    this.touchedFlows[this.touchedCount] = flow;
    this.touchedQps[this.touchedCount++] = qp;
  }

  constructor(mem: EngineMemory, mss: number, taggedMss: number, bounds: Partial<EngineBounds> = {}) {
    this.mem = mem;
    this.mss = mss;
    this.taggedMss = taggedMss;
    this.maxControl = mss;
    this.bounds = { ...DEFAULT_BOUNDS, ...bounds };
  }
}

/** The fields of a send work request the engine copies (verbs' SendWr, already checked). */
export interface SendWrFields {
  wrId: WrId;
  opcode: OpcodeValue;
  signaled?: boolean;
  imm?: number;
  remoteAddr?: number;
  rkey?: number;
  remoteSgList?: readonly { addr: number; length: number; rkey: number }[];
  compareAdd?: bigint;
  swap?: bigint;
}

/**
 * The engine's copy of a checked send work request (QueuePair.postSend checks; `row` is the
 * opcode table's row for its opcode, `pieces` its checked local segments).
 */
export function newSendWork(wr: SendWrFields, row: OpcodeRow, pieces: Piece[], total: number): SendWork {
  const takes = sendFieldsTaken(row, wr.opcode, wr.remoteSgList !== undefined);
  const srcs = takes & SEND_TAKES_REMOTE_LIST ? wr.remoteSgList!.map((r) => ({ stag: r.rkey >>> 0, to: r.addr, len: r.length })) : undefined;
  const remoteAddr = takes & SEND_TAKES_REMOTE ? wr.remoteAddr ?? 0 : 0;
  // One shape for every work request (no optional fields added later but flow/inline/ranges/sinks/readParts).
  const w: SendWork = {
    wrId: wr.wrId, opcode: wr.opcode, row, kind: row.kind!, wc: row.wr[wr.opcode]!, signaled: wr.signaled ?? true, pieces, total,
    remoteAddr, rkey: takes & SEND_TAKES_REMOTE ? (wr.rkey ?? 0) >>> 0 : 0, srcs, imm: takes & SEND_TAKES_IMM ? (wr.imm ?? 0) >>> 0 : 0,
    compareAdd: takes & SEND_TAKES_COMPARE_ADD ? wr.compareAdd ?? 0n : 0n, swap: takes & SEND_TAKES_SWAP ? wr.swap ?? 0n : 0n,
    pending: 0, done: false, status: WcStatus.Success, byteLen: 0, rnrCount: 0, flushMark: 0,
  };
  // Remote ranges the request touches (the rc fence).
  if (row.remote === 'one') w.ranges = [{ addr: remoteAddr, len: total }];
  else if (row.remote === 'word') w.ranges = [{ addr: remoteAddr, len: 8 }];
  else if (row.remote === 'list') w.ranges = srcs ? srcs.map((s) => ({ addr: s.to, len: s.len })) : [{ addr: remoteAddr, len: total }];
  return w;
}
