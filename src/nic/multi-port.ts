// A device of several NIC threads (openDevice `workers: n`, n ≥ 2): the port the verbs layer
// talks to, over one thread port (./thread-port.ts) per NIC thread. As a NIC's receive-side
// scaling gives each queue its own flows, each thread owns its own socket, the transport
// contexts of the peers its QPs talk to, and those QPs: QP q lives on thread q mod n, and the
// device's address lists every thread's port so a peer reaches q at its thread's socket
// (src/core/peer-route.ts: the verbs layer routes connects, srd sends and dials). What is the device's, not a thread's, is shared:
// - device memory: one shared memory and one allocator, the first thread's; the others attach
//   (./thread-arena.ts). Features above verbs allocate through the first thread, as with one.
// - memory registration: the first thread registers (it alone writes the region table, so a
//   region's keys are chosen once) and the others adopt the region: the same keys everywhere.
//   A deregister reaches every thread; the memory returns once no thread's queued send names it
//   (./shared-regions.ts).
// - completion queues: a CQ is fed by every thread's completion ring (./fan-in-cq.ts); poll and
//   wait drain them all, and any thread's doorbell wakes a waiter.
// - the connection manager: a tcp listener listens on every thread; a dialer reaches the
//   thread its own QPN names (or thread 0, knowing only `port`), and the accepting QP is made on
//   the thread that took the request (its connection is there). udp's CM agent QP is on thread
//   0; a requester that knows only `port` gets its accepting QP there too, and a requester's own
//   QP is there when the listener's address lists no ports (src/cm/index.ts).
// - stats() sums the threads; close() closes them all; a thread that fails fails the device.
import type { DeviceAddress } from '../core/address.js';
import type { ServiceRequest } from '../core/link.js';
import type { DeviceMemory } from '../dataplane/device-memory.js';
import type { EngineBounds } from '../rdmap/bounds.js';
import type { QpCaps } from '../rdmap/state.js';
import { FanInCq } from './fan-in-cq.js';
import { threadOf } from '../core/peer-route.js';
import type { NicPort, PortCq, PortEvent, PortMr, PortQp, PortStats } from './port.js';
import { arenaMailboxes } from './thread-arena.js';
import { ThreadPort } from './thread-port.js';
import type { ThreadMr } from './thread-qp.js';

type Limits = { engine: Record<string, number>; link: Record<string, number> };

export class MultiPort implements NicPort {
  readonly address: DeviceAddress;
  readonly mtu: number | undefined;
  readonly integrity: 'crc32c' | 'xxh3' | 'none' | undefined;
  readonly mss: number;
  readonly maxControl: number;
  readonly bounds: EngineBounds;
  readonly linkServices: boolean;
  readonly keepsPieces = false;
  readonly #ports: readonly ThreadPort[];
  readonly #cqs = new Map<PortCq, FanInCq>();
  /** A thread's part of a CQ → the CQ (a CQ error names the part). */
  readonly #partOf = new Map<PortCq, PortCq>();
  /** Regions whose memory is the device's to give back (regDevice): their deregister is fenced. */
  readonly #owned = new WeakSet<PortMr>();
  /** The thread the next QP is made on (a tcp listener's handler, for the thread that took the request). */
  #placeNext: number | undefined;
  #fatal = false;
  #closedP: Promise<void> | undefined;

  private constructor(ports: ThreadPort[]) {
    this.#ports = ports;
    const p0 = ports[0]!;
    this.address = Object.freeze({ ...p0.address, ports: Object.freeze(ports.map((p) => p.address.port as number)) });
    this.mtu = p0.mtu;
    this.integrity = p0.integrity;
    this.mss = p0.mss;
    this.maxControl = p0.maxControl;
    this.bounds = p0.bounds;
    this.linkServices = p0.linkServices;
  }

  /** Start `n` NIC threads: the first opens the device memory and the advertised address, the others attach to it on sockets of their own. */
  static async open(transport: string, opts: Record<string, unknown>, limits: Limits, n: number): Promise<MultiPort> {
    const arenas = arenaMailboxes(n - 1);
    const first = await ThreadPort.open(transport, opts, limits, { arenas });
    const dm = first.dataPlane;
    const attach = (i: number) => ({ memory: dm.memory, module: dm.module, map: { ...dm.map }, maximumBytes: dm.maximumBytes, arena: arenas[i]! });
    const rest = await Promise.allSettled(Array.from({ length: n - 1 }, (_, i) => ThreadPort.open(transport, { ...opts, port: 0 }, limits, { attach: attach(i) })));
    const failed = rest.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      for (const r of rest) if (r.status === 'fulfilled') await r.value.close();
      await first.close();
      throw failed.reason;
    }
    return new MultiPort([first, ...rest.map((r) => (r as PromiseFulfilledResult<ThreadPort>).value)]);
  }

  /** @internal the thread ports, first first (tests read each thread's stats). */
  get threads(): readonly ThreadPort[] {
    return this.#ports;
  }

  get dataPlane(): DeviceMemory {
    return this.#ports[0]!.dataPlane;
  }

  batch(fn: () => void): void {
    // Posts inside fn may go to any thread: each rings its doorbell once, at the end.
    let run = fn;
    for (const p of this.#ports) {
      const inner = run;
      run = () => p.batch(inner);
    }
    run();
  }

  start(onEvent: (ev: PortEvent) => void): void {
    for (const p of this.#ports) {
      p.start((ev) => {
        if (ev.kind === 'cqError') return onEvent({ kind: 'cqError', cq: this.#partOf.get(ev.cq as PortCq) ?? ev.cq } as PortEvent);
        if (ev.kind === 'deviceFatal') {
          // One thread gone is the device gone: said once; the device's close ends the others.
          if (this.#fatal) return;
          this.#fatal = true;
        }
        onEvent(ev);
      });
    }
  }

  stats(contextsShown: number): PortStats {
    const all = this.#ports.map((p) => p.stats(contextsShown));
    const out = all[0]!;
    for (const s of all.slice(1)) {
      sum(out.counters as unknown as Record<string, number>, s.counters as unknown as Record<string, number>);
      if (out.link && s.link) sum(out.link, s.link);
      if (out.nic && s.nic) sum(out.nic as unknown as Record<string, number>, s.nic as unknown as Record<string, number>);
      if (out.linkContexts && s.linkContexts) out.linkContexts.push(...s.linkContexts);
    }
    if (out.linkContexts) out.linkContexts.length = Math.min(out.linkContexts.length, contextsShown);
    return out;
  }

  reachable(a: DeviceAddress): boolean {
    return this.#ports[0]!.reachable(a);
  }

  view(addr: number, length: number): Uint8Array {
    return this.#ports[0]!.view(addr, length);
  }

  regDevice(length: number, pd: number, access: number): PortMr {
    const mr = this.#shared(this.#ports[0]!.regDevice(length, pd, access));
    this.#owned.add(mr);
    return mr;
  }

  regExternal(buf: Uint8Array, pd: number, access: number): PortMr {
    return this.#shared(this.#ports[0]!.regExternal(buf, pd, access));
  }

  /** The first thread's region, adopted by the others (undone on every thread if one refuses). */
  #shared(mr: PortMr): PortMr {
    const done: ThreadPort[] = [];
    try {
      for (const p of this.#ports.slice(1)) {
        p.adopt(mr as ThreadMr);
        done.push(p);
      }
    } catch (e) {
      for (const p of done) p.deregister(mr, { adopted: true });
      this.#ports[0]!.deregister(mr);
      throw e;
    }
    return mr;
  }

  deregister(mr: PortMr): void {
    const [p0, ...rest] = this.#ports as [ThreadPort, ...ThreadPort[]];
    // The region's memory goes back once every thread is done with it: a count of them in
    // device memory (the fence word), each thread taking one off (./shared-regions.ts).
    let fence: number | undefined;
    // None while the device closes: the memory goes with it (and nothing is allocated then).
    if (this.#owned.delete(mr) && p0.callable && !p0.isClosing) {
      const dm = p0.dataPlane;
      fence = dm.alloc(8, 8);
      Atomics.store(new Int32Array(dm.buffer(), fence, 1), 0, this.#ports.length);
    }
    // The first thread first: its region table entry goes, so the keys stop on every thread at once.
    p0.deregister(mr, fence === undefined ? undefined : { fence });
    for (const p of rest) p.deregister(mr, { adopted: true, ...(fence === undefined ? {} : { fence }) });
  }

  lookup(stag: number): PortMr | undefined {
    return this.#ports[0]!.lookup(stag);
  }

  check(stag: number, pd: number, addr: number, len: number, access: number): number {
    return this.#ports[0]!.check(stag, pd, addr, len, access);
  }

  addCq(cq: PortCq): void {
    const fan = new FanInCq(cq, this.#ports.length);
    const done: number[] = [];
    try {
      for (let i = 0; i < this.#ports.length; i++) {
        this.#ports[i]!.addCq(fan.parts[i]!);
        done.push(i);
      }
    } catch (e) {
      for (const i of done) this.#ports[i]!.dropCq(fan.parts[i]!);
      throw e;
    }
    this.#cqs.set(cq, fan);
    for (const part of fan.parts) this.#partOf.set(part, cq);
    cq.bind?.(fan.source, 0);
  }

  dropCq(cq: PortCq): void {
    const fan = this.#cqs.get(cq);
    if (!fan) return;
    this.#cqs.delete(cq);
    fan.parts.forEach((part, i) => {
      this.#partOf.delete(part);
      this.#ports[i]!.dropCq(part);
    });
  }

  hasQpn(qpn: number): boolean {
    return this.#ports.some((p) => p.hasQpn(qpn));
  }

  createQp(qpn: number, type: 'rc' | 'srd', pd: number, caps: QpCaps, sendCq: PortCq, recvCq: PortCq, reportSource: boolean): PortQp {
    const i = this.#placeNext ?? threadOf(qpn, this.#ports.length);
    const p = this.#ports[i]!;
    return p.createQp(qpn, type, pd, caps, this.#part(sendCq, i), this.#part(recvCq, i), reportSource);
  }

  #part(cq: PortCq, i: number): PortCq {
    // A CQ of another device: the thread port refuses it as it would.
    return this.#cqs.get(cq)?.parts[i] ?? cq;
  }

  listenService(service: number, handler: ((r: ServiceRequest) => void) | undefined): void {
    this.#ports.forEach((p, i) => {
      p.listenService(service, handler && ((r) => this.#placedOn(i, () => handler(r))));
    });
  }

  placing(): number | undefined {
    return this.#placeNext;
  }

  onFirstThread<T>(fn: () => T): T {
    return this.#placedOn(0, fn);
  }

  #placedOn<T>(i: number, fn: () => T): T {
    const before = this.#placeNext;
    this.#placeNext = i;
    try {
      return fn();
    } finally {
      this.#placeNext = before;
    }
  }

  dialService(qpn: number, to: DeviceAddress, service: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ remoteQpn: number; privateData: Uint8Array | undefined }> {
    const p = this.#ports.find((x) => x.hasQpn(qpn)) ?? this.#ports[0]!;
    return p.dialService(qpn, to, service, privateData, timeoutMs);
  }

  closing(): void {
    for (const p of this.#ports) p.closing();
  }

  stop(): void {
    for (const p of this.#ports) p.stop();
  }

  close(): Promise<void> {
    this.#closedP ??= (async () => {
      const fans = [...this.#cqs.values()];
      for (const f of fans) f.hold();
      try {
        // The first thread serves the others' allocations (a closing tcp connection frees its buffer): it closes last.
        // Settled, not all(): one that fails must not leave thread 0 open (its worker would keep the process alive).
        const rest = await Promise.allSettled(this.#ports.slice(1).map((p) => p.close()));
        await this.#ports[0]!.close();
        const failed = rest.find((r) => r.status === 'rejected');
        if (failed) throw (failed as PromiseRejectedResult).reason;
      } finally {
        for (const f of fans) f.release();
      }
    })();
    return this.#closedP;
  }
}

function sum(into: Record<string, number>, from: Record<string, number>): void {
  for (const [k, v] of Object.entries(from)) if (typeof v === 'number' && typeof into[k] === 'number') into[k] += v;
}
