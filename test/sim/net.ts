// The simulated network: a virtual clock, a bottleneck link per direction with a bounded
// queue, and a seeded shim that drops, duplicates, corrupts, delays and reorders datagrams
// between UDP endpoints. No sockets, no timers, no sleeps: the same seed gives the same run.
// A node is an endpoint and whoever owns it — a bare endpoint in the transport's own tests, a
// whole NIC driver in ./node.ts.
import { UdpEndpoint, type EndpointOptions, type PeerAddress, type PollResult } from '../../src/transport/udp/endpoint.js';
import { rng } from './random.js';

export interface Impairment {
  drop: number;
  dup: number;
  corrupt: number;
  /** Fraction of datagrams held back by an extra delay (reordering). */
  reorder: number;
  reorderMs: number;
  latencyMs: number;
  jitterMs: number;
  /** Bottleneck rate in bytes per ms, and the most queueing delay it buffers before tail drop. */
  rateBytesPerMs: number;
  maxQueueMs: number;
}

export const clean: Impairment = {
  drop: 0, dup: 0, corrupt: 0, reorder: 0, reorderMs: 0, latencyMs: 0.05, jitterMs: 0,
  rateBytesPerMs: 1_000_000, maxQueueMs: 5,
};

/** No loss and no time on the wire: what the engine's clock says is all the time there is. */
export const instant: Impairment = { ...clean, latencyMs: 0, rateBytesPerMs: Infinity, maxQueueMs: Infinity };

/** Reordering and delay, nothing lost or changed. */
export const reordering: Impairment = { ...clean, reorder: 0.5, reorderMs: 1, jitterMs: 0.3 };

/** Every impairment at once. */
export const lossy: Impairment = { ...clean, drop: 0.05, dup: 0.05, corrupt: 0.03, reorder: 0.2, reorderMs: 2, jitterMs: 0.3 };

interface InFlight {
  at: number;
  seq: number;
  to: PeerAddress;
  from: PeerAddress;
  bytes: Uint8Array;
}

export interface NetNode {
  addr: PeerAddress;
  ep: UdpEndpoint;
  /** Called with each poll's events. */
  onPoll: (r: PollResult, now: number) => void;
  /** Called before each poll: an owner hands over what it has for the endpoint. */
  beforePoll?: (now: number) => void;
  /** The owner's own next deadline (its timer), and the call when time reaches it. */
  deadline?: () => number;
  onTime?: (now: number) => void;
}

export class SimNet {
  now = 0;
  readonly nodes = new Map<string, NetNode>();
  readonly stats = { sent: 0, dropped: 0, duplicated: 0, corrupted: 0, reordered: 0, queueDrops: 0 };
  private q: InFlight[] = [];
  private seq = 0;
  private linkFree = new Map<string, number>();
  private r: () => number;
  /** Optional filter: return false to drop (e.g. a peer that vanished). */
  filter: (from: PeerAddress, to: PeerAddress, bytes: Uint8Array) => boolean = () => true;

  constructor(public imp: Impairment, seed: number) {
    this.r = rng(seed);
  }

  add(addr: PeerAddress, opts: Partial<EndpointOptions>, onPoll: NetNode['onPoll'] = () => {}): NetNode {
    const n: NetNode = { addr, ep: new UdpEndpoint(opts), onPoll };
    this.nodes.set(`${addr.host}|${addr.port}`, n);
    return n;
  }

  /** Datagrams on the wire. */
  get inFlight(): number {
    return this.q.length;
  }

  private transmit(from: PeerAddress, to: PeerAddress, parts: Uint8Array[]): void {
    let len = 0;
    for (const p of parts) len += p.length;
    const bytes = new Uint8Array(len);
    let o = 0;
    for (const p of parts) {
      bytes.set(p, o);
      o += p.length;
    }
    this.stats.sent++;
    if (!this.filter(from, to, bytes)) return;
    const imp = this.imp;
    if (this.r() < imp.drop) {
      this.stats.dropped++;
      return;
    }
    const copies = this.r() < imp.dup ? 2 : 1;
    if (copies === 2) this.stats.duplicated++;
    for (let c = 0; c < copies; c++) {
      let b = bytes;
      if (this.r() < imp.corrupt) {
        b = bytes.slice();
        const at = Math.floor(this.r() * b.length);
        b[at] ^= 1 + Math.floor(this.r() * 255);
        this.stats.corrupted++;
      }
      const key = `${from.host}|${from.port}>${to.host}|${to.port}`;
      const start = Math.max(this.now, this.linkFree.get(key) ?? 0);
      if (start - this.now > imp.maxQueueMs) {
        this.stats.queueDrops++;
        continue;
      }
      const done = start + b.length / imp.rateBytesPerMs;
      this.linkFree.set(key, done);
      let at = done + imp.latencyMs + this.r() * imp.jitterMs;
      if (this.r() < imp.reorder) {
        at += this.r() * imp.reorderMs;
        this.stats.reordered++;
      }
      this.q.push({ at, seq: this.seq++, to, from, bytes: b });
    }
  }

  /** Poll every node, put its datagrams on the wire, hand events to its owner. */
  pollAll(): void {
    for (const n of this.nodes.values()) {
      n.beforePoll?.(this.now);
      const r = n.ep.poll(this.now);
      for (const d of r.datagrams) this.transmit(n.addr, d.to, d.parts);
      n.onPoll(r, this.now);
    }
  }

  /**
   * Advance to the next event (arrival or timer), never past `until`; false when nothing is
   * left to happen by then.
   */
  step(until = Infinity): boolean {
    this.pollAll();
    let next = Infinity;
    for (const f of this.q) if (f.at < next) next = f.at;
    for (const n of this.nodes.values()) next = Math.min(next, n.ep.nextDeadline(), n.deadline?.() ?? Infinity);
    if (next === Infinity || next > until) return false;
    this.now = Math.max(this.now, next);
    const due = this.q.filter((f) => f.at <= this.now).sort((a, b) => a.at - b.at || a.seq - b.seq);
    if (due.length > 0) this.q = this.q.filter((f) => f.at > this.now);
    for (const f of due) {
      const n = this.nodes.get(`${f.to.host}|${f.to.port}`);
      n?.ep.receive(f.bytes, f.from, this.now);
    }
    for (const n of this.nodes.values()) n.ep.tick(this.now);
    for (const n of this.nodes.values()) if ((n.deadline?.() ?? Infinity) <= this.now) n.onTime?.(this.now);
    return true;
  }

  /** Run until `done()` or nothing is left, bounded in steps. Returns steps taken. */
  run(done: () => boolean, maxSteps: number): number {
    let i = 0;
    while (i < maxSteps && !done()) {
      if (!this.step()) break;
      i++;
    }
    return i;
  }
}
