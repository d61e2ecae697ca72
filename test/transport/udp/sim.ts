// A deterministic network for the sans-I/O UDP transport: virtual clock, a bottleneck link
// with a bounded queue, and a seeded shim that drops, duplicates, corrupts, delays and
// reorders datagrams. No sockets, no timers, no sleeps.
import { UdpEndpoint, type EndpointOptions, type PeerAddress, type PollResult } from '../../../src/transport/udp/endpoint.js';

export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    // mulberry32
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function seededIds(seed: number): () => number {
  const r = rng(seed);
  return () => Math.floor(r() * 0xffffffff) + 1;
}

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

interface InFlight {
  at: number;
  seq: number;
  to: PeerAddress;
  from: PeerAddress;
  bytes: Uint8Array;
}

export interface Node {
  addr: PeerAddress;
  ep: UdpEndpoint;
  /** Called with each poll's events. */
  onPoll: (r: PollResult, now: number) => void;
  /** Called before each poll: an owner hands over what it has for the endpoint (test/nic). */
  beforePoll?: (now: number) => void;
  /** The owner's own next deadline (its timer), and the call when time reaches it. */
  deadline?: () => number;
  onTime?: (now: number) => void;
}

export class SimNet {
  now = 0;
  readonly nodes = new Map<string, Node>();
  readonly stats = { sent: 0, dropped: 0, duplicated: 0, corrupted: 0, reordered: 0, queueDrops: 0 };
  private q: InFlight[] = [];
  private seq = 0;
  private linkFree = new Map<string, number>();
  private r: () => number;
  /** Optional filter: return false to drop (e.g. a peer that vanished). */
  filter: (from: PeerAddress, to: PeerAddress, bytes: Uint8Array) => boolean = () => true;

  constructor(readonly imp: Impairment, seed: number) {
    this.r = rng(seed);
  }

  add(addr: PeerAddress, opts: Partial<EndpointOptions>, onPoll: Node['onPoll'] = () => {}): Node {
    const n: Node = { addr, ep: new UdpEndpoint(opts), onPoll };
    this.nodes.set(`${addr.host}|${addr.port}`, n);
    return n;
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

  /** Advance to the next event (arrival or timer); false when nothing is left to happen. */
  step(): boolean {
    this.pollAll();
    let next = Infinity;
    for (const f of this.q) if (f.at < next) next = f.at;
    for (const n of this.nodes.values()) next = Math.min(next, n.ep.nextDeadline(), n.deadline?.() ?? Infinity);
    if (next === Infinity) return false;
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

/** Deterministic payload bytes: the 4-byte index, then a stream keyed by it. */
export function makePayload(index: number, len: number): Uint8Array {
  const b = new Uint8Array(len);
  b[0] = index >>> 24;
  b[1] = index >>> 16;
  b[2] = index >>> 8;
  b[3] = index;
  let x = (index * 2654435761) >>> 0 || 1;
  for (let i = 4; i < len; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x;
  }
  return b;
}

export function payloadIndex(b: Uint8Array): number {
  return ((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0;
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
