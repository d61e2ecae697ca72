// The application's table of a NIC-thread device's QPs by QPN (./thread-port.ts): the live QPs,
// and the destroyed ones whose flushes may still come (ThreadQp.fencing), so that a completion
// reaches the life of the QPN that made it. Records of one QPN come in order: a destroyed QP's
// flushes, then its fence record (QP_FENCE_CQ), then those of the next QP of that QPN.
import { WcOpcode, WcStatus } from '../core/enums.js';
import type { WrId } from '../core/work.js';
import type { ThreadQp } from './thread-qp.js';

/** A flush completion as flushAll hands it out: one record refilled for each (the CQ copies it). */
export interface FlushWc {
  wrId: WrId;
  status: number;
  opcode: number;
  byteLen: number;
  qpn: number;
  imm: undefined;
  srcQpn: undefined;
  src: undefined;
}

export class QpTable {
  readonly #live = new Map<number, ThreadQp>();
  /**
   * Destroyed QPs whose flushes may still come, by QPN, oldest first: theirs before a new QP's
   * of that QPN. A queue, not one entry: a QPN made again (CM_QPN) may be destroyed again
   * before the first destroy's fence came.
   */
  readonly #gone = new Map<number, ThreadQp[]>();

  get size(): number {
    return this.#live.size;
  }

  has(qpn: number): boolean {
    return this.#live.has(qpn);
  }

  add(qp: ThreadQp): void {
    this.#live.set(qp.qpn, qp);
  }

  /** `qp` was destroyed: its completions still come to it until its last fence. */
  forget(qp: ThreadQp): void {
    if (this.#live.get(qp.qpn) === qp) this.#live.delete(qp.qpn);
    if (!qp.fencing) return;
    const q = this.#gone.get(qp.qpn);
    if (q === undefined) this.#gone.set(qp.qpn, [qp]);
    else q.push(qp);
  }

  /** The QP a completion of `qpn` belongs to: a destroyed one's before the live one's. */
  route(qpn: number): ThreadQp | undefined {
    return (this.#gone.size > 0 ? this.#gone.get(qpn)?.[0] : undefined) ?? this.#live.get(qpn);
  }

  /** The fence record of `qpn` came: its oldest earlier life is done (a destroyed QP leaves with its last). */
  fence(qpn: number): void {
    const q = this.#gone.get(qpn);
    if (q === undefined) return this.#live.get(qpn)?.fenced();
    q[0]!.fenced();
    if (q[0]!.fencing) return;
    q.shift();
    if (q.length === 0) this.#gone.delete(qpn);
  }

  /** Every QP whose work may be outstanding, destroyed ones first. */
  all(): ThreadQp[] {
    return [...[...this.#gone.values()].flat(), ...this.#live.values()];
  }

  /** Every QP's outstanding work completes with WrFlushErr, into `offer` by CQ id (the NIC thread is gone); none held after. */
  flushAll(offer: (cq: number, wc: FlushWc) => void): void {
    const wc: FlushWc = { wrId: 0, status: WcStatus.WrFlushErr, opcode: 0, byteLen: 0, qpn: 0, imm: undefined, srcQpn: undefined, src: undefined };
    for (const qp of this.all()) qp.outstanding((cq, wrId, recv) => {
      wc.wrId = wrId;
      wc.opcode = recv ? WcOpcode.Recv : WcOpcode.Send;
      wc.qpn = qp.qpn;
      offer(cq, wc);
    });
  }

  clear(): void {
    this.#live.clear();
    this.#gone.clear();
  }
}
