// Deterministic harness for the sans-I/O engine: two (or more) engines over real device
// memories, a virtual clock, and a link that never drops but reorders and delays frames as a
// seeded PRNG decides. No timers, no sleeps: `run()` delivers until nothing is in flight and
// no engine timer is pending, advancing the virtual clock only to the next engine deadline.
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { RdmapEngine } from '../../src/rdmap/engine.js';
import { EngineMemory, type MrRecord } from '../../src/rdmap/memory.js';
import { rowForWr } from '../../src/rdmap/opcodes.js';
import { type EngineQp, newSendWork, type Piece, type QpCaps, type RecvWork, type SendWork } from '../../src/rdmap/state.js';
import type { DeviceAddress } from '../../src/core/address.js';
import type { Frame, Inbound } from '../../src/core/frame.js';
import { Access, Opcode } from '../../src/core/enums.js';
import type { SendWr } from '../../src/verbs/types.js';
import type { WorkCompletion } from '../../src/core/work.js';

export const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic;

export class Rng {
  #s: number;
  constructor(seed: number) {
    this.#s = (seed >>> 0) || 0x9e3779b9;
  }
  next(): number {
    let x = this.#s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#s = x >>> 0;
    return this.#s;
  }
  int(n: number): number {
    return this.next() % n;
  }
}

export class Sink {
  wcs: WorkCompletion[] = [];
  depth = Infinity;
  offer(wc: WorkCompletion): boolean {
    if (this.wcs.length >= this.depth) return false;
    this.wcs.push(wc);
    return true;
  }
  take(): WorkCompletion[] {
    const w = this.wcs;
    this.wcs = [];
    return w;
  }
}

export class Node {
  readonly addr: DeviceAddress;
  readonly mem: EngineMemory;
  readonly eng: RdmapEngine;
  readonly cq = new Sink();
  constructor(id: string, mem: EngineMemory, mss: number) {
    this.addr = { transport: 'harness', id };
    this.mem = mem;
    this.eng = new RdmapEngine(mem, { mss });
  }
  regMr(length: number, access = ALL, pd = 1): MrRecord {
    const addr = this.mem.dm.alloc(length);
    this.mem.dm.u8().fill(0, addr, addr + length);
    return this.mem.register({ addr, length, pd, access });
  }
  bytes(r: MrRecord, off = 0, len = r.length - off): Uint8Array {
    return this.mem.view(r, r.addr + off, len);
  }
}

export const caps = (o: Partial<QpCaps> = {}): QpCaps => ({
  maxSendWr: 4096, maxRecvWr: 4096, maxSge: 16, maxInline: 0, rnrRetry: 7, rnrTimeoutMs: 1, maxRdAtomic: 16, timeoutMs: 8000, ...o,
});

export interface LinkOptions {
  seed: number;
  /** Largest batch the link hands over at once. */
  maxBatch?: number;
  /** Probability (0..1) that a step picks frames at random rather than the oldest. */
  reorder?: number;
}

export class Harness {
  now = 0;
  readonly nodes: Node[] = [];
  readonly rng: Rng;
  readonly maxBatch: number;
  readonly reorder: number;
  inflight: { to: DeviceAddress; from: DeviceAddress; frame: Frame }[] = [];
  delivered = 0;
  constructor(o: LinkOptions) {
    this.rng = new Rng(o.seed);
    this.maxBatch = o.maxBatch ?? 8;
    this.reorder = o.reorder ?? 1;
  }

  async node(mss = 64): Promise<Node> {
    const dm = await DeviceMemory.create({ workerSlots: 0, initialBytes: 8 << 20 });
    const n = new Node(`n${this.nodes.length}`, new EngineMemory(dm), mss);
    this.nodes.push(n);
    return n;
  }

  byAddr(a: DeviceAddress): Node {
    return this.nodes.find((n) => n.addr.id === a.id)!;
  }

  collect(): void {
    for (const n of this.nodes) for (const o of n.eng.pollTransmit()) this.inflight.push({ to: o.to, from: n.addr, frame: o.frame });
  }

  /** Deliver one batch (random frames, random count) to one destination. */
  step(): void {
    const k = 1 + this.rng.int(this.maxBatch);
    const first = this.rng.next() / 2 ** 32 < this.reorder ? this.rng.int(this.inflight.length) : 0;
    const dest = this.inflight[first]!.to.id;
    const batch: Inbound[] = [];
    const pick = (i: number): void => {
      const [x] = this.inflight.splice(i, 1);
      batch.push({ from: x!.from, frame: x!.frame });
    };
    pick(first);
    for (let j = 1; j < k; j++) {
      const cands: number[] = [];
      for (let i = 0; i < this.inflight.length && cands.length < 16; i++) if (this.inflight[i]!.to.id === dest) cands.push(i);
      if (cands.length === 0) break;
      const useRandom = this.rng.next() / 2 ** 32 < this.reorder;
      pick(useRandom ? cands[this.rng.int(cands.length)]! : cands[0]!);
    }
    this.delivered += batch.length;
    this.byAddr({ transport: 'harness', id: dest }).eng.handleFrames(batch, this.now);
  }

  /** Run until quiet; returns the number of steps. Throws if it does not settle. */
  run(limit = 1_000_000): number {
    let steps = 0;
    for (;;) {
      this.collect();
      if (this.inflight.length > 0) {
        this.step();
        if (++steps > limit) throw new Error('harness did not settle');
        continue;
      }
      let t: number | undefined;
      for (const n of this.nodes) {
        const d = n.eng.pollTimeout();
        if (d !== undefined && (t === undefined || d < t)) t = d;
      }
      if (t === undefined) return steps;
      this.now = Math.max(this.now, t);
      for (const n of this.nodes) n.eng.handleTimeout(this.now);
    }
  }

  /** Two rc QPs (qpn 1 on each node), connected. */
  connect(a: Node, b: Node, c: Partial<QpCaps> = {}, qpn = 1): [EngineQp, EngineQp] {
    const qa = a.eng.createQp(qpn, 'rc', 1, caps(c), a.cq, a.cq);
    const qb = b.eng.createQp(qpn, 'rc', 1, caps(c), b.cq, b.cq);
    a.eng.connect(qa, b.addr, qpn, this.now);
    b.eng.connect(qb, a.addr, qpn, this.now);
    this.run();
    return [qa, qb];
  }
}

export const piece = (n: Node, r: MrRecord, off: number, len: number): Piece => ({ rec: r, addr: r.addr + off, len });

/** A send work request as QueuePair.postSend would copy it (the verbs checks are tested elsewhere). */
export function wr(w: SendWr, pieces: Piece[]): SendWork {
  const total = pieces.reduce((s, p) => s + p.len, 0);
  return newSendWork(w, rowForWr(w.opcode)!, pieces, total);
}

export const recv = (wrId: number, pieces: Piece[]): RecvWork => ({ wrId, pieces, total: pieces.reduce((s, p) => s + p.len, 0), claimed: false });

/**
 * An srd writer from `a`'s QP `qa` to `b`'s QP `qb`: send(id, fill) writes 16 bytes of `fill`
 * from the start of `src` to the start of `dst` on the a→b flow, then runs the wire.
 */
export function srdWriter(h: Harness, a: Node, qa: EngineQp, src: MrRecord, b: Node, qb: EngineQp, dst: MrRecord): (id: number, fill: number) => void {
  return (id, fill) => {
    a.bytes(src, 0, 16).fill(fill);
    const w = wr({ wrId: id, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(a, src, 0, 16)]);
    w.flow = a.eng.srdFlow(qa, b.addr, qb.qpn);
    a.eng.postSend(qa, w, h.now);
    h.run();
  };
}
