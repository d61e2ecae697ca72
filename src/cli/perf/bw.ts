// Bandwidth tests. The active side keeps tx-depth operations in flight round-robin over its QPs
// (perftest's run_iter_bw); the passive side's only duty is to keep receives posted when the
// test consumes them (sends, writes with immediate). With -b both sides do both.
import { Opcode } from '../../index.js';
import type { Wc } from './wc.js';
import { type BwRow, bwRow, Stamps, withinMargins } from './results.js';
import type { PerfSide, SideInfo } from './side.js';

export interface BwRun {
  size: number;
  /** Iterations to run, or Infinity with a deadline. */
  iters: number;
  durationS: number | undefined;
}

/** The work request of operation `i` of a bandwidth test (opcode and operands per verb). */
function opFields(side: PerfSide, peer: SideInfo, size: number, slot: number, i: number): Record<string, unknown> {
  const p = side.p;
  const local = { addr: side.slotAddr(slot), length: size, lkey: side.mr.lkey };
  const remote = { remoteAddr: peer.vaddr + slot * peer.slotBytes, rkey: peer.rkey };
  switch (p.verb) {
    case 'write':
      return p.imm ? { opcode: Opcode.RdmaWriteWithImm, imm: i >>> 0, sgList: [local], ...remote } : { opcode: Opcode.RdmaWrite, sgList: [local], ...remote };
    case 'read':
      return { opcode: Opcode.RdmaRead, sgList: [local], ...remote };
    case 'send':
      return p.imm ? { opcode: Opcode.SendWithImm, imm: i >>> 0, sgList: [local] } : { opcode: Opcode.Send, sgList: [local] };
    default:
      return p.atomicType === 'CMP_AND_SWAP'
        ? { opcode: Opcode.AtomicCmpSwap, compareAdd: 0n, swap: BigInt(i), sgList: [{ ...local, length: 8 }], ...remote }
        : { opcode: Opcode.AtomicFetchAdd, compareAdd: 1n, sgList: [{ ...local, length: 8 }], ...remote };
  }
}

/**
 * One size of a bandwidth test on the active side. With --cq-mod N only every Nth work request
 * of a QP is signalled; its completion accounts for the QP's unsignalled ones before it (rc
 * completes a QP's work in order).
 */
export class BwSender {
  readonly stamps: Stamps;
  posted = 0;
  completed = 0;
  readonly start: number;
  #end = 0;
  readonly #deadline: number;
  readonly #target: number;
  /** Per QP: the operations each outstanding signalled work request accounts for, in order. */
  readonly #covers: number[][];
  readonly #unsignalled: number[];
  readonly #qIndex: Map<number, number>;
  #stopping = false;
  #resolve!: () => void;
  readonly done: Promise<void>;

  constructor(
    readonly side: PerfSide,
    readonly peer: SideInfo,
    readonly run: BwRun,
  ) {
    this.start = performance.now();
    this.#deadline = run.durationS !== undefined ? this.start + run.durationS * 1000 : Infinity;
    this.#target = run.durationS !== undefined ? Infinity : run.iters;
    this.stamps = new Stamps(Number.isFinite(this.#target) ? this.#target : 1 << 16);
    this.#covers = side.qps.map(() => []);
    this.#unsignalled = side.qps.map(() => 0);
    this.#qIndex = new Map(side.qps.map((qp, i) => [qp.qpn, i]));
    this.done = new Promise((r) => (this.#resolve = r));
  }

  get finished(): boolean {
    return this.#stopping && this.completed >= this.posted;
  }

  /** Fill the window. Call after every batch of completions. */
  post(): void {
    const { side, peer } = this;
    const p = side.p;
    const slots = Math.min(side.slots, peer.slots);
    const now = performance.now();
    if (!this.#stopping && (this.posted >= this.#target || now >= this.#deadline)) this.#stop();
    while (!this.#stopping && this.posted - this.completed < p.txDepth) {
      const i = this.posted;
      const last = i + 1 >= this.#target;
      const q = i % side.qps.length;
      const signaled = p.cqMod === 1 || this.#unsignalled[q]! + 1 >= p.cqMod || last;
      this.#postOne(q, i, slots, signaled);
      if (last) this.#stop();
    }
    if (this.finished) this.#finish();
  }

  #postOne(q: number, i: number, slots: number, signaled: boolean): void {
    const { side, peer } = this;
    this.stamps.ensure(i);
    this.stamps.posted[i] = performance.now();
    side.qps[q]!.postSend({ wrId: i, signaled, ...opFields(side, peer, this.run.size, i % slots, i), ...side.route(q, peer) } as never);
    this.posted++;
    if (signaled) {
      this.#covers[q]!.push(this.#unsignalled[q]! + 1);
      this.#unsignalled[q] = 0;
    } else this.#unsignalled[q]!++;
  }

  /** Stop posting; with --cq-mod, a last signalled operation on each QP that has unsignalled ones out. */
  #stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    const slots = Math.min(this.side.slots, this.peer.slots);
    for (let q = 0; q < this.side.qps.length; q++) if (this.#unsignalled[q]! > 0) this.#postOne(q, this.posted, slots, true);
  }

  /** A send completion (pass `batch` as the pump's batch hook to refill the window). */
  onSend = (wc: Wc, now: number): void => {
    const q = this.#qIndex.get(wc.qpn) ?? 0;
    const n = this.#covers[q]!.shift() ?? 1;
    for (let k = 0; k < n; k++) {
      this.stamps.ensure(this.completed);
      this.stamps.completed[this.completed++] = now;
    }
    this.#end = now;
  };

  batch = (): void => this.post();

  #finish(): void {
    this.#resolve();
  }

  row(): BwRow {
    const p = this.side.p;
    const s = withinMargins(
      { size: this.run.size, posted: this.stamps.posted, completed: this.stamps.completed, n: this.completed, noPeak: p.noPeak },
      this.start,
      this.#end,
      p.marginS,
    );
    return bwRow('sabre', s);
  }
}

/**
 * The receiving duty: keep rx-depth receives posted on every QP (each as large as the largest
 * message) and post a new one for each consumed. Runs for the whole connection, across sizes.
 */
export class Responder {
  consumed = 0;
  /** Latency tests hook the arrival of each message (to answer a ping). */
  onMessage: ((wc: Wc, q: number) => void) | undefined;

  constructor(readonly side: PerfSide, readonly depth: number) {
    side.qps.forEach((qp, q) => {
      for (let i = 0; i < depth; i++) this.#post(q, i);
    });
  }

  #post(q: number, i: number): void {
    const s = this.side;
    // Messages land in slot 0 for the latency tests' last-byte checks; bandwidth data is not
    // checked, so every receive can share it.
    s.qps[q]!.postRecv({ wrId: q, sgList: s.p.verb === 'send' ? [{ addr: s.slotAddr(0), length: s.slotBytes, lkey: s.mr.lkey }] : [] } as never);
    void i;
  }

  onRecv = (wc: Wc): void => {
    const q = Number(wc.wrId);
    this.consumed++;
    this.#post(q, this.consumed);
    this.onMessage?.(wc, q);
  };
}

/** Whether a side of this test must keep receives posted. */
export function needsReceives(p: { verb: string; imm: boolean }): boolean {
  return p.verb === 'send' || (p.verb === 'write' && p.imm);
}
