// The RDMAP/DDP engine of one device, sans-I/O, in the shape of quinn-proto's Connection: the
// shell feeds it work (postSend/postRecv, connect, modify) and what happened outside
// (handleFrames, handleTimeout, handleLinkUp/Down, handleWritten, handlePeerLost — each with
// the time, in milliseconds), then polls what to do: pollTransmit (frames for the link), pollEvent (QP
// connected, QP in ERROR, CQ overrun) and pollTimeout (when to call handleTimeout next). It
// places data through EngineMemory (one WASM place() call per receive step) and pushes
// completions into the QPs' completion sinks. The NIC driver (src/nic/driver.ts) is the one
// thing that drives it, on the NIC thread, inline, and on the simulated network of test/sim.
//
// The parts, each readable on its own:
//   opcodes.ts     the RDMAP opcode table: one row per opcode drives build, arrival, execution
//   requester.ts   posting order, the rc fence, building messages, acks, RNR, the watchdog
//   arrival.ts     checking and taking in each arriving segment
//   placement.ts   the placement batch (M3): staging, descriptors, one place() call, results
//   responder.ts   in-order completion: receives, immediate data, reads (M1), atomics, Terminate
//   completion.ts  completions, the ERROR state, CQ overrun
//   timers.ts      the timer table; state.ts the data; segmenter.ts messages into DDP segments
//
// Ordering (rc over a reordering link). Every message a QP sends — requests and responses —
// gets the next ssn of that direction. The receiver places tagged and untagged data as it
// arrives, but completes messages strictly in ssn order: receive completions, immediate data,
// read and atomic execution, read completion, and the cumulative ack that tells the requester
// its Write/Send is placed and visible.
import { addressKey, type DeviceAddress, sourceKey } from '../core/address.js';
import { detachFrame, type Owns } from '../core/detach.js';
import { QpState, WcOpcode, WcStatus, type WcStatusValue } from '../core/enums.js';
import type { Inbound } from '../core/frame.js';
import type { QpDownCause } from '../core/link.js';
import type { PeerProfile } from '../core/peer.js';
import type { CompletionSink } from '../core/work.js';
import { onSeg } from './arrival.js';
import type { EngineBounds } from './bounds.js';
import { complete, drainSq, qpError } from './completion.js';
import type { EngineEvent } from './events.js';
import { holdPieces, type DeviceCounters, type EngineMemory } from './memory.js';
import { flushPlacement } from './placement.js';
import {
  emit, findFlow, onAck, onWritten, onRnr, peerLost, pump, resumeWatchdogs, rnrRetry, srdFlow, watchdogExpired, watchdogLive,
} from './requester.js';
import { advance, closeNotice } from './responder.js';
import { flowGone, flowMade, NOT_READY_MS, notReady } from './not-ready.js';
import { EngineQp, EngineState, Flow, noEntries, type EngineTimer, type OutItem, type Piece, type QpCaps, type RecvWork, type SendWork } from './state.js';
import { copyBytes } from '../core/bytes.js';

export type { OutItem } from './state.js';

const NO_OUT: readonly OutItem[] = Object.freeze([]);

/** What a due timer of each kind does. */
const TIMER_HANDLERS: { [K in EngineTimer['kind']]: (e: EngineState, t: Extract<EngineTimer, { kind: K }>, now: number) => void } = {
  watchdog: (e, t, now) => watchdogExpired(e, t.qp, t.flow, now),
  rnrRetry: (e, t) => rnrRetry(e, t.qp, t.flow, t.ssn, t.m),
  notReady: (e, _t, now) => {
    if (!e.holding) return;
    notReady(e);
    e.timers.arm({ kind: 'notReady', key: e, at: now + NOT_READY_MS });
  },
};

/** Whether a timer entry still has something to time (one function: pollTimeout runs every step). */
const timerLive = (t: EngineTimer): boolean => t.kind !== 'watchdog' || watchdogLive(t.qp, t.flow);

/** A QP's connection went down: what its oldest unfinished work request completes with. */
const LINK_DOWN_STATUS: Record<QpDownCause, WcStatusValue | undefined> = {
  lost: WcStatus.RetryExcErr,
  broken: WcStatus.LocQpOpErr,
  refused: undefined,
  closed: undefined,
};

export interface EngineOptions {
  /** Largest payload of a DDP segment (default 64 KiB). */
  mss?: number;
  /** Tagged segments are cut by the link (Link.cutsTagged): the engine leaves tagged messages whole. */
  linkCutsTagged?: boolean;
  /**
   * The largest control message (a Read Request, say: never cut) the link carries in one
   * segment — its own mss, which `mss` may be set below. Default: `mss`.
   */
  maxControl?: number;
  /** What one peer can make a QP hold (bounds.ts; defaults DEFAULT_BOUNDS). */
  bounds?: Partial<EngineBounds>;
}

export class RdmapEngine {
  readonly #e: EngineState;

  constructor(mem: EngineMemory, opts: EngineOptions = {}) {
    const mss = opts.mss ?? 65536;
    this.#e = new EngineState(mem, mss, opts.linkCutsTagged ? 0xffff_ffff : mss, opts.bounds);
    this.#e.maxControl = Math.max(mss, opts.maxControl ?? mss);
  }

  /** The largest control message one segment carries (EngineOptions.maxControl). */
  get maxControl(): number {
    return this.#e.maxControl;
  }

  get mem(): EngineMemory {
    return this.#e.mem;
  }

  get counters(): DeviceCounters {
    return this.#e.counters;
  }

  get qps(): ReadonlyMap<number, EngineQp> {
    return this.#e.qps;
  }

  get mss(): number {
    return this.#e.mss;
  }

  /** Frames waiting for pollTransmit (read-only view: tests inspect it). */
  get outbox(): readonly OutItem[] {
    return this.#e.outbox;
  }

  // ---- QP lifecycle -------------------------------------------------------------------------

  /**
   * A QP in the engine: rc in INIT, srd in RTS. `reportSource`: its srd receive completions
   * carry the sender's address as `src` (the reserved CM QP, src/cm/agent.ts).
   */
  createQp(qpn: number, type: 'rc' | 'srd', pd: number, caps: QpCaps, sendCq: CompletionSink, recvCq: CompletionSink, reportSource = false): EngineQp {
    const qp = new EngineQp(qpn, type, pd, caps, sendCq, recvCq, reportSource);
    this.#e.qps.set(qpn, qp);
    return qp;
  }

  destroyQp(qp: EngineQp): void {
    this.#e.qps.delete(qp.qpn);
    for (const f of qp.allFlows()) flowGone(this.#e, f);
  }

  /**
   * rc: bind to the remote QP and go to RTR. On a link without connections the engines greet
   * each other (hello frames) and RTS follows the answer; a connection link is asked for the
   * QP's connection by the shell instead (`greet` false), and handleLinkUp brings RTS.
   */
  connect(qp: EngineQp, peer: DeviceAddress, rqpn: number, now: number, greet = true): void {
    const e = this.#e;
    e.now = now;
    // One key string per address object: QPs connected to one peer through one object share it.
    let key = e.keys.get(peer);
    if (key === undefined) e.keys.set(peer, (key = addressKey(peer)));
    const flow = new Flow(peer, key, rqpn, now);
    if (qp.flow) flowGone(e, qp.flow);
    qp.flow = flow;
    flowMade(e, flow);
    qp.state = QpState.Rtr;
    e.changed(qp);
    if (greet) emit(e, flow, { kind: 'hello', srcQpn: qp.qpn, dstQpn: rqpn, reply: false });
  }

  /** Move to ERROR by the user's hand (modify, destroy): outstanding and later work completes with WrFlushErr. */
  toError(qp: EngineQp, now: number): void {
    this.#e.now = now;
    qpError(this.#e, qp, undefined, undefined, false);
  }

  /**
   * The QP is being destroyed (or its device closed): a connected rc QP first tells a sabre
   * peer (closeNotice), then goes to ERROR as toError.
   */
  close(qp: EngineQp, now: number): void {
    this.#e.now = now;
    const flow = qp.flow;
    // From ERROR too, unless the peer's side put it there: a QP that failed on its own (RNR
    // retries spent, modify) leaves the peer's up, and rdma_disconnect says so in any state.
    const live = qp.state === QpState.Rts || (qp.state === QpState.Error && !qp.peerGone);
    if (qp.type === 'rc' && live && flow !== undefined && flow.profile.extensions) closeNotice(this.#e, qp, flow);
    qpError(this.#e, qp, undefined, undefined, false);
  }

  /** ERROR → RESET: forget the peer and every counter; the QP can be connected afresh. */
  reset(qp: EngineQp): void {
    for (const f of qp.allFlows()) flowGone(this.#e, f);
    qp.state = QpState.Reset;
    this.#e.changed(qp);
    qp.flow = undefined;
    qp.flows = noEntries();
    qp.peerFlows = noEntries();
    qp.hostFlows = noEntries();
    qp.recvHolders = noEntries();
    qp.oooEntries = 0;
    qp.oooBytes = 0;
    qp.sq.clear();
    qp.rq.clear();
    qp.tx = 0;
    qp.rqConsumed = 0;
    qp.rdAtomic = 0;
    qp.ordLimit = Infinity;
    qp.fenceLo = Infinity;
    qp.fenceHi = -Infinity;
    qp.fenceRaLo = Infinity;
    qp.fenceRaHi = -Infinity;
  }

  /** srd: the flow a work request to (peer, rqpn) uses. */
  srdFlow(qp: EngineQp, peer: DeviceAddress, rqpn: number, key?: string): Flow {
    return srdFlow(this.#e, qp, peer, rqpn, key);
  }

  /** Peer ends remembered as holding their input (not-ready.ts; diagnostics, tests). */
  get notReadyPeers(): number {
    return this.#e.notReadyFrom.size;
  }

  /** srd: flows `qp` holds with `peer` (diagnostics, tests). */
  srdFlowCount(qp: EngineQp, peer: DeviceAddress): number {
    return qp.peerFlows.get(addressKey(peer)) ?? 0;
  }

  get bounds(): EngineBounds {
    return this.#e.bounds;
  }

  // ---- posting ------------------------------------------------------------------------------

  postRecv(qp: EngineQp, r: RecvWork, now: number): void {
    const e = this.#e;
    e.now = now;
    e.changed(qp);
    if (qp.state === QpState.Error) {
      complete(e, qp.recvCq, { wrId: r.wrId, status: WcStatus.WrFlushErr, opcode: WcOpcode.Recv, byteLen: 0, qpn: qp.qpn });
      return;
    }
    // A message waiting for a receive may now go on; the requester retries after its timer.
    qp.rq.push(r);
  }

  postSend(qp: EngineQp, w: SendWork, now: number): void {
    const e = this.#e;
    e.now = now;
    e.changed(qp);
    qp.sq.push(w);
    if (w.flow) w.flushMark = w.flow.flushes;
    if (!w.inline) holdPieces(w.pieces);
    if (qp.state === QpState.Error) {
      w.done = true;
      w.status = WcStatus.WrFlushErr;
      drainSq(e, qp);
      return;
    }
    pump(e, qp);
  }

  // ---- what happened outside (handle_*) -----------------------------------------------------

  /** A batch of received frames: one placement batch (or more if it overflows staging). */
  handleFrames(batch: readonly Inbound[], now: number): void {
    try {
      this.#receiveStep(batch, now);
    } finally {
      this.#untouch();
      this.#keepBorrowed();
    }
  }

  #receiveStep(batch: readonly Inbound[], now: number): void {
    const e = this.#e;
    e.now = now;
    let lastFrom: DeviceAddress | undefined;
    let lastKey = '';
    for (const { from, frame } of batch) {
      if (from !== lastFrom) {
        lastFrom = from;
        // addressKey sorts and joins the fields: costly per batch on every hop of a ping-pong.
        // Links hand the same (read-only) address object for a peer again and again.
        let k = e.keys.get(from);
        if (k === undefined) e.keys.set(from, (k = addressKey(from)));
        lastKey = k;
      }
      try {
        switch (frame.kind) {
          case 'seg':
            onSeg(e, from, lastKey, frame);
            break;
          case 'ack':
            onAck(e, lastKey, frame.dstQpn, frame.srcQpn, frame.ssn, frame.epoch);
            break;
          case 'rnr':
            onRnr(e, lastKey, frame.dstQpn, frame.srcQpn, frame.ssn, frame.epoch);
            break;
          case 'hello':
            this.#onHello(lastKey, frame.dstQpn, frame.srcQpn, frame.reply);
            break;
          default:
            e.counters.drops++;
        }
      } catch {
        // A frame we cannot make sense of is a counted drop, never an exception past the boundary.
        e.counters.drops++;
      }
    }
    flushPlacement(e);
    // touchedCount is read each time round: a flow touched meanwhile is visited too (as a Map's iteration would).
    for (let i = 0; i < e.touchedCount; i++) {
      const flow = e.touchedFlows[i]!;
      const qp = e.touchedQps[i]!;
      if (qp.state !== QpState.Error) advance(e, qp, flow);
      if (flow.needAck && qp.state !== QpState.Error) {
        flow.needAck = false;
        if (flow.profile.acks) emit(e, flow, { kind: 'ack', srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn: flow.expected - 1 });
      }
    }
  }

  /** The touched lists are emptied at the end of every receive step, also one that threw. */
  #untouch(): void {
    const e = this.#e;
    for (let i = 0; i < e.touchedCount; i++) {
      e.touchedFlows[i]!.touched = false;
      e.touchedFlows[i] = undefined;
      e.touchedQps[i] = undefined;
    }
    e.touchedCount = 0;
  }

  /**
   * The end of a receive step: messages still pending (held by the budget: release() zeroes
   * heldEntries when a message completes or its flow goes) get a copy of the frame header and
   * control payload they borrowed; the frames may be reused by the link once the step returns.
   */
  #keepBorrowed(): void {
    const e = this.#e;
    for (let i = 0; i < e.borrowedCount; i++) {
      const m = e.borrowed[i]!;
      e.borrowed[i] = undefined;
      if (m.heldEntries === 0) continue;
      if (m.hdr) m.hdr = copyBytes(m.hdr);
      if (m.ctl) m.ctl = copyBytes(m.ctl);
    }
    e.borrowedCount = 0;
  }

  /**
   * The device holds its input (Link.holdReceive), or takes it in again. While it holds, every
   * peer hears from it each NOT_READY_MS (not-ready.ts), so their watchdogs wait.
   */
  holdReceive(hold: boolean, now: number): void {
    const e = this.#e;
    e.now = now;
    if (hold === e.holding) return;
    e.holding = hold;
    if (!hold) {
      e.timers.cancel(e);
      resumeWatchdogs(e, now);
      return;
    }
    notReady(e);
    e.timers.arm({ kind: 'notReady', key: e, at: now + NOT_READY_MS });
  }

  handleTimeout(now: number): void {
    const e = this.#e;
    e.now = now;
    for (const t of e.timers.due(now)) (TIMER_HANDLERS[t.kind] as (e: EngineState, t: EngineTimer, now: number) => void)(e, t, now);
  }

  /**
   * A connection link has QP `qpn`'s connection up; `profile`: what the peer speaks; `ord`:
   * the reads and atomics we may have out at once (the peer's IRD: past it, it Terminates).
   */
  handleLinkUp(qpn: number, profile: PeerProfile, now: number, ord?: number): void {
    const e = this.#e;
    e.now = now;
    const qp = e.qps.get(qpn);
    if (!qp || qp.type !== 'rc' || !qp.flow || qp.state !== QpState.Rtr) return;
    qp.flow.profile = profile;
    if (ord !== undefined && ord >= 1) qp.ordLimit = ord;
    this.#established(qp);
  }

  /** A connection link lost QP `qpn`'s connection. */
  handleLinkDown(qpn: number, cause: QpDownCause, now: number): void {
    const e = this.#e;
    e.now = now;
    const qp = e.qps.get(qpn);
    if (!qp || qp.state === QpState.Error || qp.state === QpState.Reset) return;
    qpError(e, qp, qp.sq.find((w) => !w.done), LINK_DOWN_STATUS[cause]);
  }

  /** The link lost a peer device for good (requester.ts peerLost). */
  handlePeerLost(peer: DeviceAddress, now: number): void {
    this.#e.now = now;
    peerLost(this.#e, addressKey(peer));
  }

  // ---- what to do (poll_*) ------------------------------------------------------------------

  /**
   * A connection link took every byte of QP `qpn`'s messages up to `ssn` out of device memory
   * (LinkEvents.written): to a peer that sends no acks, that completes our Writes and Sends.
   */
  handleWritten(qpn: number, ssn: number, now: number): void {
    this.#e.now = now;
    onWritten(this.#e, qpn, ssn);
  }

  /** Frames for the link, in order (the array is the caller's; when there are none, a shared frozen empty array). */
  pollTransmit(): readonly OutItem[] {
    const e = this.#e;
    const o = e.outbox;
    // Every engine step ends with a poll that finds nothing: no fresh outbox for it (no allocation per step).
    if (o.length === 0) return NO_OUT;
    e.outbox = [];
    return o;
  }

  /**
   * Memory is about to be reused (core/detach.ts): frames built and not yet polled, and those
   * kept to be sent again (an RNR retry re-emits a Send's frames), copy the views `owns` claims.
   */
  detach(owns: Owns): void {
    const e = this.#e;
    for (const o of e.outbox) detachFrame(o.frame, owns);
    for (const qp of e.qps.values()) {
      for (const flow of qp.allFlows()) {
        for (const m of flow.inflight.values()) if (m.frames) for (const f of m.frames) detachFrame(f, owns);
      }
    }
  }

  /** The local segments of send work flushed since the last call (see EngineState.flushed), or undefined. */
  takeFlushed(): Piece[] | undefined {
    const e = this.#e;
    if (e.flushed.length === 0) return undefined;
    const f = e.flushed;
    e.flushed = [];
    return f;
  }

  /** From now on list the QPs whose state or queue lengths change, for takeChanged. */
  trackChanges(): void {
    this.#e.trackChanges = true;
  }

  /** Visit each QP changed since the last call once; the list is then empty. */
  takeChanged(visit: (qp: EngineQp) => void): void {
    const list = this.#e.changedQps;
    for (let i = 0; i < list.length; i++) {
      const qp = list[i]!;
      qp.changed = false;
      visit(qp);
    }
    list.length = 0;
  }

  pollEvent(): EngineEvent | undefined {
    return this.#e.events.shift();
  }

  /** When handleTimeout is next due (undefined: no timer). */
  pollTimeout(): number | undefined {
    return this.#e.timers.next(timerLive);
  }

  // ---- connection by hello (links without connections) --------------------------------------

  #onHello(key: string, qpn: number, rqpn: number, reply: boolean): void {
    const e = this.#e;
    const qp = e.qps.get(qpn);
    if (!qp || qp.type !== 'rc' || !qp.flow) return;
    const flow = qp.flow;
    if (flow.peerKey !== key || flow.rqpn !== rqpn) return;
    if (!reply) emit(e, flow, { kind: 'hello', srcQpn: qp.qpn, dstQpn: rqpn, reply: true });
    if (qp.state === QpState.Rtr) this.#established(qp);
  }

  #established(qp: EngineQp): void {
    qp.state = QpState.Rts;
    this.#e.changed(qp);
    this.#e.events.push({ kind: 'connected', qpn: qp.qpn });
    pump(this.#e, qp);
  }
}


