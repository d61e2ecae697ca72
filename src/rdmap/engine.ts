// The RDMAP/DDP engine of one device, sans-I/O: fed with work requests, received frames and a
// clock (`now`, milliseconds), it places data (through EngineMemory: one WASM place() call per
// batch), pushes completions into the QPs' completion sinks, and leaves frames to send in
// `outbox` and its next timer in `nextDeadline()`. The device shell (src/verbs/device.ts) and
// the deterministic test harness (test/rdmap/harness.ts) are the only things that drive it.
//
// Ordering (rc over a reordering link). Every message a QP sends — requests and responses —
// gets the next ssn of that direction. The receiver places tagged and untagged data as it
// arrives, but completes messages strictly in ssn order: receive completions, immediate data,
// read and atomic execution, read completion, and the cumulative ack that tells the requester
// its Write/Send is placed and visible. Placement on arrival could let a later write land
// before an earlier one to the same bytes; the requester prevents that with a fence: a Write,
// Read or atomic whose remote range overlaps an earlier operation of the same QP that is not
// yet complete waits until it is (costs one round trip, only when ranges overlap).
//
// M1 (reads answered by writes). RdmaRead always sends a ReadRequestV naming sources and
// sinks; the responder answers with tagged ReadResponse segments straight into the sink
// STags/TOs, then a ReadComplete whose imm is the request's MSN; the requester completes the
// read when ReadComplete is processed, which ssn order puts after all of its data. The RFC
// 5040 ReadRequest is answered the same way.
// With a standard iWARP peer (flow.sabreExt false, TCP only) a read goes as RFC 5040 Read
// Requests — one per (source, sink) piece, adjacent pieces merged, so a one-source one-sink
// read is one request — and completes when the Read Response of its last request has arrived
// (the stream is in order and so are Read Responses); a peer's Read Request is answered with
// Read Responses only.
import { PlaceStatus } from '../dataplane/descriptors.js';
import { type DeviceAddress, addressKey } from '../core/address.js';
import { type Frame, type Inbound, type SegFrame } from '../core/frame.js';
import { Access, Opcode, QpState, WcOpcode, type WcOpcodeValue, WcStatus, type WcStatusValue } from '../core/enums.js';
import type { WorkCompletion } from '../core/work.js';
import {
  decodeAtomicRequest, decodeAtomicResponse, decodeDdp, decodeImmediateData, decodeReadComplete, decodeReadRequest,
  decodeReadRequestV, decodeTerminate, encodeAtomicRequest, encodeAtomicResponse, encodeImmediateData,
  encodeReadComplete, encodeReadRequest, encodeReadRequestV, encodeTerminate, Qn, RdmapOpcode, type ReadRequest, type ReadVEntry, readRequestVLength,
  type TaggedHdr,
} from '../wire/rdmap.js';
import { type CompletionSink, Flow, type InMsg, type Piece, type QpCaps, QpCtx, type RecvCtx, type WrCtx, WrKind } from './context.js';
import { type DeviceCounters, type EngineMemory, newCounters } from './memory.js';
import { ctlFrame, dataFrames } from './segmenter.js';
import { Offsets } from './offsets.js';
import { type TermCode, TERM as Term, statusForTerm, termForPlaceStatus } from '../wire/terminate.js';

/** Messages further ahead than this of the next expected ssn are dropped (bounds memory). */
const SSN_WINDOW = 1 << 20;
const M64 = (1n << 64n) - 1n;

interface SegCtx {
  qp: QpCtx;
  flow: Flow;
  m: InMsg;
  off: number;
  len: number;
  remaining: number;
  bad: number;
  recvLocal: boolean;
  opcode: number;
}

interface DescCtx {
  seg: SegCtx;
  stag: number;
  to: number;
  len: number;
}

interface Timer {
  at: number;
  run: (now: number) => void;
  /** A timer that may become moot before it is due (the watchdog of a flow gone idle) says so here, so the shell does not keep a timer pending for nothing. */
  live?: () => boolean;
}

export interface OutItem {
  to: DeviceAddress;
  frame: Frame;
}

export class RdmapEngine {
  readonly mem: EngineMemory;
  readonly counters: DeviceCounters = newCounters();
  readonly qps = new Map<number, QpCtx>();
  /** Frames to hand to the transport, in order. */
  outbox: OutItem[] = [];
  readonly mss: number;
  #timers: Timer[] = [];
  #descs: DescCtx[] = [];
  #touched = new Set<Flow>();
  #touchedQp = new Map<Flow, QpCtx>();
  #overrun = new Set<CompletionSink>();
  #keys = new WeakMap<DeviceAddress, string>();
  #now = 0;

  constructor(mem: EngineMemory, opts: { mss?: number } = {}) {
    this.mem = mem;
    this.mss = opts.mss ?? 65536;
  }

  // ---- QP lifecycle -------------------------------------------------------------------------

  createQp(qpn: number, type: 'rc' | 'srd', pd: number, caps: QpCaps, sendCq: CompletionSink, recvCq: CompletionSink): QpCtx {
    const qp = new QpCtx(qpn, type, pd, caps, sendCq, recvCq, type === 'srd' ? QpState.Rts : QpState.Init);
    this.qps.set(qpn, qp);
    return qp;
  }

  destroyQp(qp: QpCtx): void {
    this.qps.delete(qp.qpn);
  }

  /** rc: bind to the remote QP, go to RTR and greet it; RTS follows when it answers. */
  connect(qp: QpCtx, peer: DeviceAddress, rqpn: number, now: number): void {
    this.#now = now;
    const flow = new Flow(peer, addressKey(peer), rqpn);
    qp.flow = flow;
    qp.flows.set(`${flow.peerKey}#${rqpn}`, flow);
    qp.state = QpState.Rtr;
    this.#emit(flow, { kind: 'hello', srcQpn: qp.qpn, dstQpn: rqpn, reply: false });
  }

  /** Move to ERROR: outstanding and later work completes with WrFlushErr. */
  toError(qp: QpCtx, now: number, failing?: WrCtx, status?: WcStatusValue): void {
    this.#now = now;
    this.#qpError(qp, failing, status);
  }

  /**
   * The transport lost the link to a peer device for good (its retries are exhausted, or the
   * peer restarted and forgot our frames): nothing more will arrive from it and what we sent may
   * never land. rc QPs bound to it go to ERROR — their oldest unfinished work request completes
   * with RetryExcErr, the rest flush, as an RC QP past its retry count does. srd QPs keep
   * running: only the work addressed to that peer completes with RetryExcErr, and its flows are
   * forgotten, so a new incarnation of the peer starts at ssn 1 again.
   */
  linkFailed(peerKey: string, now: number): void {
    this.#now = now;
    for (const qp of this.qps.values()) {
      if (qp.state === QpState.Error || qp.state === QpState.Reset) continue;
      if (qp.type === 'rc') {
        if (qp.flow?.peerKey !== peerKey) continue;
        const first = qp.sq.find((w) => !w.done);
        this.#qpError(qp, first, WcStatus.RetryExcErr);
        continue;
      }
      let hit = false;
      for (const [k, f] of qp.flows) {
        if (f.peerKey !== peerKey) continue;
        hit = true;
        this.#forgetSrdFlow(qp, k, f);
      }
      if (hit) {
        this.#drainSq(qp);
        this.#pump(qp);
      }
    }
  }

  /** srd: drop one flow; its unfinished work completes with RetryExcErr (caller drains the SQ). */
  #forgetSrdFlow(qp: QpCtx, k: string, f: Flow): void {
    qp.flows.delete(k);
    qp.rdAtomic = Math.max(0, qp.rdAtomic - f.reads.size - f.atomics.size);
    for (const w of qp.sq) {
      if (w.flow === f && !w.done) {
        w.done = true;
        w.status = WcStatus.RetryExcErr;
      }
    }
  }

  /**
   * The requester's watchdog (IB's local ACK timeout, folded with its retry count): while a flow
   * has requests out — unacknowledged messages, reads or atomics awaiting their response — the
   * peer's engine must be heard from within `timeoutMs`. The transport retransmits lost
   * datagrams and reports a dead link on its own; this catches what it cannot see: a peer that
   * took our datagrams and then died or lost the QP before answering (or, on srd, a remote QP
   * that does not exist, whose frames are dropped). rc: the QP goes to ERROR with RetryExcErr;
   * srd: only that flow's work fails.
   */
  #arm(qp: QpCtx, flow: Flow): void {
    if (!this.#outstanding(flow)) flow.lastHeard = this.#now;
    if (flow.watchdog) return;
    flow.watchdog = true;
    this.#timers.push(this.#watchdogTimer(qp, flow));
  }

  #watchdogTimer(qp: QpCtx, flow: Flow): Timer {
    return {
      at: flow.lastHeard + qp.caps.timeoutMs,
      run: (now) => this.#watch(qp, flow, now),
      live: () => {
        const busy = this.#outstanding(flow) && (qp.state === QpState.Rts || qp.state === QpState.Rtr);
        if (!busy) flow.watchdog = false;
        return busy;
      },
    };
  }

  #outstanding(flow: Flow): boolean {
    return flow.inflight.size > 0 || flow.reads.size > 0 || flow.atomics.size > 0;
  }

  #watch(qp: QpCtx, flow: Flow, now: number): void {
    flow.watchdog = false;
    const live = qp.state === QpState.Rts || qp.state === QpState.Rtr;
    const bound = qp.type === 'rc' ? qp.flow === flow : qp.flows.get(`${flow.peerKey}#${flow.rqpn}`) === flow;
    if (!live || !bound || !this.#outstanding(flow)) return;
    if (now - flow.lastHeard < qp.caps.timeoutMs) {
      flow.watchdog = true;
      this.#timers.push(this.#watchdogTimer(qp, flow));
      return;
    }
    this.counters.timeouts++;
    if (qp.type === 'rc') {
      this.#qpError(qp, qp.sq.find((w) => !w.done), WcStatus.RetryExcErr);
      return;
    }
    this.#forgetSrdFlow(qp, `${flow.peerKey}#${flow.rqpn}`, flow);
    this.#drainSq(qp);
    this.#pump(qp);
  }

  /** ERROR → RESET: forget the peer and every counter; the QP can be connected afresh. */
  reset(qp: QpCtx): void {
    qp.state = QpState.Reset;
    qp.flow = undefined;
    qp.flows.clear();
    qp.sq.clear();
    qp.rq.clear();
    qp.tx = 0;
    qp.rqConsumed = 0;
    qp.rdAtomic = 0;
    qp.fenceLo = Infinity;
    qp.fenceHi = -Infinity;
    qp.onConnected = undefined;
  }

  // ---- posting ------------------------------------------------------------------------------

  postRecv(qp: QpCtx, r: RecvCtx, now: number): void {
    this.#now = now;
    if (qp.state === QpState.Error) {
      this.#complete(qp, qp.recvCq, { wrId: r.wrId, status: WcStatus.WrFlushErr, opcode: WcOpcode.Recv, byteLen: 0, qpn: qp.qpn });
      return;
    }
    qp.rq.push(r);
    // A message waiting for a receive may now go on; the requester retries after its timer.
  }

  postSend(qp: QpCtx, w: WrCtx, now: number): void {
    this.#now = now;
    qp.sq.push(w);
    if (qp.state === QpState.Error) {
      w.done = true;
      w.status = WcStatus.WrFlushErr;
      this.#drainSq(qp);
      return;
    }
    this.#pump(qp);
  }

  // ---- receiving ----------------------------------------------------------------------------

  /** Process a batch of frames: one placement batch (or more if it overflows staging). */
  receive(batch: Inbound[], now: number): void {
    this.#now = now;
    let lastFrom: DeviceAddress | undefined;
    let lastKey = '';
    for (const { from, frame } of batch) {
      if (from !== lastFrom) {
        lastFrom = from;
        // addressKey sorts and joins the fields: ~1 µs, per batch on every hop of a ping-pong.
        // Links hand the same (read-only) address object for a peer again and again.
        let k = this.#keys.get(from);
        if (k === undefined) this.#keys.set(from, (k = addressKey(from)));
        lastKey = k;
      }
      try {
        switch (frame.kind) {
          case 'seg':
            this.#onSeg(from, lastKey, frame);
            break;
          case 'ack':
            this.#onAck(lastKey, frame.dstQpn, frame.srcQpn, frame.ssn);
            break;
          case 'rnr':
            this.#onRnr(lastKey, frame.dstQpn, frame.srcQpn, frame.ssn);
            break;
          case 'hello':
            this.#onHello(from, lastKey, frame.dstQpn, frame.srcQpn, frame.reply);
            break;
          default:
            this.counters.drops++;
        }
      } catch {
        // A frame we cannot make sense of is a counted drop, never an exception past the boundary.
        this.counters.drops++;
      }
    }
    this.#flushPlacement();
    for (const flow of this.#touched) {
      const qp = this.#touchedQp.get(flow)!;
      if (qp.state !== QpState.Error) this.#advance(qp, flow);
      if (flow.needAck && qp.state !== QpState.Error) {
        flow.needAck = false;
        this.#emit(flow, { kind: 'ack', srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn: flow.expected - 1 });
      }
    }
    this.#touched.clear();
    this.#touchedQp.clear();
  }

  nextDeadline(): number | undefined {
    if (this.#timers.some((x) => x.live && !x.live())) this.#timers = this.#timers.filter((x) => !x.live || x.live());
    let t: number | undefined;
    for (const x of this.#timers) if (t === undefined || x.at < t) t = x.at;
    return t;
  }

  tick(now: number): void {
    this.#now = now;
    const due = this.#timers.filter((t) => t.at <= now);
    if (due.length === 0) return;
    this.#timers = this.#timers.filter((t) => t.at > now);
    for (const t of due) t.run(now);
  }

  takeOutbox(): OutItem[] {
    const o = this.outbox;
    this.outbox = [];
    return o;
  }

  // ---- requester ----------------------------------------------------------------------------

  #flowFor(qp: QpCtx, w: WrCtx): Flow {
    return w.flow ?? qp.flow!;
  }

  srdFlow(qp: QpCtx, peer: DeviceAddress, rqpn: number, key = addressKey(peer)): Flow {
    const k = `${key}#${rqpn}`;
    let f = qp.flows.get(k);
    if (!f) {
      f = new Flow(peer, key, rqpn);
      qp.flows.set(k, f);
    }
    return f;
  }

  #pump(qp: QpCtx): void {
    while (qp.state === QpState.Rts && qp.tx < qp.sq.length) {
      const w = qp.sq.at(qp.tx)!;
      if (w.done) {
        qp.tx++;
        continue;
      }
      if ((w.kind === WrKind.Read || w.kind === WrKind.Atomic) && qp.rdAtomic >= qp.caps.maxRdAtomic) break;
      if (qp.type === 'rc' && w.ranges) {
        if (this.#fenced(qp, w)) break;
        this.#widenFence(qp, w);
      }
      this.#transmit(qp, w);
      qp.tx++;
    }
  }

  /**
   * An earlier, unfinished operation touches the same remote bytes (read/read excepted). A
   * bounding box of the remote ranges in flight answers the common case (streams of writes to
   * fresh addresses) without scanning; a scan also re-tightens the box.
   */
  #fenced(qp: QpCtx, w: WrCtx): boolean {
    let lo = Infinity;
    let hi = -Infinity;
    for (const b of w.ranges!) {
      if (b.len === 0) continue;
      lo = Math.min(lo, b.addr);
      hi = Math.max(hi, b.addr + b.len);
    }
    if (hi <= qp.fenceLo || lo >= qp.fenceHi) return false;
    let nlo = Infinity;
    let nhi = -Infinity;
    for (let i = 0; i < qp.tx; i++) {
      const e = qp.sq.at(i)!;
      if (e.done || !e.ranges) continue;
      for (const a of e.ranges) {
        if (a.len === 0) continue;
        if (a.addr < nlo) nlo = a.addr;
        if (a.addr + a.len > nhi) nhi = a.addr + a.len;
        if (e.kind === WrKind.Read && w.kind === WrKind.Read) continue;
        for (const b of w.ranges!) if (a.addr < b.addr + b.len && b.addr < a.addr + a.len) return true;
      }
    }
    qp.fenceLo = nlo;
    qp.fenceHi = nhi;
    return false;
  }

  #widenFence(qp: QpCtx, w: WrCtx): void {
    for (const b of w.ranges!) {
      if (b.len === 0) continue;
      if (b.addr < qp.fenceLo) qp.fenceLo = b.addr;
      if (b.addr + b.len > qp.fenceHi) qp.fenceHi = b.addr + b.len;
    }
  }

  #parts(w: WrCtx): Uint8Array[] {
    if (w.inline) return [w.inline];
    return w.pieces.map((p) => this.mem.view(p.rec, p.addr, p.len));
  }

  #transmit(qp: QpCtx, w: WrCtx): void {
    const flow = this.#flowFor(qp, w);
    this.#arm(qp, flow);
    const wr = w.wr;
    switch (wr.opcode) {
      case Opcode.Send:
      case Opcode.SendWithImm: {
        const frames: SegFrame[] = [];
        const ssn = flow.nextSsn++;
        const imm = wr.opcode === Opcode.SendWithImm;
        dataFrames({
          srcQpn: qp.qpn, dstQpn: flow.rqpn, mss: this.mss, ssn, tagged: false, opcode: imm ? RdmapOpcode.SendWithImm : RdmapOpcode.Send, qn: Qn.Send,
          msn: flow.sendMsn++, ulp: imm ? wr.imm! >>> 0 : 0, parts: this.#parts(w), total: w.total,
        }, frames);
        w.pending = 1;
        flow.inflight.set(ssn, { wr: w, frames, rnrWait: false });
        this.#emitAll(flow, frames);
        return;
      }
      case Opcode.RdmaWrite:
      case Opcode.RdmaWriteWithImm: {
        const frames: SegFrame[] = [];
        const ssn = flow.nextSsn++;
        dataFrames({ srcQpn: qp.qpn, dstQpn: flow.rqpn, mss: this.mss, ssn, tagged: true, opcode: RdmapOpcode.RdmaWrite, stag: wr.rkey! >>> 0, to: wr.remoteAddr!, parts: this.#parts(w), total: w.total }, frames);
        w.pending = 1;
        flow.inflight.set(ssn, { wr: w, rnrWait: false });
        this.#emitAll(flow, frames);
        if (wr.opcode === Opcode.RdmaWriteWithImm) {
          const s2 = flow.nextSsn++;
          const f = ctlFrame({
            srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn: s2, opcode: RdmapOpcode.ImmediateData, qn: Qn.Send, msn: flow.sendMsn++,
            bodyLen: 8, body: (b, o) => encodeImmediateData({ imm: wr.imm! >>> 0, len: w.total }, b, o),
          });
          w.pending = 2;
          flow.inflight.set(s2, { wr: w, frames: [f], rnrWait: false });
          this.#emitAll(flow, [f]);
        }
        return;
      }
      case Opcode.RdmaRead: {
        const srcs: ReadVEntry[] = wr.remoteSgList
          ? wr.remoteSgList.map((r) => ({ stag: r.rkey >>> 0, to: r.addr, len: r.length }))
          : [{ stag: wr.rkey! >>> 0, to: wr.remoteAddr!, len: w.total }];
        const sinks: ReadVEntry[] = w.pieces.length > 0
          ? w.pieces.map((p) => ({ stag: p.rec.stag, to: p.addr, len: p.len }))
          : [{ stag: 0, to: 0, len: 0 }];
        w.sinks = sinks;
        if (!flow.sabreExt) {
          this.#rfcReads(qp, flow, w, srcs, sinks);
          return;
        }
        const msn = flow.reqMsn++;
        const ssn = flow.nextSsn++;
        const v = { srcs, sinks };
        const f = ctlFrame({
          srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.ReadRequestV, qn: Qn.ReadRequest, msn,
          bodyLen: readRequestVLength(v), body: (b, o) => encodeReadRequestV(v, b, o),
        });
        flow.reads.set(msn, w);
        qp.rdAtomic++;
        flow.inflight.set(ssn, { wr: w, rnrWait: false });
        this.#emitAll(flow, [f]);
        return;
      }
      case Opcode.AtomicFetchAdd:
      case Opcode.AtomicCmpSwap: {
        const msn = flow.reqMsn++;
        const ssn = flow.nextSsn++;
        const fetchAdd = wr.opcode === Opcode.AtomicFetchAdd;
        const f = ctlFrame({
          srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.AtomicRequest, qn: Qn.AtomicRequest, msn, bodyLen: 52,
          body: (b, o) => encodeAtomicRequest({
            op: fetchAdd ? 'fetchAdd' : 'cmpSwap', reqId: msn, stag: wr.rkey! >>> 0, to: wr.remoteAddr!,
            addOrSwap: BigInt.asUintN(64, fetchAdd ? wr.compareAdd! : wr.swap!), addOrSwapMask: M64,
            compare: fetchAdd ? 0n : BigInt.asUintN(64, wr.compareAdd!), compareMask: M64,
          }, b, o),
        });
        flow.atomics.set(msn, w);
        qp.rdAtomic++;
        flow.inflight.set(ssn, { wr: w, rnrWait: false });
        this.#emitAll(flow, [f]);
        return;
      }
    }
  }

  /** A read to a standard iWARP peer: RFC 5040 Read Requests (one sink STag/TO and one source each). */
  #rfcReads(qp: QpCtx, flow: Flow, w: WrCtx, srcs: ReadVEntry[], sinks: ReadVEntry[]): void {
    const reqs: ReadRequest[] = [];
    let si = 0;
    let so = 0;
    for (const s of srcs) {
      let off = 0;
      while (off < s.len && si < sinks.length) {
        const k = sinks[si]!;
        const take = Math.min(s.len - off, k.len - so);
        const last = reqs[reqs.length - 1];
        if (last && last.srcStag === s.stag && last.srcTo + last.size === s.to + off && last.sinkStag === k.stag && last.sinkTo + last.size === k.to + so) last.size += take;
        else if (take > 0) reqs.push({ srcStag: s.stag, srcTo: s.to + off, sinkStag: k.stag, sinkTo: k.to + so, size: take });
        off += take;
        so += take;
        if (so >= k.len) {
          si++;
          so = 0;
        }
      }
    }
    // A zero-length read is one zero-length request (answered by one empty Read Response).
    if (reqs.length === 0) reqs.push({ srcStag: srcs[0]!.stag, srcTo: srcs[0]!.to, sinkStag: sinks[0]!.stag, sinkTo: sinks[0]!.to, size: 0 });
    w.readParts = reqs.length;
    const frames: SegFrame[] = [];
    let key = -1;
    for (const r of reqs) {
      const msn = flow.reqMsn++;
      if (key < 0) key = msn;
      const ssn = flow.nextSsn++;
      frames.push(ctlFrame({
        srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.ReadRequest, qn: Qn.ReadRequest, msn,
        bodyLen: 28, body: (b, o) => encodeReadRequest(r, b, o),
      }));
      flow.inflight.set(ssn, { wr: w, rnrWait: false });
    }
    flow.reads.set(key, w);
    qp.rdAtomic++;
    this.#emitAll(flow, frames);
  }

  /** A standard peer's Read Response message (all its segments, L last) is complete: it answers the oldest read's next request. */
  #rfcReadResponse(qp: QpCtx, flow: Flow, m: InMsg): void {
    const first = flow.reads.entries().next();
    if (first.done) return this.#fatalNow(qp, flow, m, Term.invalidRequest);
    const [key, w] = first.value;
    if (--w.readParts! > 0) return;
    flow.reads.delete(key);
    qp.rdAtomic--;
    if (!w.done) {
      w.done = true;
      w.status = WcStatus.Success;
      w.byteLen = w.total;
    }
    this.#drainSq(qp);
    this.#pump(qp);
  }

  #onAck(key: string, qpn: number, rqpn: number, ssn: number): void {
    const qp = this.qps.get(qpn);
    if (!qp || qp.state === QpState.Error) return;
    const flow = this.#findFlow(qp, key, rqpn);
    if (!flow) return;
    flow.lastHeard = this.#now;
    this.#applyAck(qp, flow, ssn);
    this.#drainSq(qp);
    this.#pump(qp);
  }

  #applyAck(qp: QpCtx, flow: Flow, ssn: number): void {
    if (!(ssn > flow.acked) || ssn >= flow.nextSsn) return;
    for (let s = flow.acked + 1; s <= ssn; s++) {
      const m = flow.inflight.get(s);
      if (!m) continue;
      flow.inflight.delete(s);
      const w = m.wr;
      if (w && (w.kind === WrKind.Send || w.kind === WrKind.Write) && --w.pending === 0 && !w.done) {
        w.done = true;
        w.status = WcStatus.Success;
        w.byteLen = w.total;
      }
    }
    flow.acked = ssn;
  }

  #onRnr(key: string, qpn: number, rqpn: number, ssn: number): void {
    const qp = this.qps.get(qpn);
    if (!qp || qp.state === QpState.Error) return;
    const flow = this.#findFlow(qp, key, rqpn);
    if (flow) flow.lastHeard = this.#now;
    const m = flow?.inflight.get(ssn);
    if (!flow || !m || !m.frames || !m.wr || m.rnrWait) return;
    const w = m.wr;
    if (++w.rnrCount > qp.caps.rnrRetry) {
      this.#qpError(qp, w, WcStatus.RnrRetryExcErr);
      return;
    }
    m.rnrWait = true;
    this.#timers.push({
      at: this.#now + qp.caps.rnrTimeoutMs,
      run: () => {
        if (qp.state !== QpState.Rts || flow.inflight.get(ssn) !== m) return;
        m.rnrWait = false;
        this.counters.rnrRetries++;
        this.#emitAll(flow, m.frames!);
      },
    });
  }

  #onHello(from: DeviceAddress, key: string, qpn: number, rqpn: number, reply: boolean): void {
    const qp = this.qps.get(qpn);
    if (!qp || qp.type !== 'rc' || !qp.flow) return;
    const flow = qp.flow;
    if (flow.peerKey !== key || flow.rqpn !== rqpn) return;
    if (!reply) this.#emit(flow, { kind: 'hello', srcQpn: qp.qpn, dstQpn: rqpn, reply: true });
    if (qp.state === QpState.Rtr) {
      qp.state = QpState.Rts;
      qp.onConnected?.();
      this.#pump(qp);
    }
    void from;
  }

  #drainSq(qp: QpCtx): void {
    while (qp.sq.length > 0 && qp.sq.at(0)!.done) {
      const w = qp.sq.shift()!;
      if (qp.tx > 0) qp.tx--;
      if (w.signaled || w.status !== WcStatus.Success) {
        this.#complete(qp, qp.sendCq, {
          wrId: w.wr.wrId, status: w.status, opcode: wcOpcodeOf(w.wr.opcode),
          byteLen: w.status === WcStatus.Success ? w.byteLen : 0, qpn: qp.qpn,
        });
      }
    }
  }

  // ---- responder: arrival and placement -----------------------------------------------------

  #findFlow(qp: QpCtx, key: string, rqpn: number): Flow | undefined {
    if (qp.type === 'rc') {
      const f = qp.flow;
      return f && f.peerKey === key && f.rqpn === rqpn ? f : undefined;
    }
    return qp.flows.get(`${key}#${rqpn}`);
  }

  #onSeg(from: DeviceAddress, key: string, f: SegFrame): void {
    const env = f.env;
    const qp = this.qps.get(env.dstQpn);
    if (!qp || !(qp.state === QpState.Rtr || qp.state === QpState.Rts)) {
      this.counters.drops++;
      return;
    }
    const flow = qp.type === 'rc' ? this.#findFlow(qp, key, env.srcQpn) : this.srdFlow(qp, from, env.srcQpn, key);
    if (!flow) {
      this.counters.drops++;
      return;
    }
    flow.lastHeard = this.#now;
    if (!Number.isSafeInteger(env.ssn) || env.ssn < flow.expected) {
      // Already completed: a stale copy must never be placed again (a later write may have won).
      this.counters.duplicates++;
      flow.needAck = true;
      this.#touch(qp, flow);
      return;
    }
    // msgLen -1: not known yet. A byte-exact stream (TCP) learns a message's length only from the
    // segment with the DDP L flag; the transport then passes msgLen on that segment.
    if (env.ssn >= flow.expected + SSN_WINDOW || !(env.msgLen >= -1 && env.msgLen <= 0xffff_ffff) || !(env.off >= 0)) {
      this.counters.drops++;
      return;
    }
    if (env.ack !== undefined) this.#applyAck(qp, flow, env.ack);
    this.#touch(qp, flow);
    let m = flow.pending.get(env.ssn);
    if (m && env.ack !== undefined) m.ackHint = env.ack;
    const hdr = f.hdr;
    const d = decodeDdp(hdr, 0, hdr.length);
    let plen = hdr.length - (d.ok ? d.length : hdr.length);
    for (const p of f.payload) plen += p.length;
    if (!m) {
      m = {
        ssn: env.ssn, msgLen: env.msgLen, got: 0, offs: new Offsets(), seen: false, opcode: d.ok ? d.value.opcode : -1,
        msn: 0, ulp: 0, hdrLen: 0, segLen: 0, rnrArmed: false, ...(env.ack !== undefined ? { ackHint: env.ack } : {}),
      };
      flow.pending.set(env.ssn, m);
    }
    if (m.fail) return;
    if (!d.ok) {
      this.#failMsg(m, hdr, plen, d.error === 'BAD_OPCODE' ? Term.badOpcode : Term.invalidRequest);
      return;
    }
    const h = d.value;
    if (!m.seen) {
      m.seen = true;
      m.opcode = h.opcode;
      m.hdr = hdr.slice(0, d.length);
      m.hdrLen = d.length;
      m.segLen = plen;
      if (!h.tagged) {
        m.msn = h.msn;
        m.ulp = h.ulp;
      }
    } else if (h.opcode !== m.opcode || (env.msgLen >= 0 && m.msgLen >= 0 && env.msgLen !== m.msgLen)) {
      this.#failMsg(m, hdr, plen, Term.invalidRequest);
      return;
    }
    if (m.msgLen < 0 && env.msgLen >= 0) m.msgLen = env.msgLen;
    if (env.off + plen > (m.msgLen >= 0 ? m.msgLen : 0xffff_ffff) || (!h.tagged && h.mo !== env.off)) {
      this.#failMsg(m, hdr, plen, h.tagged ? Term.baseBounds : Term.invalidMo);
      return;
    }
    if (m.offs.has(env.off)) {
      this.counters.duplicates++;
      if (h.opcode === RdmapOpcode.ImmediateData) m.rnrArmed = true;
      return;
    }
    switch (h.opcode) {
      case RdmapOpcode.RdmaWrite:
        if (!h.tagged) return this.#failMsg(m, hdr, plen, Term.badOpcode);
        this.#placeTagged(qp, flow, m, f, h, plen, Access.RemoteWrite);
        return;
      case RdmapOpcode.ReadResponse: {
        if (!h.tagged) return this.#failMsg(m, hdr, plen, Term.badOpcode);
        if (!this.#isReadSink(flow, h.stag, h.to, plen)) {
          this.#failMsg(m, hdr, plen, Term.invalidStag, WcStatus.LocProtErr);
          return;
        }
        if (plen === 0) {
          // The answer to a zero-length RFC Read Request: nothing to place.
          m.offs.add(env.off);
          return;
        }
        this.#placeTagged(qp, flow, m, f, h, plen, Access.LocalWrite);
        return;
      }
      case RdmapOpcode.Send:
      case RdmapOpcode.SendWithImm:
        if (h.tagged || h.qn !== Qn.Send) return this.#failMsg(m, hdr, plen, Term.invalidQn);
        this.#placeSend(qp, flow, m, f, plen);
        return;
      case RdmapOpcode.ImmediateData:
      case RdmapOpcode.ReadRequest:
      case RdmapOpcode.ReadRequestV:
      case RdmapOpcode.AtomicRequest:
      case RdmapOpcode.AtomicResponse:
      case RdmapOpcode.ReadComplete:
      case RdmapOpcode.Terminate: {
        if (f.payload.length > 0 || env.off !== 0) return this.#failMsg(m, hdr, plen, Term.invalidRequest);
        m.ctl = hdr.slice(d.length);
        m.offs.add(0);
        m.got = plen;
        if (h.opcode === RdmapOpcode.ImmediateData) m.rnrArmed = true;
        return;
      }
      default:
        this.#failMsg(m, hdr, plen, Term.badOpcode);
    }
  }

  #touch(qp: QpCtx, flow: Flow): void {
    this.#touched.add(flow);
    this.#touchedQp.set(flow, qp);
  }

  #failMsg(m: InMsg, hdr: Uint8Array, plen: number, term: TermCode, local?: WcStatusValue): void {
    if (m.fail) return;
    m.fail = { term, ...(local !== undefined ? { local } : {}) };
    const d = decodeDdp(hdr, 0, hdr.length);
    m.hdr = hdr.slice(0, d.ok ? d.length : 0);
    m.segLen = plen;
  }

  #isReadSink(flow: Flow, stag: number, to: number, len: number): boolean {
    for (const w of flow.reads.values()) {
      for (const s of w.sinks!) if (s.stag === stag && to >= s.to && to + len <= s.to + s.len) return true;
    }
    return false;
  }

  #stageSeg(f: SegFrame, plen: number, ndesc: number): number {
    const at = this.mem.inDevice(f.payload);
    if (at >= 0) {
      if (!this.mem.hasRoom(0) || this.mem.count + ndesc > 1024) this.#flushPlacement();
      return at;
    }
    if (!this.mem.hasRoom(plen) || this.mem.count + ndesc > 1024) this.#flushPlacement();
    this.counters.stagedBytes += plen;
    return this.mem.stage(f.payload, plen);
  }

  #placeTagged(qp: QpCtx, flow: Flow, m: InMsg, f: SegFrame, h: TaggedHdr, plen: number, access: number): void {
    if (f.hdr.length !== m.hdrLen) return this.#failMsg(m, f.hdr, plen, Term.invalidRequest);
    const src = this.#stageSeg(f, plen, 1);
    const seg: SegCtx = { qp, flow, m, off: f.env.off, len: plen, remaining: 1, bad: 0, recvLocal: false, opcode: h.opcode };
    this.mem.addDesc(src, plen, h.stag, qp.pd, h.to, access, this.#descs.length);
    this.#descs.push({ seg, stag: h.stag, to: h.to, len: plen });
  }

  #recvFor(qp: QpCtx, m: InMsg): RecvCtx | undefined | null {
    if (m.recv) return m.recv;
    if (qp.type === 'rc') {
      const idx = m.msn - 1 - qp.rqConsumed;
      if (idx < 0) return null;
      return qp.rq.at(idx);
    }
    const r = qp.rq.find((x) => !x.claimed);
    if (r) {
      r.claimed = true;
      m.recv = r;
    }
    return r;
  }

  #placeSend(qp: QpCtx, flow: Flow, m: InMsg, f: SegFrame, plen: number): void {
    const r = this.#recvFor(qp, m);
    if (r === null) return this.#failMsg(m, f.hdr, plen, Term.invalidMsn);
    if (r === undefined) {
      m.rnrArmed = true;
      return;
    }
    if ((m.msgLen >= 0 ? m.msgLen : f.env.off + plen) > r.total) return this.#failMsg(m, f.hdr, plen, Term.messageTooLong, WcStatus.LocLenErr);
    // Cut the segment along the receive's scatter list: one descriptor per piece touched.
    const off = f.env.off;
    const pieces: { p: Piece; at: number; n: number }[] = [];
    let pos = 0;
    let need = plen;
    let cur = off;
    for (const p of r.pieces) {
      if (need === 0) break;
      if (cur < pos + p.len) {
        const at = cur - pos;
        const n = Math.min(p.len - at, need);
        pieces.push({ p, at, n });
        cur += n;
        need -= n;
      }
      pos += p.len;
    }
    const src = this.#stageSeg(f, plen, Math.max(1, pieces.length));
    const seg: SegCtx = { qp, flow, m, off, len: plen, remaining: pieces.length, bad: 0, recvLocal: true, opcode: m.opcode };
    if (pieces.length === 0) {
      this.#segDone(seg);
      return;
    }
    let s = src;
    for (const { p, at, n } of pieces) {
      this.mem.addDesc(s, n, p.rec.stag, qp.pd, p.addr + at, Access.LocalWrite, this.#descs.length);
      this.#descs.push({ seg, stag: p.rec.stag, to: p.addr + at, len: n });
      s += n;
    }
  }

  /** One place() call; then the amended records are consumed (M3). */
  #flushPlacement(): void {
    const mem = this.mem;
    const n = mem.run();
    if (n > 0) this.counters.placeBatches++;
    const u8 = n > 0 ? mem.dm.u8() : undefined;
    for (let i = 0; i < n; i++) {
      const dc = this.#descs[mem.outTag(i)]!;
      const st = mem.outStatus(i);
      if (st === PlaceStatus.Placed) {
        this.counters.directSegments++;
        this.counters.directBytes += dc.len;
      } else if (st === PlaceStatus.Indirect) {
        const rec = mem.lookup(dc.stag);
        if (rec?.ext) {
          const src = mem.descSrc(i);
          rec.ext.set(u8!.subarray(src, src + dc.len), dc.to - rec.addr);
          this.counters.indirectSegments++;
          this.counters.indirectBytes += dc.len;
        } else dc.seg.bad = PlaceStatus.InvalidStag;
      } else if (!dc.seg.bad) dc.seg.bad = st;
      if (--dc.seg.remaining === 0) this.#segDone(dc.seg);
    }
    this.#descs = [];
    mem.reset();
  }

  #segDone(seg: SegCtx): void {
    const m = seg.m;
    if (m.fail) return;
    if (seg.bad) {
      const hdr = m.hdr ?? new Uint8Array(0);
      if (seg.recvLocal) this.#failMsg(m, hdr, seg.len, Term.catastrophic, WcStatus.LocProtErr);
      else if (seg.opcode === RdmapOpcode.ReadResponse) this.#failMsg(m, hdr, seg.len, termForPlaceStatus(seg.bad), WcStatus.LocProtErr);
      else this.#failMsg(m, hdr, seg.len, termForPlaceStatus(seg.bad));
      return;
    }
    if (m.offs.has(seg.off)) return;
    m.offs.add(seg.off);
    m.got += seg.len;
  }

  // ---- responder: in-order completion -------------------------------------------------------

  #advance(qp: QpCtx, flow: Flow): void {
    for (;;) {
      const m = flow.pending.get(flow.expected);
      if (!m) return;
      if (m.fail) {
        this.#fatal(qp, flow, m);
        return;
      }
      const complete = m.seen && m.got === m.msgLen;
      const needsRecv = m.opcode === RdmapOpcode.Send || m.opcode === RdmapOpcode.SendWithImm || m.opcode === RdmapOpcode.ImmediateData;
      if (m.opcode === RdmapOpcode.ImmediateData && complete) {
        const r = this.#recvFor(qp, m);
        if (r === null) {
          this.#failMsg(m, m.hdr ?? new Uint8Array(0), 0, Term.invalidMsn);
          continue;
        }
        if (!r) {
          if (m.rnrArmed) this.#nakRnr(qp, flow, m);
          return;
        }
      } else if (needsRecv && !complete && m.rnrArmed) {
        // Segments were dropped for want of a receive: they come again after the requester's RNR timer.
        this.#nakRnr(qp, flow, m);
        return;
      }
      if (!complete) return;
      flow.pending.delete(flow.expected);
      flow.expected++;
      flow.needAck = true;
      this.#execute(qp, flow, m);
      if (qp.state === QpState.Error) return;
    }
  }

  #nakRnr(qp: QpCtx, flow: Flow, m: InMsg): void {
    m.rnrArmed = false;
    this.counters.rnrNaksSent++;
    this.#emit(flow, { kind: 'rnr', srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn: m.ssn });
  }

  #execute(qp: QpCtx, flow: Flow, m: InMsg): void {
    switch (m.opcode) {
      case RdmapOpcode.RdmaWrite:
        return;
      case RdmapOpcode.ReadResponse:
        if (!flow.sabreExt) this.#rfcReadResponse(qp, flow, m);
        return;
      case RdmapOpcode.Send:
      case RdmapOpcode.SendWithImm: {
        const r = this.#takeRecv(qp, m);
        const wc: WorkCompletion = { wrId: r.wrId, status: WcStatus.Success, opcode: WcOpcode.Recv, byteLen: m.msgLen, qpn: qp.qpn };
        if (m.opcode === RdmapOpcode.SendWithImm) wc.imm = m.ulp >>> 0;
        if (qp.type === 'srd') wc.srcQpn = flow.rqpn;
        this.#complete(qp, qp.recvCq, wc);
        return;
      }
      case RdmapOpcode.ImmediateData: {
        const v = decodeImmediateData(m.ctl!, 0, m.ctl!.length);
        if (!v.ok) return this.#fatalNow(qp, flow, m, Term.invalidRequest);
        const r = this.#takeRecv(qp, m);
        const wc: WorkCompletion = { wrId: r.wrId, status: WcStatus.Success, opcode: WcOpcode.RecvRdmaWithImm, byteLen: v.value.len, imm: v.value.imm >>> 0, qpn: qp.qpn };
        if (qp.type === 'srd') wc.srcQpn = flow.rqpn;
        this.#complete(qp, qp.recvCq, wc);
        return;
      }
      case RdmapOpcode.ReadRequestV:
      case RdmapOpcode.ReadRequest: {
        let srcs: ReadVEntry[], sinks: ReadVEntry[];
        if (m.opcode === RdmapOpcode.ReadRequestV) {
          const v = decodeReadRequestV(m.ctl!, 0, m.ctl!.length);
          if (!v.ok) return this.#fatalNow(qp, flow, m, Term.invalidRequest);
          ({ srcs, sinks } = v.value);
        } else {
          const v = decodeReadRequest(m.ctl!, 0, m.ctl!.length);
          if (!v.ok) return this.#fatalNow(qp, flow, m, Term.invalidRequest);
          srcs = [{ stag: v.value.srcStag, to: v.value.srcTo, len: v.value.size }];
          sinks = [{ stag: v.value.sinkStag, to: v.value.sinkTo, len: v.value.size }];
        }
        this.#answerRead(qp, flow, m, srcs, sinks);
        return;
      }
      case RdmapOpcode.AtomicRequest:
        this.#answerAtomic(qp, flow, m);
        return;
      case RdmapOpcode.ReadComplete: {
        const v = decodeReadComplete(m.ctl!, 0, m.ctl!.length);
        const w = v.ok ? flow.reads.get(v.value.imm) : undefined;
        if (!w) return this.#fatalNow(qp, flow, m, Term.invalidRequest);
        flow.reads.delete(v.ok ? v.value.imm : 0);
        qp.rdAtomic--;
        if (!w.done) {
          w.done = true;
          w.status = WcStatus.Success;
          w.byteLen = w.total;
        }
        this.#drainSq(qp);
        this.#pump(qp);
        return;
      }
      case RdmapOpcode.AtomicResponse: {
        const v = decodeAtomicResponse(m.ctl!, 0, m.ctl!.length);
        const w = v.ok ? flow.atomics.get(v.value.reqId) : undefined;
        if (!v.ok || !w) return this.#fatalNow(qp, flow, m, Term.invalidRequest);
        flow.atomics.delete(v.value.reqId);
        qp.rdAtomic--;
        const p = w.pieces[0]!;
        if (this.mem.lookup(p.rec.stag) === p.rec) {
          const dst = this.mem.view(p.rec, p.addr, 8);
          new DataView(dst.buffer, dst.byteOffset, 8).setBigUint64(0, v.value.value, true);
          w.status = WcStatus.Success;
          w.byteLen = 8;
        } else w.status = WcStatus.LocProtErr;
        w.done = true;
        if (w.status !== WcStatus.Success) return this.#qpError(qp, w, w.status);
        this.#drainSq(qp);
        this.#pump(qp);
        return;
      }
      case RdmapOpcode.Terminate: {
        this.counters.terminatesReceived++;
        const v = decodeTerminate(m.ctl!, 0, m.ctl!.length);
        // Without the sender's ack (a standard iWARP peer's Terminate carries none) the oldest
        // unfinished work request is the one that failed.
        const failed = m.ackHint !== undefined ? flow.inflight.get(m.ackHint + 1)?.wr : qp.sq.find((w) => !w.done);
        const status = v.ok ? statusForTerm(v.value) : WcStatus.RemOpErr;
        this.#qpError(qp, failed, status);
        return;
      }
    }
  }

  #takeRecv(qp: QpCtx, m: InMsg): RecvCtx {
    const r = this.#recvFor(qp, m)!;
    // rc takes receives in posting order: the head.
    if (qp.rq.at(0) === r) qp.rq.shift();
    else qp.rq.removeAt(qp.rq.indexOf(r));
    if (qp.type === 'rc') qp.rqConsumed++;
    return r;
  }

  #answerRead(qp: QpCtx, flow: Flow, m: InMsg, srcs: ReadVEntry[], sinks: ReadVEntry[]): void {
    const views: Uint8Array[] = [];
    let total = 0;
    for (const s of srcs) {
      const st = this.mem.check(s.stag, qp.pd, s.to, s.len, Access.RemoteRead);
      if (st !== PlaceStatus.Placed) return this.#fatalNow(qp, flow, m, termForPlaceStatus(st));
      if (s.len > 0) views.push(this.mem.view(this.mem.lookup(s.stag)!, s.to, s.len));
      total += s.len;
    }
    // Tagged writes straight from the source regions into the sinks: one message per sink.
    let vi = 0;
    let vo = 0;
    const frames: SegFrame[] = [];
    if (!flow.sabreExt && total === 0) {
      // A standard requester completes its read on the Read Response with L: send one, empty.
      const ssn = flow.nextSsn++;
      dataFrames({ srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, tagged: true, opcode: RdmapOpcode.ReadResponse, stag: sinks[0]!.stag, to: sinks[0]!.to, parts: [], total: 0, mss: this.mss }, frames);
      flow.inflight.set(ssn, { rnrWait: false });
    }
    for (const k of sinks) {
      if (k.len === 0) continue;
      const parts: Uint8Array[] = [];
      let need = k.len;
      while (need > 0) {
        const v = views[vi]!;
        const take = Math.min(need, v.length - vo);
        parts.push(v.subarray(vo, vo + take));
        vo += take;
        need -= take;
        if (vo === v.length) {
          vi++;
          vo = 0;
        }
      }
      const ssn = flow.nextSsn++;
      dataFrames({ srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, tagged: true, opcode: RdmapOpcode.ReadResponse, stag: k.stag, to: k.to, parts, total: k.len, mss: this.mss }, frames);
      flow.inflight.set(ssn, { rnrWait: false });
    }
    if (!flow.sabreExt) {
      // RFC 5040: Read Responses are the whole answer; ReadComplete is sabre's.
      this.#emitAll(flow, frames);
      return;
    }
    const ssn = flow.nextSsn++;
    frames.push(ctlFrame({
      srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.ReadComplete, qn: Qn.Send, msn: m.msn, bodyLen: 8,
      body: (b, o) => encodeReadComplete({ imm: m.msn, len: total }, b, o),
    }));
    flow.inflight.set(ssn, { rnrWait: false });
    this.#emitAll(flow, frames);
  }

  #answerAtomic(qp: QpCtx, flow: Flow, m: InMsg): void {
    const v = decodeAtomicRequest(m.ctl!, 0, m.ctl!.length);
    if (!v.ok) return this.#fatalNow(qp, flow, m, Term.invalidRequest);
    const a = v.value;
    const st = this.mem.check(a.stag, qp.pd, a.to, 8, Access.RemoteAtomic);
    if (st !== PlaceStatus.Placed) return this.#fatalNow(qp, flow, m, termForPlaceStatus(st));
    if (a.to % 8 !== 0) return this.#fatalNow(qp, flow, m, Term.invalidRequest);
    const rec = this.mem.lookup(a.stag)!;
    const bytes = this.mem.view(rec, a.to, 8);
    const dv = new DataView(bytes.buffer, bytes.byteOffset, 8);
    const old = dv.getBigUint64(0, true);
    if (a.op === 'fetchAdd') dv.setBigUint64(0, (old + a.addOrSwap) & M64, true);
    else if (old === a.compare) dv.setBigUint64(0, a.addOrSwap, true);
    const ssn = flow.nextSsn++;
    const f = ctlFrame({
      srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.AtomicResponse, qn: Qn.AtomicResponse, msn: flow.respMsn++,
      bodyLen: 12, body: (b, o) => encodeAtomicResponse({ reqId: a.reqId, value: old }, b, o),
    });
    flow.inflight.set(ssn, { rnrWait: false });
    this.#emitAll(flow, [f]);
  }

  /** A message already taken off the ordering queue failed while executing. */
  #fatalNow(qp: QpCtx, flow: Flow, m: InMsg, term: TermCode): void {
    m.fail = { term };
    this.#fatal(qp, flow, m);
  }

  /** Protocol error on message m: Terminate to the peer (acking everything before m), local completions, ERROR. */
  #fatal(qp: QpCtx, flow: Flow, m: InMsg): void {
    const fail = m.fail!;
    const hdr = m.hdr ?? new Uint8Array(0);
    let copy: Uint8Array | undefined;
    if (hdr.length === 14 || hdr.length === 18) {
      copy = new Uint8Array(2 + hdr.length);
      copy[0] = (m.segLen >>> 8) & 0xff;
      copy[1] = m.segLen & 0xff;
      copy.set(hdr, 2);
    }
    const ssn = flow.nextSsn++;
    this.#emit(flow, ctlFrame({
      srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.Terminate, qn: Qn.Terminate, msn: flow.termMsn++,
      bodyLen: 4 + (copy ? copy.length : 0), ack: m.ssn - 1,
      body: (b, o) => encodeTerminate({ ...fail.term, m: !!copy, d: !!copy, ...(copy ? { hdrCopy: copy } : {}) }, b, o),
    }));
    this.counters.terminatesSent++;
    // Local side: a receive that took the bad message, or our own read whose response was bad.
    if (fail.local !== undefined) {
      if (m.opcode === RdmapOpcode.ReadResponse) {
        // The oldest outstanding read is the one whose answer went wrong (responses come in order).
        const w = flow.reads.values().next().value;
        if (w) {
          this.#qpError(qp, w, fail.local);
          return;
        }
      } else if (m.recv || qp.type === 'rc') {
        const r = m.recv ?? (qp.type === 'rc' ? qp.rq.at(m.msn - 1 - qp.rqConsumed) : undefined);
        if (r) {
          qp.rq.removeAt(qp.rq.indexOf(r));
          this.#complete(qp, qp.recvCq, { wrId: r.wrId, status: fail.local, opcode: WcOpcode.Recv, byteLen: 0, qpn: qp.qpn });
        }
      }
    }
    this.#qpError(qp);
  }

  // ---- errors and completions ---------------------------------------------------------------

  #qpError(qp: QpCtx, failing?: WrCtx, status?: WcStatusValue): void {
    if (qp.state === QpState.Error) return;
    qp.state = QpState.Error;
    for (const w of qp.sq) {
      if (w.done) continue;
      w.done = true;
      w.status = w === failing && status !== undefined ? status : WcStatus.WrFlushErr;
    }
    for (const f of qp.flows.values()) {
      f.inflight.clear();
      f.reads.clear();
      f.atomics.clear();
      f.pending.clear();
    }
    qp.rdAtomic = 0;
    this.#drainSq(qp);
    const rq = qp.rq.takeAll();
    for (const r of rq) this.#complete(qp, qp.recvCq, { wrId: r.wrId, status: WcStatus.WrFlushErr, opcode: WcOpcode.Recv, byteLen: 0, qpn: qp.qpn });
    qp.onError?.();
  }

  #complete(qp: QpCtx, cq: CompletionSink, wc: WorkCompletion): void {
    if (cq.push(wc)) return;
    // CQ overrun (ibverbs: a catastrophic CQ error): every QP feeding this CQ goes to ERROR.
    if (this.#overrun.has(cq)) return;
    this.#overrun.add(cq);
    for (const q of this.qps.values()) if (q.sendCq === cq || q.recvCq === cq) this.#qpError(q);
    void qp;
  }

  #emit(flow: Flow, frame: Frame): void {
    this.outbox.push({ to: flow.peer, frame });
  }

  #emitAll(flow: Flow, frames: Frame[]): void {
    for (const f of frames) this.outbox.push({ to: flow.peer, frame: f });
  }
}

export function wcOpcodeOf(op: number): WcOpcodeValue {
  switch (op) {
    case Opcode.Send:
    case Opcode.SendWithImm:
      return WcOpcode.Send;
    case Opcode.RdmaWrite:
    case Opcode.RdmaWriteWithImm:
      return WcOpcode.RdmaWrite;
    case Opcode.RdmaRead:
      return WcOpcode.RdmaRead;
    case Opcode.AtomicFetchAdd:
      return WcOpcode.FetchAdd;
    default:
      return WcOpcode.CmpSwap;
  }
}
