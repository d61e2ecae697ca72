// The responder's side of ordering: messages complete strictly in ssn order per flow, and
// completing one does what its opcode's row says (opcodes.ts `execute`) — a receive completion,
// immediate data, answering a read with tagged writes (M1), executing an atomic, completing our
// own read or atomic, or a Terminate from the peer. A message that failed on arrival is
// Terminated here, when it is next, after everything before it completed.
//
// M1 (reads answered by writes): a ReadRequestV names sources and sinks; the answer is tagged
// ReadResponse segments straight into the sink STags/TOs, then a ReadComplete whose imm is the
// request's MSN; the requester completes the read when ReadComplete is processed, which ssn
// order puts after all of its data. An RFC 5040 Read Request is answered the same way — and
// with Read Responses only when the peer is a standard iWARP peer (core/peer.ts).
import { QpState, WcOpcode, WcStatus } from '../core/enums.js';
import type { SegFrame } from '../core/frame.js';
import { ViewCursor } from '../core/gather.js';
import type { WorkCompletion } from '../core/work.js';
import { PlaceStatus } from '../dataplane/descriptors.js';
import {
  decodeAtomicRequest, decodeAtomicResponse, decodeImmediateData, decodeReadComplete, decodeReadRequest, decodeReadRequestV,
  decodeTerminate, encodeAtomicResponse, encodeReadComplete, encodeTerminate, Qn, RdmapOpcode, type ReadVEntry,
} from '../wire/rdmap.js';
import { isPeerClosed, statusForTerm, TERM, termForPlaceStatus, type TermCode } from '../wire/terminate.js';
import { recvFor, recvForExpected } from './receives.js';
import { askNow, refuse } from './srd-refusal.js';
import { complete, drainSq, qpError } from './completion.js';
import { type OpcodeRow, rowOf } from './opcodes.js';
import { failMsg } from './placement.js';
import { armWatchdog, emit, emitAll, flowError, nextSsn, pump, readDone } from './requester.js';
import { release } from './budget.js';
import { Offsets } from './offsets.js';
import { forgetWrite } from './write-order.js';
import { ctlFrame, dataFrames } from './segmenter.js';
import type { EngineQp, EngineState, Flow, InMessage, RecvWork, SendWork } from './state.js';

const M64 = (1n << 64n) - 1n;
const NO_HDR = new Uint8Array(0);

/** Complete what is complete, in ssn order; Terminate the first failed message. */
export function advance(e: EngineState, qp: EngineQp, flow: Flow): void {
  for (;;) {
    const m = flow.pending.get(flow.expected);
    if (!m) {
      if (qp.type === 'srd') askAgain(e, qp, flow);
      return;
    }
    if (m.fail) {
      fatal(e, qp, flow, m);
      return;
    }
    const complete = m.seen && m.got === m.msgLen;
    const row = rowOf(m.opcode);
    const recv = row?.recv;
    if (recv?.at === 'completion' && complete) {
      // Nothing was placed: the receive is claimed now.
      const r = recvForExpected(qp, m, flow);
      if (r === null) {
        failMsg(m, m.hdr ?? NO_HDR, 0, TERM.invalidMsn);
        continue;
      }
      if (!r) {
        if (qp.type === 'srd') {
          refuse(qp, flow, flow.expected);
          askAgain(e, qp, flow);
        } else if (flow.closeAhead) closedAhead(e, qp);
        else if (m.rnrArmed) nakRnr(e, qp, flow, m);
        return;
      }
    } else if (recv && (complete ? recvFor(qp, m, flow) === undefined : m.rnrArmed)) {
      // Segments were dropped for want of a receive: they come again after the requester's RNR
      // timer. A zero-length Send is complete with nothing placed: it too waits for its receive,
      // NAKed once per arrival (later steps of the flow leave it waiting).
      if (flow.closeAhead) closedAhead(e, qp);
      else if (m.rnrArmed) nakRnr(e, qp, flow, m);
      return;
    }
    if (!complete) {
      // srd: a turn held in part may have lost segments to a refusal (srd-refusal.ts turnRefused).
      if (qp.type === 'srd') askAgain(e, qp, flow);
      else if (flow.closeAhead && m.rnrNaked) closedAhead(e, qp);
      return;
    }
    // Answers in flight are copies (the deregister fence): past maxAnswerBytes the next read
    // waits until earlier answers are acknowledged, as a responder answers reads one after
    // another. The first always goes (a read larger than the budget is still answered).
    if (row?.execute === 'answerRead' && flow.answerBytes > 0 && flow.profile.acks && flow.answerBytes + readSize(m) > e.bounds.maxAnswerBytes) {
      e.counters.readsDeferred++;
      return;
    }
    flow.pending.delete(flow.expected);
    forgetWrite(flow, m);
    release(qp, m);
    flow.expected++;
    flow.needAck = true;
    execute(e, qp, flow, m, row!);
    if (qp.state === QpState.Error) return;
  }
}

/**
 * rc: the turn waits for a receive while the peer's close notice is further on (arrival.ts): the
 * peer flushed that Send and will not send it again, so the notice acts now.
 */
function closedAhead(e: EngineState, qp: EngineQp): void {
  qpError(e, qp, undefined, undefined, false, 'closed');
}

/** A message needs a receive that is not posted: RNR NAK — or, to a peer that has no RNR, the RFC 5040 Terminate. */
function nakRnr(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage): void {
  m.rnrArmed = false;
  m.rnrNaked = true;
  if (!flow.profile.acks) {
    m.fail = { term: TERM.noBuffer };
    fatal(e, qp, flow, m);
    return;
  }
  e.counters.rnrNaksSent++;
  emit(e, flow, { kind: 'rnr', srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn: m.ssn });
}

/** srd: the flow's turn was refused (srd-refusal.ts): ask for it again, once per refusal. */
function askAgain(e: EngineState, qp: EngineQp, flow: Flow): void {
  const ssn = askNow(flow);
  if (ssn === undefined) return;
  e.counters.rnrNaksSent++;
  emit(e, flow, { kind: 'rnr', srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn });
}

function execute(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, row: OpcodeRow): void {
  switch (row.execute) {
    case 'none':
      return;
    case 'readResponse':
      // A standard peer sends no ReadComplete: a read completes on the response to its last request.
      if (!flow.profile.extensions) rfcReadResponse(e, qp, flow, m);
      return;
    case 'receive': {
      const r = takeRecv(qp, m);
      if (!r) return fatalNow(e, qp, flow, m, TERM.invalidMsn);
      const wc: WorkCompletion = { wrId: r.wrId, status: WcStatus.Success, opcode: row.recv!.wc, byteLen: m.msgLen, qpn: qp.qpn };
      if (row.imm !== undefined) wc.imm = m.ulp >>> 0;
      return recvComplete(e, qp, flow, wc);
    }
    case 'immediate': {
      const v = decodeImmediateData(m.ctl!, 0, m.ctl!.length);
      if (!v.ok) return fatalNow(e, qp, flow, m, TERM.invalidRequest);
      const r = takeRecv(qp, m);
      if (!r) return fatalNow(e, qp, flow, m, TERM.invalidMsn);
      return recvComplete(e, qp, flow, { wrId: r.wrId, status: WcStatus.Success, opcode: row.recv!.wc, byteLen: v.value.len, imm: v.value.imm >>> 0, qpn: qp.qpn });
    }
    case 'answerRead': {
      let srcs: ReadVEntry[], sinks: ReadVEntry[];
      if (row.code === RdmapOpcode.ReadRequestV) {
        const v = decodeReadRequestV(m.ctl!, 0, m.ctl!.length);
        if (!v.ok) return fatalNow(e, qp, flow, m, TERM.invalidRequest);
        ({ srcs, sinks } = v.value);
      } else {
        const v = decodeReadRequest(m.ctl!, 0, m.ctl!.length);
        if (!v.ok) return fatalNow(e, qp, flow, m, TERM.invalidRequest);
        srcs = [{ stag: v.value.srcStag, to: v.value.srcTo, len: v.value.size }];
        sinks = [{ stag: v.value.sinkStag, to: v.value.sinkTo, len: v.value.size }];
      }
      return answerRead(e, qp, flow, m, row, srcs, sinks);
    }
    case 'answerAtomic':
      return answerAtomic(e, qp, flow, m, row);
    case 'readComplete': {
      const v = decodeReadComplete(m.ctl!, 0, m.ctl!.length);
      const w = v.ok ? flow.reads.get(v.value.imm) : undefined;
      if (!v.ok || !w) return fatalNow(e, qp, flow, m, TERM.invalidRequest);
      return readDone(e, qp, flow, v.value.imm, w);
    }
    case 'atomicResponse': {
      const v = decodeAtomicResponse(m.ctl!, 0, m.ctl!.length);
      const w = v.ok ? flow.atomics.get(v.value.reqId) : undefined;
      if (!v.ok || !w) return fatalNow(e, qp, flow, m, TERM.invalidRequest);
      flow.atomics.delete(v.value.reqId);
      qp.rdAtomic--;
      const p = w.pieces[0]!;
      if (e.mem.lookup(p.rec.stag) === p.rec) {
        const dst = e.mem.view(p.rec, p.addr, 8);
        new DataView(dst.buffer, dst.byteOffset, 8).setBigUint64(0, v.value.value, true);
        if (p.rec.ext) e.mem.extWritten(p.rec, p.addr, 8);
        w.status = WcStatus.Success;
        w.byteLen = 8;
      } else w.status = WcStatus.LocProtErr;
      w.done = true;
      if (w.status !== WcStatus.Success) return flowError(e, qp, flow, w, w.status);
      drainSq(e, qp);
      pump(e, qp);
      return;
    }
    case 'terminate': {
      e.counters.terminatesReceived++;
      const v = decodeTerminate(m.ctl!, 0, m.ctl!.length);
      // Without the sender's ack (a standard iWARP peer's Terminate carries none) the oldest
      // unfinished work request is the one that failed.
      // srd: only the work addressed to that peer QP fails; the QP serves every other peer.
      // (srd looks at that flow's own work: a scan of the QP's send queue per Terminate let a peer
      // restarting its flow buy ~0.8 ms of NIC thread per frame with 60,000 sends to another
      // peer queued; found by an audit.)
      const failed = m.ackHint !== undefined ? flow.inflight.get(m.ackHint + 1)?.wr : qp.type === 'rc' ? qp.sq.find((w) => !w.done) : oldestOf(flow);
      // The peer's close notice (rc): what it took is acked above; the rest is flushed.
      if (v.ok && qp.type === 'rc' && isPeerClosed(v.value)) return qpError(e, qp, undefined, undefined, false, 'closed');
      const status = v.ok ? statusForTerm(v.value) : WcStatus.RemOpErr;
      flowError(e, qp, flow, failed, status);
      return;
    }
  }
}

/** The oldest unfinished work request an srd flow has out (messages in flight, then reads and atomics waiting for their answers). */
function oldestOf(flow: Flow): SendWork | undefined {
  for (const o of flow.inflight.values()) if (o.wr && !o.wr.done) return o.wr;
  for (const w of flow.reads.values()) if (!w.done) return w;
  for (const w of flow.atomics.values()) if (!w.done) return w;
  return undefined;
}

function recvComplete(e: EngineState, qp: EngineQp, flow: Flow, wc: WorkCompletion): void {
  // Its receive left the queue (takeRecv, or a failed message's).
  e.changed(qp);
  if (qp.type === 'srd') {
    wc.srcQpn = flow.rqpn;
    if (qp.reportSource) (wc as WorkCompletion & { src?: unknown }).src = flow.peer;
  }
  complete(e, qp.recvCq, wc);
}

/**
 * The receive `m` completes into, taken off the queue. undefined: none is left for its MSN —
 * two messages named the same MSN and both arrived (each checked against the same posted
 * receive) before the first completed and consumed it.
 */
function takeRecv(qp: EngineQp, m: InMessage): RecvWork | undefined {
  const r = recvFor(qp, m);
  if (!r) return undefined;
  // rc takes receives in posting order: the head.
  if (qp.rq.at(0) === r) qp.rq.shift();
  else qp.rq.removeAt(qp.rq.indexOf(r));
  if (qp.type === 'rc') qp.rqConsumed++;
  return r;
}

function answerRead(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, row: OpcodeRow, srcs: ReadVEntry[], sinks: ReadVEntry[]): void {
  // The IRD (bounds.ts): reads answered and not acknowledged yet. Past it the peer broke the
  // stream's resources (RFC 5040 §7.2). Peers that send no acks count until the link has
  // written the answer. srd too, per flow: each answer is held until acknowledged, and
  // zero-length reads cost the answer budget nothing, so without it a peer that talks but never
  // acks grew a flow's answers in flight without end; past it only that flow fails (flowError).
  if (flow.readsIn >= e.bounds.maxIrd) {
    e.counters.readsRefused++;
    return fatalNow(e, qp, flow, m, TERM.tooManyReads);
  }
  // The sinks are the requester's memory, named by 64-bit TOs sabre cannot check against a
  // region; but every segment of the answer carries sink TO + offset, which must stay a safe
  // integer (found by the live fuzz campaign: a sink TO just under 2^53 made the answer's
  // later segments throw out of the segmenter — an uncaught exception). Refused whole, first.
  for (const k of sinks) {
    if (k.to + k.len > Number.MAX_SAFE_INTEGER) {
      e.counters.readsRefused++;
      return fatalNow(e, qp, flow, m, TERM.invalidRequest);
    }
  }
  let total = 0;
  for (const s of srcs) {
    const st = e.mem.check(s.stag, qp.pd, s.to, s.len, row.access!);
    if (st !== PlaceStatus.Placed) return fatalNow(e, qp, flow, m, termForPlaceStatus(st));
    total += s.len;
  }
  // srd: the QP's flows together hold at most maxQpAnswerBytes of copies (bounds.ts).
  if (flow.answers !== undefined && flow.answers.bytes > 0 && flow.answers.bytes + total > e.bounds.maxQpAnswerBytes) {
    e.counters.readsRefused++;
    return fatalNow(e, qp, flow, m, TERM.tooManyReads);
  }
  const views = snapshotSources(e, srcs);
  // Tagged writes straight from the source regions into the sinks: one message per sink.
  const frames: SegFrame[] = [];
  // srd keeps each message's frames: refused behind a refused turn, it is asked for again (srd-refusal.ts).
  const response = (k: ReadVEntry, parts: Uint8Array[]): void => {
    const ssn = nextSsn(e, qp, flow);
    const from = frames.length;
    dataFrames({ srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, tagged: true, opcode: RdmapOpcode.ReadResponse, stag: k.stag, to: k.to, parts, total: k.len, mss: e.taggedMss }, frames);
    flow.inflight.set(ssn, { frames: flow.srd ? frames.slice(from) : undefined, rnrWait: false });
  };
  // A standard requester completes its read on the Read Response with L: a zero-length read gets one, empty.
  if (!flow.profile.extensions && total === 0) response({ stag: sinks[0]!.stag, to: sinks[0]!.to, len: 0 }, []);
  const cur = new ViewCursor(views);
  for (const k of sinks) {
    if (k.len === 0) continue;
    const parts: Uint8Array[] = [];
    cur.takeViews(k.len, parts);
    response(k, parts);
  }
  if (flow.profile.extensions) {
    const ssn = nextSsn(e, qp, flow);
    const f = ctlFrame({
      srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.ReadComplete, qn: Qn.Send, msn: m.msn, bodyLen: 8,
      body: (b, o) => encodeReadComplete({ imm: m.msn, len: total }, b, o),
    });
    frames.push(f);
    flow.inflight.set(ssn, { frames: flow.srd ? [f] : undefined, rnrWait: false });
  }
  // The read's last message (ReadComplete, or the last Read Response) ends it for the IRD.
  const last = flow.inflight.get(flow.nextSsn - 1);
  if (last) {
    last.endsRead = true;
    last.readBytes = total;
    flow.readsIn++;
    flow.answerBytes += total;
  }
  keepAnswer(e, qp, flow);
  emitAll(e, flow, frames);
}

/**
 * The bytes of a read's sources, in order, as copies taken now, while the keys are valid: the
 * answer may wait in a tcp queue or a socket's buffer, or be sent again by udp, after a region is
 * deregistered and its memory registered anew; a view would send the new region's bytes under
 * the old key. Hardware fences outstanding responses on MR invalidation; the copy is sabre's
 * fence (its cost on the read path: docs/resource-bounds.md). Each byte a request names is
 * copied once, however often it names it: sources of one key that overlap or touch share one
 * copy. A request may name one granted region up to maxSge (1024) times; copied per entry, one
 * ~32 KiB request made the responder copy up to 4 GiB into its heap (found by an audit).
 */
function snapshotSources(e: EngineState, srcs: ReadVEntry[]): Uint8Array[] {
  const views: Uint8Array[] = [];
  if (srcs.length === 1) {
    const s = srcs[0]!;
    if (s.len > 0) views.push(e.mem.snapshot(e.mem.view(e.mem.lookup(s.stag)!, s.to, s.len)));
    return views;
  }
  const order: number[] = [];
  for (let i = 0; i < srcs.length; i++) if (srcs[i]!.len > 0) order.push(i);
  order.sort((x, y) => srcs[x]!.stag - srcs[y]!.stag || srcs[x]!.to - srcs[y]!.to);
  const out: Uint8Array[] = new Array(srcs.length);
  for (let k = 0; k < order.length;) {
    const first = srcs[order[k]!]!;
    let end = first.to + first.len;
    let j = k + 1;
    for (; j < order.length; j++) {
      const n = srcs[order[j]!]!;
      if (n.stag !== first.stag || n.to > end) break;
      end = Math.max(end, n.to + n.len);
    }
    const copy = e.mem.snapshot(e.mem.view(e.mem.lookup(first.stag)!, first.to, end - first.to));
    for (; k < j; k++) {
      const s = srcs[order[k]!]!;
      out[order[k]!] = copy.subarray(s.to - first.to, s.to - first.to + s.len);
    }
  }
  for (const i of order.sort((x, y) => x - y)) views.push(out[i]!);
  return views;
}

/**
 * srd keeps an answer's frames until the requester acks it (sent again after an RNR NAK): the
 * watchdog bounds how long a requester gone silent holds them (a live one, `maxAnswerBytes` per
 * flow, bounds.ts).
 */
function keepAnswer(e: EngineState, qp: EngineQp, flow: Flow): void {
  if (flow.srd) armWatchdog(e, qp, flow);
}

const HOST_LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * The atomic's read-modify-write of a little-endian word; returns the old value. In shared
 * memory it is one Atomics operation: several NIC threads of a device place into the same
 * memory, and atomics from QPs on different threads must not lose each other's updates.
 */
function rmw64(bytes: Uint8Array, add: boolean, operand: bigint, compare: bigint | undefined): bigint {
  if (HOST_LE && bytes.buffer instanceof SharedArrayBuffer && (bytes.byteOffset & 7) === 0) {
    const w = new BigUint64Array(bytes.buffer, bytes.byteOffset, 1);
    return add ? Atomics.add(w, 0, operand & M64) : Atomics.compareExchange(w, 0, compare ?? 0n, operand & M64);
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, 8);
  const old = dv.getBigUint64(0, true);
  if (add) dv.setBigUint64(0, (old + operand) & M64, true);
  else if (old === compare) dv.setBigUint64(0, operand, true);
  return old;
}

function answerAtomic(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, row: OpcodeRow): void {
  // An atomic's answer is held until acknowledged as a read's is: the same IRD counts both (as
  // IB's responder resources do), else a peer that never acks grows the answers in flight.
  if (flow.readsIn >= e.bounds.maxIrd) {
    e.counters.readsRefused++;
    return fatalNow(e, qp, flow, m, TERM.tooManyReads);
  }
  const v = decodeAtomicRequest(m.ctl!, 0, m.ctl!.length);
  if (!v.ok) return fatalNow(e, qp, flow, m, TERM.invalidRequest);
  const a = v.value;
  const st = e.mem.check(a.stag, qp.pd, a.to, 8, row.access!);
  if (st !== PlaceStatus.Placed) return fatalNow(e, qp, flow, m, termForPlaceStatus(st));
  if (a.to % 8 !== 0) return fatalNow(e, qp, flow, m, TERM.invalidRequest);
  const bytes = e.mem.view(e.mem.lookup(a.stag)!, a.to, 8);
  const old = rmw64(bytes, a.op === 'fetchAdd', a.addOrSwap, a.compare);
  const target = e.mem.lookup(a.stag)!;
  if (target.ext) e.mem.extWritten(target, a.to, 8);
  const ssn = nextSsn(e, qp, flow);
  const f = ctlFrame({
    srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.AtomicResponse, qn: Qn.AtomicResponse, msn: flow.respMsn++,
    bodyLen: 12, body: (b, o) => encodeAtomicResponse({ reqId: a.reqId, value: old }, b, o),
  });
  flow.inflight.set(ssn, { frames: flow.srd ? [f] : undefined, rnrWait: false, endsRead: true, readBytes: 0 });
  flow.readsIn++;
  keepAnswer(e, qp, flow);
  emit(e, flow, f);
}

/** Bytes a read request asks for (0 when it does not decode: execution then Terminates it). */
function readSize(m: InMessage): number {
  const c = m.ctl!;
  if (rowOf(m.opcode)?.code === RdmapOpcode.ReadRequestV) {
    const v = decodeReadRequestV(c, 0, c.length);
    return v.ok ? v.value.srcs.reduce((n, s) => n + s.len, 0) : 0;
  }
  const v = decodeReadRequest(c, 0, c.length);
  return v.ok ? v.value.size : 0;
}

/** A standard peer's Read Response message (all its segments, L last) is complete: it answers the oldest read's next request. */
function rfcReadResponse(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage): void {
  const first = flow.reads.entries().next();
  if (first.done) return fatalNow(e, qp, flow, m, TERM.invalidRequest);
  const [key, w] = first.value;
  if (--w.readParts! > 0) return;
  readDone(e, qp, flow, key, w);
}

/**
 * The peer broke the stream now (a bound of ours: bounds.ts), whatever is pending: Terminate
 * naming `hdr` (the offending segment's DDP header), acking everything completed before.
 */
export function terminateNow(e: EngineState, qp: EngineQp, flow: Flow, term: TermCode, hdr: Uint8Array, plen: number): void {
  fatal(e, qp, flow, {
    ssn: flow.expected, msgLen: 0, got: 0, offs: new Offsets(), seen: false, opcode: -1, msn: 0, ulp: 0, hdr, hdrLen: hdr.length,
    segLen: plen, rnrArmed: false, rnrNaked: false, held: 0, heldEntries: 0, stag: 0, toBase: -1, fail: { term },
  });
}

/**
 * rc QP `qp` is being destroyed (its device closing): tell a sabre peer with a Terminate that
 * means a graceful close, acking everything completed here, so its QP reports the disconnect
 * at once instead of finding us gone by its retries or keepalive. It travels in order on the
 * QP's stream, inside the link's validated context (udp) or connection (tcp).
 */
export function closeNotice(e: EngineState, qp: EngineQp, flow: Flow): void {
  const ssn = nextSsn(e, qp, flow);
  emit(e, flow, ctlFrame({
    srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.Terminate, qn: Qn.Terminate, msn: flow.termMsn++,
    bodyLen: 4, ack: flow.expected - 1, body: (b, o) => encodeTerminate({ ...TERM.peerClosed, m: false, d: false }, b, o),
  }));
}

/** A message already taken off the ordering queue failed while executing. */
function fatalNow(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, term: TermCode): void {
  m.fail = { term };
  fatal(e, qp, flow, m);
}

/**
 * Protocol error on message m: Terminate to the peer (acking everything before m), local
 * completions, ERROR — rc. srd: the error is that one flow's, which is dropped (flowError).
 */
function fatal(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage): void {
  const fail = m.fail!;
  const hdr = m.hdr ?? NO_HDR;
  let copy: Uint8Array | undefined;
  if (hdr.length === 14 || hdr.length === 18) {
    copy = new Uint8Array(2 + hdr.length);
    copy[0] = (m.segLen >>> 8) & 0xff;
    copy[1] = m.segLen & 0xff;
    copy.set(hdr, 2);
  }
  const ssn = nextSsn(e, qp, flow);
  emit(e, flow, ctlFrame({
    srcQpn: qp.qpn, dstQpn: flow.rqpn, ssn, opcode: RdmapOpcode.Terminate, qn: Qn.Terminate, msn: flow.termMsn++,
    bodyLen: 4 + (copy ? copy.length : 0), ack: m.ssn - 1,
    body: (b, o) => encodeTerminate({ ...fail.term, m: !!copy, d: !!copy, ...(copy ? { hdrCopy: copy } : {}) }, b, o),
  }));
  e.counters.terminatesSent++;
  // Local side: a receive that took the bad message, or our own read whose response was bad.
  if (fail.local !== undefined) {
    if (rowOf(m.opcode)?.arrive === 'readResponse') {
      // The oldest outstanding read is the one whose answer went wrong (responses come in order).
      const w = flow.reads.values().next().value;
      if (w) {
        flowError(e, qp, flow, w, fail.local, m);
        return;
      }
    } else if (m.recv || qp.type === 'rc') {
      const r = m.recv ?? (qp.type === 'rc' ? qp.rq.at(m.msn - 1 - qp.rqConsumed) : undefined);
      if (r) {
        qp.rq.removeAt(qp.rq.indexOf(r));
        recvComplete(e, qp, flow, { wrId: r.wrId, status: fail.local, opcode: WcOpcode.Recv, byteLen: 0, qpn: qp.qpn });
        if (m.recv === r) m.recv = undefined;
      }
    }
  }
  flowError(e, qp, flow, undefined, undefined, m);
}

