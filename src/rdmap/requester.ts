// The requester: posted send work requests become RDMAP messages in posting order (with the rc
// fence and the read/atomic depth), acks and RNR NAKs come back, and the watchdog notices a peer
// that stopped answering. Builds follow the opcode table's `build` (opcodes.ts).
//
// rc fence: a Read or atomic whose remote range overlaps an earlier unfinished operation of the
// same QP, or a Write overlapping an earlier unfinished Read or atomic, waits until that one is
// complete (one round trip, only when ranges overlap): a read sees every earlier write, and a
// write never changes what an earlier read or atomic returns. Writes after writes do not wait:
// a stream of writes to one buffer would go one per round trip. The responder keeps "a later
// write to the same bytes wins" instead, when the link reorders segments (arrival.ts clips an
// earlier write's late segment around what later writes placed).
import { addressKey, type DeviceAddress, sourceKey } from '../core/address.js';
import { QpState, WcOpcode, WcStatus, type WcStatusValue } from '../core/enums.js';
import { DEVICE_QPN, type Frame, type SegFrame } from '../core/frame.js';
import { GatherCursor } from '../core/gather.js';
import {
  encodeAtomicRequest, encodeImmediateData, encodeReadRequest, encodeReadRequestV, Qn, RdmapOpcode,
  type ReadRequest, type ReadVEntry, readRequestVLength,
} from '../wire/rdmap.js';
import { drainSq, finish, qpError } from './completion.js';
import { flowGone, flowMade, heardNotReady, watchdogHeard } from './not-ready.js';
import { WrKind } from './opcodes.js';
import { releaseFlow } from './budget.js';
import { hostFlowCap } from './bounds.js';
import { ctlFrame, dataFrame, dataFrames, type DataMsg, immediateFrame } from './segmenter.js';
import { Epoch, EPOCH_MASK, epochCheck, letAnswersGo, nextEpoch, outFromOne, outIdle, restart, stamp } from './srd-epoch.js';
import { type EngineQp, type EngineState, Flow, type InMessage, type OutMessage, type SendWork } from './state.js';

const M64 = (1n << 64n) - 1n;
const entryLength = (e: ReadVEntry): number => e.len;

// ---- flows and the outbox ---------------------------------------------------------------------

export const flowKey = (peerKey: string, rqpn: number): string => `${peerKey}#${rqpn}`;

/**
 * srd: the flow to (peer, rqpn), made on first use — by our own work requests, so never refused
 * — in epoch 0, or the epoch of the peer's segment that made it (srd-epoch.ts).
 */
export function srdFlow(e: EngineState, qp: EngineQp, peer: DeviceAddress, rqpn: number, key = addressKey(peer), epoch = 0): Flow {
  const k = flowKey(key, rqpn);
  let f = qp.flows.get(k);
  if (!f) {
    f = new Flow(peer, key, rqpn, e.now);
    f.srd = true;
    f.answers = qp.answers;
    f.epoch = epoch & EPOCH_MASK;
    f.source = sourceKey(peer);
    qp.ownFlows().set(k, f);
    bump(qp.ownPeerFlows(), key, 1);
    bump(qp.ownHostFlows(), f.source, 1);
    flowMade(e, f);
  }
  return f;
}

/**
 * srd: the flow a segment from (peer, rqpn) belongs to, made if the QP has room for it
 * (bounds.ts: per QP, per peer address and per source host — hostFlowCap; at a cap the oldest
 * idle flow under it goes, if there is one). undefined: refused and counted.
 */
export function srdFlowIn(e: EngineState, qp: EngineQp, peer: DeviceAddress, rqpn: number, key: string, epoch = 0): Flow | undefined {
  const f = qp.flows.get(flowKey(key, rqpn));
  if (f) return f;
  const b = e.bounds;
  const src = sourceKey(peer);
  if (
    ((qp.peerFlows.get(key) ?? 0) >= b.maxSrdFlowsPerPeer && !evictIdle(e, qp, (x) => x.peerKey === key))
    || ((qp.hostFlows.get(src) ?? 0) >= hostFlowCap(b) && !evictIdle(e, qp, (x) => x.source === src))
    || (qp.flows.size >= b.maxSrdFlows && !evictIdle(e, qp))
  ) {
    e.counters.srdFlowsRefused++;
    return undefined;
  }
  return srdFlow(e, qp, peer, rqpn, key, epoch);
}

/**
 * Evict the oldest srd flow (of those `under` a cap, or any) with nothing in flight either way
 * and idle both ways for 2×srdIdleMs (both ends restart such a flow at ssn 1: bounds.ts). A scan
 * that finds none is not repeated for a while, so a flood of new flows against a full table (or
 * a full cap) costs O(1) each.
 */
function evictIdle(e: EngineState, qp: EngineQp, under?: (f: Flow) => boolean): boolean {
  if (e.now < qp.evictRetryAt) return false;
  const idle = 2 * e.bounds.srdIdleMs;
  for (const [k, f] of qp.flows) {
    if (f.outstanding || f.pending.size > 0 || e.now - f.lastSegIn < idle || e.now - f.lastOut < idle || (under && !under(f))) continue;
    dropFlow(e, qp, k, f);
    e.counters.srdFlowsEvicted++;
    return true;
  }
  qp.evictRetryAt = e.now + Math.min(1000, e.bounds.srdIdleMs);
  return false;
}

/** srd: remove flow `f` (key `k`) from its QP's table, releasing what it held. */
function dropFlow(e: EngineState, qp: EngineQp, k: string, f: Flow): void {
  qp.flows.delete(k);
  f.answerBytes = 0;
  releaseFlow(qp, f);
  flowGone(e, f);
  bump(qp.peerFlows, f.peerKey, -1);
  bump(qp.hostFlows, f.source, -1);
}

/** Count `d` more flows under `k` in a per-peer or per-host table (an entry that reaches 0 goes). */
function bump(m: Map<string, number>, k: string, d: number): void {
  const n = (m.get(k) ?? 0) + d;
  void (n > 0 ? m.set(k, n) : m.delete(k));
}

/**
 * The ssn of a new message of ours on `flow`. An srd flow whose direction from us idled for
 * srdIdleMs starts that direction again at ssn 1, in the same epoch (its peer may have evicted
 * the flow; bounds.ts, srd-epoch.ts outIdle).
 */
export function nextSsn(e: EngineState, qp: EngineQp, flow: Flow): number {
  if (qp.type === 'srd' && flow.nextSsn > 1 && outIdle(e, flow)) outFromOne(flow);
  return flow.nextSsn++;
}

/** The flow a frame from (peer `key`, `rqpn`) belongs to, if the QP has one. */
export function findFlow(qp: EngineQp, key: string, rqpn: number): Flow | undefined {
  if (qp.type === 'rc') {
    const f = qp.flow;
    return f && f.peerKey === key && f.rqpn === rqpn ? f : undefined;
  }
  return qp.flows.get(flowKey(key, rqpn));
}

/** Leave a frame for the link. */
export function emit(e: EngineState, flow: Flow, frame: Frame): void {
  if (flow.srd) stamp(flow, frame);
  e.outbox.push({ to: flow.peer, frame });
  if (frame.kind === 'seg') flow.lastOut = e.now;
}

export function emitAll(e: EngineState, flow: Flow, frames: Frame[]): void {
  for (const f of frames) emit(e, flow, f);
}

// ---- posting order ----------------------------------------------------------------------------

/** Transmit what the send queue allows, in posting order. */
export function pump(e: EngineState, qp: EngineQp): void {
  let flushed = false;
  while (qp.state === QpState.Rts && qp.tx < qp.sq.length) {
    const w = qp.sq.at(qp.tx)!;
    if (w.done) {
      qp.tx++;
      continue;
    }
    // srd: its flow failed after it was posted (srd-epoch.ts restart): it fails here, unsent.
    const f = w.flow;
    if (f !== undefined && f.flushes !== w.flushMark) {
      finish(w, f.flushStatus, 0);
      flushed = true;
      qp.tx++;
      continue;
    }
    if ((w.kind === WrKind.Read || w.kind === WrKind.Atomic) && (qp.rdAtomic >= qp.caps.maxRdAtomic || qp.rdAtomic >= qp.ordLimit)) break;
    if (qp.type === 'rc' && w.ranges) {
      if (fenced(qp, w)) break;
      widenFence(qp, w);
    }
    transmit(e, qp, w);
    qp.tx++;
  }
  if (flushed) drainSq(e, qp);
}

/**
 * An earlier, unfinished operation touches the same remote bytes in a way that orders them: not
 * read after read, not write after write (the responder orders those, see above). Bounding boxes
 * of the remote ranges in flight answer the common cases without scanning: all of them, and
 * those of reads and atomics only (all a write can wait for); a scan also re-tightens both.
 */
function fenced(qp: EngineQp, w: SendWork): boolean {
  let lo = Infinity;
  let hi = -Infinity;
  for (const b of w.ranges!) {
    if (b.len === 0) continue;
    lo = Math.min(lo, b.addr);
    hi = Math.max(hi, b.addr + b.len);
  }
  const write = w.kind === WrKind.Write;
  if (write ? hi <= qp.fenceRaLo || lo >= qp.fenceRaHi : hi <= qp.fenceLo || lo >= qp.fenceHi) return false;
  let nlo = Infinity;
  let nhi = -Infinity;
  let rlo = Infinity;
  let rhi = -Infinity;
  let hit = false;
  for (let i = 0; i < qp.tx && !hit; i++) {
    const x = qp.sq.at(i)!;
    if (x.done || !x.ranges) continue;
    const xWrite = x.kind === WrKind.Write;
    for (const a of x.ranges) {
      if (a.len === 0) continue;
      if (a.addr < nlo) nlo = a.addr;
      if (a.addr + a.len > nhi) nhi = a.addr + a.len;
      if (!xWrite) {
        if (a.addr < rlo) rlo = a.addr;
        if (a.addr + a.len > rhi) rhi = a.addr + a.len;
      }
      if ((x.kind === WrKind.Read && w.kind === WrKind.Read) || (xWrite && write)) continue;
      for (const b of w.ranges!) if (a.addr < b.addr + b.len && b.addr < a.addr + a.len) hit = true;
    }
  }
  if (hit) return true;
  qp.fenceLo = nlo;
  qp.fenceHi = nhi;
  qp.fenceRaLo = rlo;
  qp.fenceRaHi = rhi;
  return false;
}

function widenFence(qp: EngineQp, w: SendWork): void {
  const write = w.kind === WrKind.Write;
  for (const b of w.ranges!) {
    if (b.len === 0) continue;
    if (b.addr < qp.fenceLo) qp.fenceLo = b.addr;
    if (b.addr + b.len > qp.fenceHi) qp.fenceHi = b.addr + b.len;
    if (write) continue;
    if (b.addr < qp.fenceRaLo) qp.fenceRaLo = b.addr;
    if (b.addr + b.len > qp.fenceRaHi) qp.fenceRaHi = b.addr + b.len;
  }
}

// ---- building messages (the opcode table's `build`) --------------------------------------------

function parts(e: EngineState, w: SendWork): Uint8Array[] {
  if (w.inline) return [w.inline];
  // A loop, not pieces.map(closure): no closure object per message.
  const out: Uint8Array[] = [];
  for (const p of w.pieces) out.push(e.mem.view(p.rec, p.addr, p.len));
  return out;
}

function transmit(e: EngineState, qp: EngineQp, w: SendWork): void {
  let flow = w.flow ?? qp.flow!;
  // srd: the flow was evicted while the request waited (it was idle): use the current one.
  if (qp.type === 'srd' && qp.flows.get(flowKey(flow.peerKey, flow.rqpn)) !== flow) w.flow = flow = srdFlow(e, qp, flow.peer, flow.rqpn, flow.peerKey);
  armWatchdog(e, qp, flow);
  switch (w.row.build) {
    case 'send': return buildSend(e, qp, flow, w);
    case 'write': return buildWrite(e, qp, flow, w);
    case 'read': return !flow.profile.extensions && w.row.toStandardPeer === 'rfcReadRequests' ? buildRfcReads(e, qp, flow, w) : buildReadV(e, qp, flow, w);
    case 'atomic': return buildAtomic(e, qp, flow, w);
  }
}

function buildSend(e: EngineState, qp: EngineQp, flow: Flow, w: SendWork): void {
  const frames: SegFrame[] = [];
  const ssn = nextSsn(e, qp, flow);
  const imm = w.row.imm === w.opcode;
  dataFrames({
    srcQpn: qp.qpn, dstQpn: flow.rqpn, mss: e.mss, ssn, tagged: false, opcode: w.row.code, qn: w.row.qn,
    msn: flow.sendMsn++, ulp: imm ? w.imm : 0, parts: parts(e, w), total: w.total,
  }, frames);
  w.pending = 1;
  flow.inflight.set(ssn, { wr: w, frames, rnrWait: false });
  emitAll(e, flow, frames);
}

function buildWrite(e: EngineState, qp: EngineQp, flow: Flow, w: SendWork): void {
  const ssn = nextSsn(e, qp, flow);
  const msg: DataMsg = { srcQpn: qp.qpn, dstQpn: flow.rqpn, mss: e.taggedMss, ssn, tagged: true, opcode: w.row.code, stag: w.rkey, to: w.remoteAddr, parts: parts(e, w), total: w.total };
  w.pending = 1;
  const out: OutMessage = { wr: w, frames: undefined, rnrWait: false };
  flow.inflight.set(ssn, out);
  // An rc Write keeps no frames (it is never sent again by the engine): a one-segment Write goes
  // straight to the outbox without a frame list (no allocation per small message). srd keeps
  // them: a Write behind a turn refused for want of a receive is refused too, and asked for
  // again by an RNR NAK in its turn (srd-refusal.ts).
  if (msg.total <= msg.mss) {
    const f = dataFrame(msg);
    if (flow.srd) out.frames = [f];
    emit(e, flow, f);
  } else {
    const frames: SegFrame[] = [];
    dataFrames(msg, frames);
    if (flow.srd) out.frames = frames;
    emitAll(e, flow, frames);
  }
  if (w.row.imm !== w.opcode) return;
  // RdmaWriteWithImm: RFC 7306 Immediate Data after the write; it consumes a receive.
  const s2 = nextSsn(e, qp, flow);
  const f = immediateFrame(qp.qpn, flow.rqpn, s2, flow.sendMsn++, w.imm, w.total);
  w.pending = 2;
  flow.inflight.set(s2, { wr: w, frames: [f], rnrWait: false });
  emit(e, flow, f);
}

function readEnds(w: SendWork): { srcs: ReadVEntry[]; sinks: ReadVEntry[] } {
  const srcs = w.srcs ?? [{ stag: w.rkey, to: w.remoteAddr, len: w.total }];
  const sinks: ReadVEntry[] = w.pieces.length > 0 ? w.pieces.map((p) => ({ stag: p.rec.stag, to: p.addr, len: p.len })) : [{ stag: 0, to: 0, len: 0 }];
  w.sinks = sinks;
  return { srcs, sinks };
}

/** M1: one ReadRequestV naming sources and sinks; the responder writes the sinks and says ReadComplete. */
function buildReadV(e: EngineState, qp: EngineQp, flow: Flow, w: SendWork): void {
  const v = readEnds(w);
  // One control message, never cut across segments: one that does not fit a segment fails its
  // own work (a local length error, as ibverbs reports a request past the device's limits)
  // instead of reaching the link, which cannot carry it and would give the whole peer up.
  if (readRequestVLength(v) > e.maxControl) return qpError(e, qp, w, WcStatus.LocLenErr);
  const msn = flow.reqMsn++;
  const ssn = nextSsn(e, qp, flow);
  const f = ctlFrame({
    srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: w.row.code, qn: w.row.qn, msn,
    bodyLen: readRequestVLength(v), body: (b, o) => encodeReadRequestV(v, b, o),
    // Our cumulative ack rides on the request: the responder counts our reads until it sees
    // their answers acked (its IRD), and the ack of the last answer must not trail the next request.
    ack: flow.expected - 1,
  });
  flow.ownReads().set(msn, w);
  qp.rdAtomic++;
  flow.inflight.set(ssn, { wr: w, frames: flow.srd ? [f] : undefined, rnrWait: false });
  emit(e, flow, f);
}

/**
 * A read to a standard iWARP peer: RFC 5040 Read Requests, one per (source, sink) piece with
 * adjacent pieces merged (a one-source one-sink read is one request); it completes when the
 * Read Response of its last request has arrived (the stream is in order, and so are responses).
 */
function buildRfcReads(e: EngineState, qp: EngineQp, flow: Flow, w: SendWork): void {
  const { srcs, sinks } = readEnds(w);
  const reqs: ReadRequest[] = [];
  const sinkCur = new GatherCursor(sinks, entryLength);
  for (const s of srcs) {
    let off = 0;
    sinkCur.take(s.len, (k, at, n) => {
      const last = reqs[reqs.length - 1];
      if (last && last.srcStag === s.stag && last.srcTo + last.size === s.to + off && last.sinkStag === k.stag && last.sinkTo + last.size === k.to + at) last.size += n;
      else reqs.push({ srcStag: s.stag, srcTo: s.to + off, sinkStag: k.stag, sinkTo: k.to + at, size: n });
      off += n;
    });
  }
  // A zero-length read is one zero-length request (answered by one empty Read Response).
  if (reqs.length === 0) reqs.push({ srcStag: srcs[0]!.stag, srcTo: srcs[0]!.to, sinkStag: sinks[0]!.stag, sinkTo: sinks[0]!.to, size: 0 });
  w.readParts = reqs.length;
  let key = -1;
  for (const r of reqs) {
    const msn = flow.reqMsn++;
    if (key < 0) key = msn;
    const ssn = nextSsn(e, qp, flow);
    flow.inflight.set(ssn, { wr: w, rnrWait: false });
    emit(e, flow, ctlFrame({
      srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.ReadRequest, qn: Qn.ReadRequest, msn,
      bodyLen: 28, body: (b, o) => encodeReadRequest(r, b, o),
    }));
  }
  flow.ownReads().set(key, w);
  qp.rdAtomic++;
}

function buildAtomic(e: EngineState, qp: EngineQp, flow: Flow, w: SendWork): void {
  const msn = flow.reqMsn++;
  const ssn = nextSsn(e, qp, flow);
  const fetchAdd = w.wc === WcOpcode.FetchAdd;
  const f = ctlFrame({
    srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: w.row.code, qn: w.row.qn, msn, bodyLen: 52,
    body: (b, o) => encodeAtomicRequest({
      op: fetchAdd ? 'fetchAdd' : 'cmpSwap', reqId: msn, stag: w.rkey, to: w.remoteAddr,
      addOrSwap: BigInt.asUintN(64, fetchAdd ? w.compareAdd : w.swap), addOrSwapMask: M64,
      compare: fetchAdd ? 0n : BigInt.asUintN(64, w.compareAdd), compareMask: M64,
    }, b, o),
    // As a read's: the responder's IRD counts our atomics until their answers are acked.
    ack: flow.expected - 1,
  });
  flow.ownAtomics().set(msn, w);
  qp.rdAtomic++;
  flow.inflight.set(ssn, { wr: w, frames: flow.srd ? [f] : undefined, rnrWait: false });
  emit(e, flow, f);
}

// ---- answers: acks, RNR, read and atomic completion ------------------------------------------

export function onAck(e: EngineState, key: string, qpn: number, rqpn: number, ssn: number, epoch?: number): void {
  if (qpn === DEVICE_QPN) {
    if (rqpn === DEVICE_QPN && ssn === 0) heardNotReady(e, key);
    return;
  }
  const qp = e.qps.get(qpn);
  if (!qp || qp.state === QpState.Error) return;
  const flow = findFlow(qp, key, rqpn);
  if (!flow) return;
  flow.lastHeard = e.now;
  // srd: an ack from before a restart acknowledges nothing of the new epoch's.
  if (flow.srd && epochCheck(e, qp, flow, epoch) === Epoch.Stale) return;
  const before = flow.answerBytes;
  applyAck(flow, ssn, e.now);
  // A read waiting for the answer budget may go now: the flow's in-order step runs again.
  if (flow.answerBytes < before) e.touch(flow, qp);
  drainSq(e, qp);
  pump(e, qp);
}

/** Every message up to `ssn` is complete at the peer: Writes and Sends whose messages are all acked complete Success. */
export function applyAck(flow: Flow, ssn: number, now: number): void {
  if (!(ssn > flow.acked) || ssn >= flow.nextSsn) return;
  flow.lastOut = now;
  for (let s = flow.acked + 1; s <= ssn; s++) {
    const m = flow.inflight.get(s);
    if (!m) continue;
    flow.inflight.delete(s);
    if (m.endsRead) {
      if (flow.readsIn > 0) flow.readsIn--;
      flow.answerBytes = Math.max(0, flow.answerBytes - (m.readBytes ?? 0));
    }
    const w = m.wr;
    if (w && (w.kind === WrKind.Send || w.kind === WrKind.Write) && --w.pending === 0) finish(w, WcStatus.Success, w.total);
  }
  flow.acked = ssn;
}

/**
 * A peer that sends no acks (a standard iWARP peer): the link says the kernel has taken every
 * byte of the QP's messages up to `ssn` (LinkEvents.written). That stands in for the peer's
 * ack: our Writes and Sends complete here, as siw completes them once tcp_sendmsg has copied
 * them, and not when the frames were handed to the link, whose socket may hold them as views
 * of the source memory for as long as the peer does not read; the application may reuse the
 * buffer, or deregister it, once they complete.
 */
export function onWritten(e: EngineState, qpn: number, ssn: number): void {
  const qp = e.qps.get(qpn);
  const flow = qp?.type === 'rc' ? qp.flow : undefined;
  if (!qp || !flow || flow.profile.acks || qp.state === QpState.Error) return;
  // The peer takes our bytes: the watchdog's sign of life for a peer that never answers a Write.
  flow.lastHeard = e.now;
  applyAck(flow, ssn, e.now);
  drainSq(e, qp);
  pump(e, qp);
}

export function onRnr(e: EngineState, key: string, qpn: number, rqpn: number, ssn: number, epoch?: number): void {
  const qp = e.qps.get(qpn);
  if (!qp || qp.state === QpState.Error) return;
  const flow = findFlow(qp, key, rqpn);
  if (flow) flow.lastHeard = e.now;
  if (flow?.srd) {
    const c = epochCheck(e, qp, flow, epoch);
    if (c === Epoch.Stale) return;
    if (c === Epoch.Restarted) {
      drainSq(e, qp);
      pump(e, qp);
      return;
    }
  }
  const m = flow?.inflight.get(ssn);
  if (!flow || !m || !m.frames || m.rnrWait) return;
  // An srd answer to the peer's read or atomic (no work request of ours) counts its own NAKs;
  // past rnrRetry its flow fails with no work request of ours to name (all of it WrFlushErr).
  const w = m.wr;
  if ((w ? ++w.rnrCount : (m.rnrCount = (m.rnrCount ?? 0) + 1)) > qp.caps.rnrRetry) {
    flowError(e, qp, flow, w, WcStatus.RnrRetryExcErr);
    return;
  }
  m.rnrWait = true;
  e.timers.arm({ kind: 'rnrRetry', key: m, at: e.now + qp.caps.rnrTimeoutMs, qp, flow, ssn, m });
}

/** The RNR back-off is over: send the message again (the same frames: same cut, same offsets). */
export function rnrRetry(e: EngineState, qp: EngineQp, flow: Flow, ssn: number, m: OutMessage): void {
  if (qp.state !== QpState.Rts || flow.inflight.get(ssn) !== m) return;
  m.rnrWait = false;
  e.counters.rnrRetries++;
  emitAll(e, flow, m.frames!);
}

/** A read has all its data (ReadComplete, or the last RFC Read Response): it completes. */
export function readDone(e: EngineState, qp: EngineQp, flow: Flow, key: number, w: SendWork): void {
  flow.reads.delete(key);
  qp.rdAtomic--;
  finish(w, WcStatus.Success, w.total);
  drainSq(e, qp);
  pump(e, qp);
}

// ---- the watchdog and lost peers --------------------------------------------------------------

/**
 * The requester's watchdog (IB's local ACK timeout, folded with its retry count): while a flow
 * has requests out, the peer's engine must be heard from within `timeoutMs`. The link
 * retransmits lost datagrams and reports a dead peer on its own; this catches what it cannot
 * see: a peer that took our datagrams and then died or lost the QP before answering (or, on
 * srd, a remote QP that does not exist, whose frames are dropped). rc: the QP goes to ERROR
 * with RetryExcErr; srd: only that flow's work fails.
 */
export function armWatchdog(e: EngineState, qp: EngineQp, flow: Flow): void {
  if (!flow.outstanding) flow.lastHeard = e.now;
  if (e.timers.has(flow)) return;
  e.timers.arm({ kind: 'watchdog', key: flow, at: flow.lastHeard + qp.caps.timeoutMs, qp, flow });
}

/** Whether a watchdog entry still has something to watch (pollTimeout drops it otherwise). */
export function watchdogLive(qp: EngineQp, flow: Flow): boolean {
  return flow.outstanding && qp.live;
}

export function watchdogExpired(e: EngineState, qp: EngineQp, flow: Flow, now: number): void {
  const bound = qp.type === 'rc' ? qp.flow === flow : qp.flows.get(flowKey(flow.peerKey, flow.rqpn)) === flow;
  if (!qp.live || !bound || !flow.outstanding) return;
  const heard = watchdogHeard(e, flow.peerKey, flow.lastHeard);
  // Compared as the deadline is armed: now - heard can round below timeoutMs at heard + timeoutMs,
  // and the watchdog would be armed again at the same instant for ever.
  if (heard + qp.caps.timeoutMs > now) {
    e.timers.arm({ kind: 'watchdog', key: flow, at: heard + qp.caps.timeoutMs, qp, flow });
    return;
  }
  if (e.holding) {
    // This device takes no frames in (RdmapEngine.holdReceive): the answers it leaves unread
    // are not the peer's silence. resumeWatchdogs starts the count again when it takes them.
    e.timers.arm({ kind: 'watchdog', key: flow, at: now + qp.caps.timeoutMs, qp, flow });
    return;
  }
  e.counters.timeouts++;
  if (qp.type === 'rc') {
    qpError(e, qp, qp.sq.find((w) => !w.done), WcStatus.RetryExcErr, true, 'lost');
    return;
  }
  if (letAnswersGo(flow)) return;
  forgetSrdFlow(e, qp, flow);
  drainSq(e, qp);
  pump(e, qp);
}

/** The device takes frames in again after a hold: every flow with requests out gets a whole timeoutMs from now. */
export function resumeWatchdogs(e: EngineState, now: number): void {
  for (const qp of e.qps.values()) for (const flow of qp.allFlows()) if (flow.outstanding) flow.lastHeard = Math.max(flow.lastHeard, now);
}

/** srd: drop one flow; its unfinished work completes with RetryExcErr (the caller drains the SQ). */
function forgetSrdFlow(e: EngineState, qp: EngineQp, f: Flow): void {
  restart(e, qp, f, nextEpoch(f), false, undefined, undefined, WcStatus.RetryExcErr);
}

/**
 * The stream of `flow` broke (a protocol error either way, a Terminate from the peer, its RNR
 * retries spent): rc — the QP goes to ERROR (qpError; `failing` completes with `status`); srd
 * — only that flow goes (srdFlowFailed), the QP keeps serving its other peers.
 */
export function flowError(e: EngineState, qp: EngineQp, flow: Flow, failing?: SendWork, status?: WcStatusValue, m?: InMessage): void {
  if (qp.type === 'srd') srdFlowFailed(e, qp, flow, failing, status, m);
  else qpError(e, qp, failing, status);
}

/**
 * srd: the stream with one peer QP broke (a protocol error either way, a Terminate from it, its
 * RNR retries spent). Only that flow starts again, in its next epoch (srd-epoch.ts): `failing`
 * completes with `status`, the rest of its unfinished work with WrFlushErr; receives its
 * messages had claimed (`m`'s, those still pending) are given back; the peer, seeing the new
 * epoch, drops what it holds of the old one. The QP keeps running for every other peer — an
 * srd QP is shared by whoever sends to it (the CM agent's is a listener's), so one sender's bad
 * frame must not fail the others' work (the udp fuzz campaign's srd pair found this).
 */
function srdFlowFailed(e: EngineState, qp: EngineQp, flow: Flow, failing?: SendWork, status?: WcStatusValue, m?: InMessage): void {
  if (m?.recv) m.recv.claimed = false;
  restart(e, qp, flow, nextEpoch(flow), false, failing, status);
  // The peer broke the stream (our Terminate went back): the flow, holding nothing now, goes —
  // its next message makes a new one, so a hostile peer's flows do not stay in the table. One
  // that failed on our side stays: its next epoch must reach the peer, whose flow holds the old.
  const k = flowKey(flow.peerKey, flow.rqpn);
  if (m && qp.flows.get(k) === flow) dropFlow(e, qp, k, flow);
  e.counters.srdFlowsFailed++;
  drainSq(e, qp);
  pump(e, qp);
}

/**
 * The link lost a peer device for good: nothing more will arrive from it and what we sent may
 * never land. rc QPs bound to it go to ERROR — their oldest unfinished work request completes
 * with RetryExcErr, the rest flush, as an RC QP past its retry count does. srd QPs keep
 * running: only the work addressed to that peer completes with RetryExcErr, and its flows start
 * again in their next epoch: a peer that did not restart learns from it that its old one is
 * gone (srd-epoch.ts).
 */
export function peerLost(e: EngineState, peerKey: string): void {
  for (const qp of e.qps.values()) {
    if (qp.state === QpState.Error || qp.state === QpState.Reset) continue;
    if (qp.type === 'rc') {
      if (qp.flow?.peerKey !== peerKey) continue;
      qpError(e, qp, qp.sq.find((w) => !w.done), WcStatus.RetryExcErr);
      continue;
    }
    let hit = false;
    for (const f of qp.flows.values()) {
      if (f.peerKey !== peerKey) continue;
      hit = true;
      forgetSrdFlow(e, qp, f);
    }
    if (hit) {
      drainSq(e, qp);
      pump(e, qp);
    }
  }
}
