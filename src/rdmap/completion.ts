// Completions and the ERROR state: work requests leave the send queue in posting order, each
// into its QP's send CQ (unsignaled successes silently); a QP that enters ERROR flushes what is
// outstanding; a full CQ moves every QP feeding it to ERROR (ibverbs' CQ overrun).
import { QpState, WcOpcode, WcStatus, type WcStatusValue } from '../core/enums.js';
import type { CompletionSink, WorkCompletion } from '../core/work.js';
import { releasePieces } from './memory.js';
import type { EngineQp, EngineState, SendWork } from './state.js';

export function complete(e: EngineState, cq: CompletionSink, wc: WorkCompletion): void {
  if (cq.offer(wc)) return;
  // CQ overrun (ibverbs: a catastrophic CQ error): every QP feeding this CQ goes to ERROR.
  if (e.overrun.has(cq)) return;
  e.overrun.add(cq);
  e.events.push({ kind: 'cqError', cq });
  for (const q of e.qps.values()) if (q.sendCq === cq || q.recvCq === cq) qpError(e, q);
}

/** Complete the finished work requests at the head of the send queue, in posting order. */
export function drainSq(e: EngineState, qp: EngineQp): void {
  while (qp.sq.length > 0 && qp.sq.at(0)!.done) {
    const w = qp.sq.shift()!;
    e.changed(qp);
    if (qp.tx > 0) qp.tx--;
    if (!w.inline) {
      const flushed = w.status !== WcStatus.Success;
      releasePieces(w.pieces, flushed);
      // The work is the caller's again with this completion: what the link still holds of its
      // bytes must become copies before the caller can reuse them (the driver's step end).
      if (flushed) for (const p of w.pieces) e.flushed.push({ rec: p.rec, addr: p.addr, len: p.len });
    }
    if (w.signaled || w.status !== WcStatus.Success) {
      complete(e, qp.sendCq, {
        wrId: w.wrId, status: w.status, opcode: w.wc, byteLen: w.status === WcStatus.Success ? w.byteLen : 0, qpn: qp.qpn,
      });
    }
  }
}

/** Mark `w` finished with `status` (its completion leaves with drainSq, in order). */
export function finish(w: SendWork, status: WcStatusValue, byteLen: number): void {
  if (w.done) return;
  w.done = true;
  w.status = status;
  w.byteLen = byteLen;
}

/**
 * Move to ERROR: `failing` completes with `status`, every other outstanding and later work
 * request with WrFlushErr. `fatal`: the QP failed by itself (not modify/destroy).
 */
export function qpError(e: EngineState, qp: EngineQp, failing?: SendWork, status?: WcStatusValue, fatal = true, cause?: 'closed' | 'lost'): void {
  if (qp.state === QpState.Error) return;
  qp.state = QpState.Error;
  qp.peerGone = cause !== undefined || status === WcStatus.RetryExcErr;
  e.changed(qp);
  for (const w of qp.sq) {
    if (w.done) continue;
    w.done = true;
    w.status = w === failing && status !== undefined ? status : WcStatus.WrFlushErr;
  }
  for (const f of qp.allFlows()) {
    f.inflight.clear();
    f.reads.clear();
    f.atomics.clear();
    f.pending.clear();
    f.clearAsked();
    f.writes = undefined;
    f.readsIn = 0;
    f.answerBytes = 0;
  }
  qp.recvHolders.clear();
  qp.oooEntries = 0;
  qp.oooBytes = 0;
  qp.rdAtomic = 0;
  drainSq(e, qp);
  const rq = qp.rq.takeAll();
  for (const r of rq) complete(e, qp.recvCq, { wrId: r.wrId, status: WcStatus.WrFlushErr, opcode: WcOpcode.Recv, byteLen: 0, qpn: qp.qpn });
  e.events.push(cause ? { kind: 'qpError', qpn: qp.qpn, fatal, cause } : { kind: 'qpError', qpn: qp.qpn, fatal });
}
