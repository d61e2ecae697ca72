// One simulation of whole NIC drivers (./node.ts) joined by a seeded, impaired network
// (./net.ts), on one virtual clock. Tests make nodes, connect QPs, post work through the
// drivers and run the clock; every run is bounded in steps and in virtual time, and throws
// rather than hangs when it does not get where it was asked to.
import type { MrRecord } from '../../src/rdmap/memory.js';
import type { EngineQp, QpCaps } from '../../src/rdmap/state.js';
import { Opcode } from '../../src/core/enums.js';
import { clean, SimNet, type Impairment } from './net.js';
import { SimNode, type NodeOptions } from './node.js';
import { piece, wr } from './work.js';

export interface Limits {
  /** Most network steps (an arrival or a timer each). */
  steps?: number;
  /** Most virtual milliseconds. */
  ms?: number;
}

const STEPS = 2_000_000;
const MS = 600_000;

export class Sim {
  readonly net: SimNet;
  readonly nodes: SimNode[] = [];

  constructor(readonly seed: number, imp: Impairment = clean) {
    this.net = new SimNet(imp, seed);
  }

  get now(): number {
    return this.net.now;
  }

  async node(o: NodeOptions = {}): Promise<SimNode> {
    const n = await SimNode.create(this.net, this.nodes.length + 1, this.seed, o);
    this.nodes.push(n);
    return n;
  }

  /**
   * Nothing left to happen but keepalives: no datagram on the wire or waiting to go, no
   * endpoint with data unacknowledged or an ACK owed, no engine timer (a request waiting for
   * its answer, an RNR retry).
   */
  quiet(): boolean {
    this.net.pollAll();
    if (this.net.inFlight > 0) return false;
    for (const n of this.nodes) if (n.ep.busy || n.engine.pollTimeout() !== undefined) return false;
    return true;
  }

  /** Run until `done()`; false if the network ran dry or a limit was reached first. */
  async run(done: () => boolean, l: Limits = {}): Promise<boolean> {
    const end = this.now + (l.ms ?? MS);
    const steps = l.steps ?? STEPS;
    for (let taken = 0; ; ) {
      const finished = done();
      // done() may poll the endpoints (quiet() does): if that queued anything, look again.
      if ((await this.#microtasks()) && taken++ < steps) continue;
      if (finished) return true;
      if (taken++ >= steps || !this.net.step(end)) return false;
      await this.#microtasks();
    }
  }

  /** Run until quiet(); throws if it does not get there within the limits. */
  async settle(l: Limits = {}): Promise<void> {
    if (!(await this.run(() => this.quiet(), l))) throw new Error(`the simulation did not settle by ${this.now} ms`);
  }

  /** Let `ms` of virtual time pass, everything due in it happening. */
  async advance(ms: number, l: Limits = {}): Promise<void> {
    const end = this.now + ms;
    const steps = l.steps ?? STEPS;
    for (let i = 0; this.net.step(end); i++) {
      if (i >= steps) throw new Error(`more than ${steps} steps in ${ms} ms`);
      await this.#microtasks();
    }
    this.net.now = end;
    await this.#microtasks();
  }

  #refused = 0;

  /**
   * What the code under test queued as microtasks (a link failure the udp core reports after
   * its flush) runs before the next step, as on the event loop; only awaited when something
   * was queued, so a run costs no promise per step.
   */
  async #microtasks(): Promise<boolean> {
    let n = 0;
    for (const x of this.nodes) n += x.link.refused;
    if (n === this.#refused) return false;
    this.#refused = n;
    await Promise.resolve();
    return true;
  }

  /** Two rc QPs `qpn`, one on each node, connected to each other. */
  async connect(a: SimNode, b: SimNode, c: Partial<QpCaps> = {}, qpn = 1): Promise<[EngineQp, EngineQp]> {
    const qa = a.qp(qpn, 'rc', c);
    const qb = b.qp(qpn, 'rc', c);
    a.driver.run((now) => a.engine.connect(qa, b.addr, qpn, now));
    b.driver.run((now) => b.engine.connect(qb, a.addr, qpn, now));
    if (!(await this.run(() => a.connected(qpn) && b.connected(qpn), { ms: 10_000 }))) throw new Error('the QPs did not connect');
    return [qa, qb];
  }
}

/**
 * An srd writer from `a`'s QP `qa` to `b`'s QP `qb`: send(id, fill) writes 16 bytes of `fill`
 * from the start of `src` to the start of `dst`, then lets the simulation settle.
 */
export function srdWriter(sim: Sim, a: SimNode, qa: EngineQp, src: MrRecord, b: SimNode, qb: EngineQp, dst: MrRecord): (id: number, fill: number) => Promise<void> {
  return async (id, fill) => {
    a.bytes(src, 0, 16).fill(fill);
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: id, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 16)]));
    await sim.settle();
  };
}
