// A deterministic model of two channel ends on one rc QP pair, for the sans-I/O core: virtual
// clock, a memory model that checks every remote placement against the regions the owner
// registered (live key, access, bounds — a write the model refuses is never placed), and an rc
// link per direction that delivers in posting order (a delayed message holds back the ones
// behind it, as on rc). Faults are injected per message by a filter: delay it, drop it silently
// (the sender sees success, the receiver nothing: a peer that ignores it), or fail it as a dead
// link would. No sockets, no timers, no sleeps. Each end's send queue has the depth the device's
// hub gives a channel's QP (less the dedup writes, which the core never posts): a post past it
// throws, as verbs' "send queue full" fails a real channel.
import { ChannelCore } from '../../src/channel/core.js';
import { DEDUP_WRS } from '../../src/channel/dedup.js';
import { ChannelHub } from '../../src/channel/hub.js';
import { resolveOptions, type ChannelOptions } from '../../src/channel/options.js';
import type { Action, ChannelPorts, Delivered, Outcome, Region, RegionUse, Seg } from '../../src/channel/ports.js';
import { decodeCtrl, parseImm, unpackRecords } from '../../src/channel/wire.js';

interface SimRegion {
  r: Region;
  use: RegionUse;
  bytes: Uint8Array;
}

const REMOTE_WRITE: ReadonlySet<RegionUse> = new Set(['fixed', 'eager']);

export class SimMemory implements ChannelPorts {
  readonly live = new Map<number, SimRegion>();
  #nextAddr: number;
  #nextKey: number;
  used = 0;
  /** Most bytes registered at once. */
  peak = 0;
  /** Remote accesses refused (bad key, access or bounds): nothing was placed. */
  refused = 0;
  /** Keys invalidated for remote access while the owner still holds the region (a deregister race). */
  readonly revoked = new Set<number>();
  regs = 0;
  deregs = 0;

  constructor(readonly name: string, base: number, public budget = 1 << 30) {
    this.#nextAddr = base;
    this.#nextKey = (base >>> 8) + 0x100;
  }

  reg(length: number, use: RegionUse): Region | undefined {
    if (this.used + length > this.budget) return undefined;
    const key = this.#nextKey++ << 8 | 0x5a;
    const r: Region = { addr: this.#nextAddr, length, lkey: key >>> 0, rkey: key >>> 0 };
    this.#nextAddr += Math.ceil(Math.max(length, 1) / 64) * 64 + 64;
    this.live.set(r.rkey, { r, use, bytes: new Uint8Array(length) });
    this.used += length;
    this.peak = Math.max(this.peak, this.used);
    this.regs++;
    return r;
  }

  dereg(r: Region): void {
    const s = this.live.get(r.rkey);
    if (!s || s.r !== r) throw new Error(`${this.name}: dereg of a region that is not registered (rkey ${r.rkey.toString(16)})`);
    this.live.delete(r.rkey);
    this.used -= r.length;
    this.deregs++;
  }

  #local(r: Region, off: number, len: number): SimRegion {
    const s = this.live.get(r.rkey);
    if (!s || s.r !== r) throw new Error(`${this.name}: local access to a region that is not registered`);
    if (off < 0 || off + len > r.length) throw new Error(`${this.name}: local access [${off}, +${len}) outside a ${r.length}-byte region`);
    return s;
  }

  read(r: Region, off: number, len: number): Uint8Array {
    return this.#local(r, off, len).bytes.slice(off, off + len);
  }

  write(r: Region, off: number, bytes: Uint8Array): void {
    this.#local(r, off, bytes.length).bytes.set(bytes, off);
  }

  /** The responder's checks for an RDMA WRITE: key, access, bounds. */
  remoteWrite(rkey: number, addr: number, bytes: Uint8Array): boolean {
    const s = this.live.get(rkey);
    if (!s || this.revoked.has(rkey) || !REMOTE_WRITE.has(s.use) || addr < s.r.addr || addr + bytes.length > s.r.addr + s.r.length) {
      this.refused++;
      return false;
    }
    s.bytes.set(bytes, addr - s.r.addr);
    return true;
  }

  remoteRead(rkey: number, addr: number, len: number): Uint8Array | undefined {
    const s = this.live.get(rkey);
    if (!s || this.revoked.has(rkey) || s.use !== 'source' || addr < s.r.addr || addr + len > s.r.addr + s.r.length) {
      this.refused++;
      return undefined;
    }
    return s.bytes.slice(addr - s.r.addr, addr - s.r.addr + len);
  }
}

export type Wire =
  | { kind: 'send'; wrId: number; bytes: Uint8Array }
  | { kind: 'write'; wrId: number; bytes: Uint8Array; remoteAddr: number; rkey: number; imm: number }
  | { kind: 'read'; wrId: number; local: Seg; remoteAddr: number; rkey: number };

/** What the filter sees of a message: its wire form and, for control messages, the type. */
export interface WireInfo {
  from: 'a' | 'b';
  w: Wire;
  /** Control message type (HELLO included), or undefined for data / reads. */
  ctrl?: number;
  /** Data message: epoch and slot from the immediate; count > 1 when packed (seqs seq .. seq+count-1). */
  data?: { epoch: number; slot: number; seq: number; len: number; count: number };
}

/**
 * 'hold': never delivered and never completed, and nothing behind it waits for it — a responder
 * that leaves one request (a read) unanswered while everything else flows.
 */
export type Verdict = 'deliver' | 'drop' | 'fail' | 'hold' | { delayMs: number };

interface InFlight {
  w: Wire;
  at: number;
  drop: boolean;
  fail: boolean;
}

export class SimEnd {
  readonly core: ChannelCore;
  readonly mem: SimMemory;
  readonly posted: (Seg | undefined)[] = [];
  readonly received: unknown[] = [];
  readonly placed = new Set<number>();
  seqs: number[] = [];
  events: string[] = [];
  failed: { kind: string; message: string } | undefined;
  ended = false;
  torn = false;
  connected = false;
  /** Take messages as soon as they are readable. */
  autoTake = true;
  /** Send-queue depth (the hub's maxSendWr for these options, less the dedup writes). */
  readonly sqDepth: number;
  /** The most send work requests this end had posted and not completed at once. */
  sqPeak = 0;
  /** Posted, filtered 'hold': outstanding for ever (until the QP goes). */
  readonly held: Wire[] = [];

  constructor(readonly name: 'a' | 'b', opts: ChannelOptions, now: number, memBudget?: number, preauthMax = 0) {
    this.mem = new SimMemory(name, name === 'a' ? 0x100000 : 0x40000000, memBudget);
    const o = resolveOptions(opts);
    this.sqDepth = ChannelHub.caps(o).maxSendWr - DEDUP_WRS;
    this.core = new ChannelCore(o, this.mem, now, preauthMax);
  }

  take(now: number): Delivered | undefined {
    const d = this.core.pollMessage(now);
    if (d) this.received.push(d.value ? { value: d.bytes } : d.bytes);
    return d;
  }
}

export interface SimOptions {
  a?: ChannelOptions;
  b?: ChannelOptions;
  /** One-way latency of every message, ms. */
  latencyMs?: number;
  filter?: (info: WireInfo) => Verdict;
  memA?: number;
  memB?: number;
  /** b starts untrusted (a listener's preauth.maxMessage). */
  preauthB?: number;
}

export class SimPair {
  now = 0;
  readonly a: SimEnd;
  readonly b: SimEnd;
  readonly #flight: { a: InFlight[]; b: InFlight[] } = { a: [], b: [] };
  readonly latency: number;
  filter: (info: WireInfo) => Verdict;
  delivered = 0;

  constructor(o: SimOptions = {}) {
    this.latency = o.latencyMs ?? 0.05;
    this.filter = o.filter ?? (() => 'deliver');
    this.a = new SimEnd('a', o.a ?? {}, 0, o.memA);
    this.b = new SimEnd('b', o.b ?? {}, 0, o.memB, o.preauthB);
    this.#drain(this.a);
    this.#drain(this.b);
    // The QPs connect: both send HELLO.
    this.a.core.start(this.now);
    this.b.core.start(this.now);
    this.#drain(this.a);
    this.#drain(this.b);
  }

  #peer(e: SimEnd): SimEnd {
    return e === this.a ? this.b : this.a;
  }

  /** Carry out the actions of one end. */
  #drain(e: SimEnd): void {
    for (let guard = 0; guard < 10_000; guard++) {
      // Every delivery is a batch of one: credits owed go out now.
      e.core.handleBatchEnd(this.now);
      let n = 0;
      for (let a = e.core.pollAction(); a; a = e.core.pollAction(), n++) this.#act(e, a);
      if (n === 0) return;
    }
    throw new Error('actions did not settle');
  }

  #act(e: SimEnd, a: Action): void {
    const q = this.#flight[e.name];
    switch (a.kind) {
      case 'recv':
        for (let i = 0; i < a.n; i++) e.posted.push(i === 0 ? a.hello : undefined);
        return;
      case 'send':
        e.mem.write(a.local.region, a.local.off, a.bytes);
        return this.#post(e, q, { kind: 'send', wrId: a.wrId, bytes: e.mem.read(a.local.region, a.local.off, a.local.len) });
      case 'write':
        // Inline: copied at post time, as verbs does with maxInline.
        if (a.bytes) e.mem.write(a.local!.region, a.local!.off, a.bytes);
        return this.#post(e, q, {
          kind: 'write', wrId: a.wrId, bytes: a.local ? e.mem.read(a.local.region, a.local.off, a.local.len) : new Uint8Array(0),
          remoteAddr: a.remoteAddr, rkey: a.rkey, imm: a.imm,
        });
      case 'read':
        return this.#post(e, q, { kind: 'read', wrId: a.wrId, local: a.local, remoteAddr: a.remoteAddr, rkey: a.rkey });
      case 'connected':
        e.connected = true;
        return;
      case 'placed':
        e.placed.add(a.seq);
        return;
      case 'readable':
        if (e.autoTake) while (e.take(this.now));
        return;
      case 'ended':
        e.ended = true;
        return;
      case 'failed':
        e.failed = { kind: a.cause, message: a.message };
        e.events.push(`failed ${a.cause}: ${a.message}`);
        return;
      case 'teardown':
        e.torn = true;
        // The QP is destroyed: its receives are gone; what it had on the wire still arrives.
        e.posted.length = 0;
        e.held.length = 0;
        e.core.releaseMemory();
        return;
    }
  }

  #info(from: 'a' | 'b', w: Wire): WireInfo {
    const info: WireInfo = { from, w };
    if (w.kind === 'send') {
      const r = decodeCtrl(w.bytes);
      if (r.ok) info.ctrl = r.msg.type;
    } else if (w.kind === 'write') {
      const f = parseImm(w.imm);
      if (f.ctrl) {
        const r = decodeCtrl(w.bytes);
        if (r.ok) info.ctrl = r.msg.type;
      } else {
        const recs = f.packed ? unpackRecords(w.bytes) : undefined;
        info.data = { epoch: f.epoch, slot: f.slot, seq: f.seq, len: w.bytes.length, count: Array.isArray(recs) ? recs.length : 1 };
      }
    }
    return info;
  }

  #post(e: SimEnd, q: InFlight[], w: Wire): void {
    const v = this.filter(this.#info(e.name, w));
    const last = q.length ? q[q.length - 1]!.at : 0;
    const delay = typeof v === 'object' ? v.delayMs : 0;
    // Everything posted and not delivered is uncompleted (completions come at delivery).
    if (q.length + e.held.length >= e.sqDepth) throw new Error(`${e.name}: send queue full (${e.sqDepth} work requests outstanding)`);
    e.sqPeak = Math.max(e.sqPeak, q.length + e.held.length + 1);
    if (v === 'hold') {
      e.held.push(w);
      return;
    }
    // rc: nothing overtakes what was posted before it.
    q.push({ w, at: Math.max(last, this.now + this.latency + delay), drop: v === 'drop', fail: v === 'fail' });
  }

  #complete(e: SimEnd, wrId: number, r: Outcome): void {
    if (e.torn) return;
    e.core.handleComplete(wrId, r, this.now);
    this.#drain(e);
  }

  /** Deliver one in-flight message from `from`. */
  #deliver(from: SimEnd, f: InFlight): void {
    const to = this.#peer(from);
    const w = f.w;
    this.delivered++;
    if (f.fail) return this.#complete(from, w.wrId, { ok: false, why: 'link', status: 'RetryExcErr' });
    if (f.drop) return this.#complete(from, w.wrId, { ok: true });
    if (to.torn) return this.#complete(from, w.wrId, { ok: false, why: 'link', status: 'RetryExcErr' });
    if (w.kind === 'read') {
      const bytes = to.mem.remoteRead(w.rkey, w.remoteAddr, w.local.len);
      if (!bytes) {
        this.#complete(from, w.wrId, { ok: false, why: 'remote', status: 'RemAccessErr' });
        return this.#qpError(to, 'the peer read outside what it was granted');
      }
      if (!from.torn) from.mem.write(w.local.region, w.local.off, bytes);
      return this.#complete(from, w.wrId, { ok: true });
    }
    if (w.kind === 'write' && !to.mem.remoteWrite(w.rkey, w.remoteAddr, w.bytes)) {
      this.#complete(from, w.wrId, { ok: false, why: 'remote', status: 'RemAccessErr' });
      return this.#qpError(to, 'the peer wrote outside what it was granted');
    }
    if (to.posted.length === 0) {
      // No receive posted: RNR; with credits honoured this never happens.
      return this.#complete(from, w.wrId, { ok: false, why: 'rnr', status: 'RnrRetryExcErr' });
    }
    const recv = to.posted.shift();
    if (w.kind === 'send') {
      if (!recv || recv.len < w.bytes.length) {
        this.#complete(from, w.wrId, { ok: false, why: 'remote', status: 'RemOpErr' });
        return this.#qpError(to, 'a Send found no buffer');
      }
      to.mem.write(recv.region, recv.off, w.bytes);
      to.core.handleRecv(w.bytes.length, this.now);
    } else {
      to.core.handleImm(w.imm, w.bytes.length, this.now);
    }
    this.#drain(to);
    this.#complete(from, w.wrId, { ok: true });
  }

  #qpError(e: SimEnd, why: string): void {
    if (e.torn) return;
    e.core.handleQpError(why, this.now);
    this.#drain(e);
  }

  /** Run until nothing is in flight and no deadline is due before `untilMs` (or pred holds). */
  run(untilMs = this.now + 60_000, pred?: () => boolean): void {
    for (let guard = 0; guard < 5_000_000; guard++) {
      if (pred?.()) return;
      // The earliest in-flight head of either direction.
      let best: { from: SimEnd; f: InFlight } | undefined;
      for (const from of [this.a, this.b]) {
        const f = this.#flight[from.name][0];
        if (f && (!best || f.at < best.f.at)) best = { from, f };
      }
      const deadlines = [this.a, this.b].map((e) => (e.torn ? undefined : e.core.pollTimeout())).filter((d): d is number => d !== undefined);
      const dl = deadlines.length ? Math.min(...deadlines) : Infinity;
      if (best && best.f.at <= dl) {
        if (best.f.at > untilMs) return;
        this.now = Math.max(this.now, best.f.at);
        this.#flight[best.from.name].shift();
        this.#deliver(best.from, best.f);
        continue;
      }
      if (dl === Infinity || dl > untilMs) {
        this.now = Math.max(this.now, Math.min(untilMs, dl));
        return;
      }
      this.now = Math.max(this.now, dl);
      for (const e of [this.a, this.b]) {
        if (e.torn) continue;
        e.core.handleTimeout(this.now);
        this.#drain(e);
      }
    }
    throw new Error('simulation did not settle');
  }

  /** Run for ms of virtual time. */
  advance(ms: number): void {
    this.run(this.now + ms);
  }

  send(from: SimEnd, bytes: Uint8Array, value = false): number {
    const seq = from.core.send(bytes, value, this.now);
    from.seqs.push(seq);
    this.#drain(from);
    return seq;
  }

  close(e: SimEnd): void {
    e.core.close(this.now);
    this.#drain(e);
  }

  takeAll(e: SimEnd): void {
    while (e.take(this.now));
    this.#drain(e);
  }

  inFlight(): number {
    return this.#flight.a.length + this.#flight.b.length;
  }
}

export function pattern(len: number, seed: number): Uint8Array {
  const b = new Uint8Array(len);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < len; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}
