// Device: one shared device memory and the NIC that moves its data — the application's side of
// the driver (src/nic/driver.ts), which joins the RDMAP engine to the link. The device hands
// work requests to the driver's steps and acts on what the driver reports: a QP connected or
// in ERROR, a peer lost, a connection refused. It names no transport: openDevice finds the
// transport's provider in the registry (src/nic/providers.ts).
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { addressKey, type DeviceAddress } from '../core/address.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { QpState } from '../core/enums.js';
import type { Link, ServiceRequest, TransportContextStats } from '../core/link.js';
import { DeviceMemory } from '../dataplane/device-memory.js';
import type { AllocatorStats } from '../dataplane/allocator.js';
import type { PortEvent } from '../nic/port.js';
import type { NicCounters, NicPort } from '../nic/port.js';
import { InlinePort } from '../nic/inline-port.js';
import { defaultWorkers, nicPollSpin, nicPollUs, openPort } from '../nic/open.js';
import { portsOf, routeTo } from '../core/peer-route.js';
import { QpnSpace } from './qpn.js';
import { providerFor, splitLimits } from '../nic/providers.js';
import type { EngineBounds } from '../rdmap/bounds.js';
import type { RdmapEngine } from '../rdmap/engine.js';
import { type DeviceCounters, type EngineMemory, newCounters } from '../rdmap/memory.js';

/** The engine's counter names: a stats source may not take one. */
const COUNTER_NAMES = newCounters();
import { CompletionQueue } from './cq.js';
import { type DeviceEvent, eventStream, type EventStream } from './events.js';
import { ProtectionDomain } from './pd.js';
import type { QueuePair } from './qp.js';
import type { CqInit, OpenDeviceOptions } from './types.js';

interface ConnectWatch {
  connected(): void;
  /** `err`: why, when known (the device closed, the link's refusal); otherwise the QP entered ERROR. */
  failed(err?: Error): void;
}

/**
 * A device. Also an EventEmitter of its async events: `dev.on('event', (ev) => …)`, or
 * `for await (const ev of dev.events())` (src/verbs/events.ts).
 */
export class Device extends EventEmitter<{ event: [DeviceEvent] }> {
  readonly address: DeviceAddress;
  /** @internal the NIC: inline (workers: 0) or on its own thread. */
  readonly nic: NicPort;
  readonly #cqs = new Set<CompletionQueue>();
  readonly #pds = new Set<ProtectionDomain>();
  readonly #statsSources = new Map<string, () => Record<string, unknown>>();
  readonly #connecting = new Map<number, ConnectWatch>();
  /** The peer (addressKey) each connecting QP waits on. */
  readonly #connectingTo = new Map<number, string>();
  /** Pending waits of objects built on this device (listeners, the CM agent): settled on close. */
  readonly #closeHooks = new Set<() => void>();
  #closing = false;
  #closeP: Promise<void> | undefined;
  /** The QueuePair objects by QPN, for their per-QP events. */
  readonly #qpObjects = new Map<number, QueuePair>();
  #pdNext = 1;
  readonly #qpns = new QpnSpace(() => portsOf(this.address)?.length ?? 1, (q) => this.nic.hasQpn(q) || this.#qpObjects.has(q));
  #closed = false;

  /**
   * @internal use openDevice. A port, or (tests, tools) a device memory and a link of the
   * caller's to run inline; `mss` caps the link's segment size (the smaller wins).
   */
  constructor(nic: NicPort | DeviceMemory, link?: Link, opts: { mss?: number; bounds?: Partial<EngineBounds> } = {}) {
    super();
    if (nic instanceof DeviceMemory) nic = new InlinePort(nic, link!, opts);
    this.nic = nic;
    this.address = nic.address;
    nic.start((ev) => this.#onEvent(ev));
  }

  /**
   * The integrity check this device asks its peers for (openDevice's `integrity`, defaulted);
   * what each peer connection settled on is in stats().link (docs/integrity.md). inproc: undefined.
   */
  get integrity(): 'crc32c' | 'xxh3' | 'none' | undefined {
    return this.nic.integrity;
  }

  /** udp: the path MTU (largest datagram); tcp: the MULPDU; inproc: undefined. */
  get mtu(): number | undefined {
    return this.nic.mtu;
  }

  /** @internal the engine of an inline device (tests, tools); a NIC thread's is out of reach. */
  get engine(): RdmapEngine {
    return this.#inline().engine;
  }

  /** @internal the engine memory of an inline device (tests, tools). */
  get engineMemory(): EngineMemory {
    return this.#inline().memory;
  }

  /**
   * @internal the device memory as this thread reaches it: features above verbs (dedup) keep
   * tables in it and run the WASM kernels over it.
   */
  get dataPlane(): DeviceMemory {
    return this.nic.dataPlane;
  }

  #inline(): InlinePort {
    if (this.nic instanceof InlinePort) return this.nic;
    throw new SabreError(ErrorCode.NotSupported, 'this device runs its NIC on a thread of its own (open it with workers: 0 to reach the engine)');
  }

  /** NIC threads running this device's data path: 0 when it runs on the opening thread (inline). */
  get workers(): number {
    if (this.nic instanceof InlinePort) return 0;
    // Several (nic/multi-port.ts) list their thread ports.
    return (this.nic as { threads?: readonly unknown[] }).threads?.length ?? 1;
  }

  get closed(): boolean {
    return this.#closed;
  }

  allocPd(): ProtectionDomain {
    this.assertOpen();
    const pd = new ProtectionDomain(this, this.#pdNext++);
    this.#pds.add(pd);
    return pd;
  }

  createCq(init: CqInit): CompletionQueue {
    this.assertOpen();
    const depth = init?.depth;
    if (typeof depth !== 'number' || !Number.isInteger(depth) || depth < 1) throw new SabreError(ErrorCode.InvalidArgument, 'createCq needs { depth } >= 1');
    if (depth > 1 << 22) throw new SabreError(ErrorCode.LimitExceeded, `CQ depth ${depth} exceeds 4194304`);
    const cq = new CompletionQueue(depth);
    this.#cqs.add(cq);
    this.nic.addCq(cq);
    return cq;
  }

  /**
   * Per-device counters: direct vs indirect placement (M3), drops, terminates, RNR; the memory;
   * the link; and one key per stats source a feature registered (addStatsSource).
   */
  stats(): DeviceStats {
    // ERR_CLOSED on a closed device, as every call (a NIC thread's stats went with it; inline
    // ones answered: one outcome for both, found by an audit).
    this.assertOpen();
    const { counters, memory, link, linkContexts, nic } = this.nic.stats(LINK_CONTEXTS_SHOWN);
    const out: DeviceStats = { ...counters, memory, ...(link ? { link } : {}), ...(linkContexts ? { linkContexts } : {}), ...(nic ? { nic } : {}) };
    for (const [name, fn] of this.#statsSources) out[name] = fn();
    return out;
  }

  /**
   * The registration hook for features above verbs (dedup, channels, the file service), which
   * verbs must not import: dev.stats()[name] is fn()'s value from now on. One source per name;
   * a name that is already a key of dev.stats() is refused. Returns the unregister call.
   */
  addStatsSource(name: string, fn: () => Record<string, unknown>): () => void {
    if (!/^[a-z][A-Za-z0-9]*$/.test(name) || name in COUNTER_NAMES || name === 'memory' || name === 'link' || name === 'linkContexts' || this.#statsSources.has(name)) {
      throw new SabreError(ErrorCode.InvalidArgument, `stats source name '${name}' is taken or not an identifier`);
    }
    this.#statsSources.set(name, fn);
    return () => {
      if (this.#statsSources.get(name) === fn) this.#statsSources.delete(name);
    };
  }

  /**
   * Close the device. Every pending promise of it and of its objects settles with ERR_CLOSED
   * (qp.connect, listener.accept, cm connect, cq.wait); outstanding work requests complete as
   * WrFlushErr and stay pollable: cq.poll returns them, then throws ERR_CLOSED once drained.
   *
   * `drainMs`: first give the send queues of connected QPs up to this long to finish (their
   * work acknowledged by the peer, their completions in the CQs as usual), so a Send or Write
   * posted just before close() reaches the peer instead of being flushed. Default 0 (none).
   * Work still outstanding after it is flushed as above.
   */
  close(opts: { drainMs?: number } = {}): Promise<void> {
    const drainMs = opts?.drainMs ?? 0;
    if (!(typeof drainMs === 'number' && drainMs >= 0 && drainMs <= 3_600_000)) {
      return Promise.reject(new SabreError(ErrorCode.InvalidArgument, 'close({ drainMs }): a number of milliseconds in 0..3600000'));
    }
    this.#closeP ??= this.#close(drainMs);
    return this.#closeP;
  }

  /** Send work still outstanding on connected QPs (what a drain waits for). */
  #outstandingSends(): number {
    let n = 0;
    for (const pd of this.#pds) {
      for (const qp of pd.qps) {
        const q = qp.port;
        if (q.state === QpState.Rts) n += q.sqLength;
      }
    }
    return n;
  }

  async #close(drainMs: number): Promise<void> {
    if (this.#closed) return;
    // Bounded: every 2 ms until nothing is outstanding or drainMs has passed; the device keeps
    // running meanwhile (acks arrive, retransmissions go out, new posts are accepted).
    for (const until = performance.now() + drainMs; this.#outstandingSends() > 0 && performance.now() < until; ) {
      await new Promise((r) => setTimeout(r, Math.max(0, Math.min(2, until - performance.now()))));
    }
    // A completion that arrived in the last turn still has its ACK to send: one more turn.
    if (drainMs > 0) await new Promise((r) => setImmediate(r));
    this.#closing = true;
    this.nic.closing();
    for (const cq of this.#cqs) cq.closing();
    // Connects still waiting settle with ERR_CLOSED at the end (a QP's destroy finds none).
    const connecting = [...this.#connecting.values()];
    this.#connecting.clear();
    this.#connectingTo.clear();
    for (const pd of this.#pds) for (const qp of [...pd.qps]) qp.destroy();
    this.#closed = true;
    this.nic.stop();
    // Every hook runs and the close goes on whatever one throws: a close stopped here would
    // leave the NIC open and every wait pending. The first error is the close's, at its end.
    let failed: { error: unknown } | undefined;
    for (const hook of [...this.#closeHooks]) {
      try {
        hook();
      } catch (error) {
        failed ??= { error };
      }
    }
    this.#closeHooks.clear();
    await this.nic.close();
    const closed = (): SabreError => new SabreError(ErrorCode.Closed, 'device closed');
    for (const w of connecting) w.failed(closed());
    for (const cq of this.#cqs) cq.close();
    if (failed) throw failed.error;
  }

  /** @internal run `hook` when the device closes (before the link goes); returns the unregister. */
  onClose(hook: () => void): () => void {
    this.#closeHooks.add(hook);
    return () => this.#closeHooks.delete(hook);
  }

  /** @internal settle QP `qpn`'s pending connect with `err` (device closed, QP destroyed, link refused). */
  failConnect(qpn: number, err: Error): void {
    const w = this.#connecting.get(qpn);
    this.#connectingTo.delete(qpn);
    if (!w) return;
    this.#connecting.delete(qpn);
    w.failed(err);
  }

  /** @internal */
  assertOpen(): void {
    if (this.#closed) throw new SabreError(ErrorCode.Closed, 'device is closed');
  }

  /** @internal a CQ made for one QP (cm defaults) leaves with its QP. */
  dropCq(cq: CompletionQueue): void {
    if (!this.#cqs.delete(cq)) return;
    cq.close();
    this.nic.dropCq(cq);
  }

  /** @internal */
  ownsCq(cq: unknown): cq is CompletionQueue {
    return cq instanceof CompletionQueue && this.#cqs.has(cq);
  }

  /** @internal QueuePair's constructor / destroy. */
  attachQp(qp: QueuePair): void {
    this.#qpObjects.set(qp.qpn, qp);
  }

  /** @internal */
  detachQp(qp: QueuePair): void {
    if (this.#qpObjects.get(qp.qpn) !== qp) return;
    this.#qpObjects.delete(qp.qpn);
    this.#qpns.retire(qp.qpn);
  }

  /** @internal QPs made inside `fn` go to the device's first NIC thread (where a peer that knows only `port` reaches them). */
  onFirstThread<T>(fn: () => T): T {
    return this.nic.onFirstThread ? this.nic.onFirstThread(fn) : fn();
  }

  /** @internal A fresh QPN (./qpn.ts: drawn at random, so a third host cannot guess a raw tcp connect's pair). */
  nextQpn(): number {
    return this.#qpns.draw(this.nic.placing?.());
  }

  /** @internal */
  reachable(a: DeviceAddress): boolean {
    return this.nic.reachable(a);
  }

  /** @internal */
  memoryView(addr: number, length: number): Uint8Array {
    return this.nic.view(addr, length);
  }

  /**
   * @internal QueuePair.connect: bind rc QP `qpn` to `rqpn` at `peer`. On a link without
   * connections the engines greet each other (`passive`: ours waits for the peer's greeting,
   * src/cm); a connection link (tcp) is asked for the QP's connection and reports it up (or down).
   */
  connectQp(qp: QueuePair, peer: DeviceAddress, rqpn: number, secret?: Uint8Array, passive = false): void {
    // A peer of several NIC threads is reached at the thread that holds its QP (core/peer-route.ts).
    const to = routeTo(peer, rqpn);
    this.#connectingTo.set(qp.qpn, addressKey(to));
    qp.port.connect(to, rqpn, secret, passive);
  }

  /** @internal QueuePair.connect waits for its QP's 'connected' (or 'qpError') event here. */
  watchConnect(qpn: number, w: ConnectWatch): void {
    this.#connecting.set(qpn, w);
  }

  /** @internal */
  unwatchConnect(qpn: number): void {
    this.#connecting.delete(qpn);
    this.#connectingTo.delete(qpn);
  }

  /**
   * @internal src/cm: whether the link carries rdma_cm-style exchanges in its own connection
   * handshake (tcp: the MPA private data). Otherwise the CM agent's reserved QP carries them.
   */
  get linkServices(): boolean {
    return this.nic.linkServices;
  }

  /** @internal src/cm on a linkServices device: route connects for `service` to `handler` (undefined stops). */
  listenService(service: number, handler: ((r: ServiceRequest) => void) | undefined): void {
    this.nic.listenService(service, handler);
  }

  /** @internal src/cm on a linkServices device: connect rc QP `qpn` to the listener for `service` at `to`. */
  dialService(qpn: number, to: DeviceAddress, service: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ remoteQpn: number; privateData: Uint8Array | undefined }> {
    // A listener of several NIC threads listens on each: dials spread over them by the dialer's QPN.
    return this.nic.dialService(qpn, routeTo(to, qpn), service, privateData, timeoutMs);
  }

  #onEvent(ev: PortEvent): void {
    switch (ev.kind) {
      case 'deviceFatal':
        // Nothing of the NIC answers any more: say so, then close (connects, waits and CQs
        // settle with ERR_CLOSED as at any close).
        this.#emit({ type: 'device-fatal', error: ev.error });
        void this.close().catch(() => undefined);
        return;
      case 'connected':
        this.#connecting.get(ev.qpn)?.connected();
        this.#connecting.delete(ev.qpn);
        this.#connectingTo.delete(ev.qpn);
        this.#emit({ type: 'established', qpn: ev.qpn });
        return;
      case 'qpError': {
        // An error from before a reset made since is not the connect under way's.
        if (!ev.stale) {
          const w = this.#connecting.get(ev.qpn);
          this.#connecting.delete(ev.qpn);
          this.#connectingTo.delete(ev.qpn);
          w?.failed();
        }
        const cause = ev.cause;
        if (ev.fatal) this.#emit({ type: 'qp-fatal', qpn: ev.qpn, ...(cause ? { cause } : {}) });
        if (ev.established) this.#emit({ type: 'disconnected', qpn: ev.qpn, ...(cause ? { cause } : {}) });
        return;
      }
      case 'cqError':
        // The CQ reports its overrun itself too (poll/wait throw InvalidState once drained): a
        // NIC thread's refusal is told here (the inline engine's offer already marked it).
        if (ev.cq instanceof CompletionQueue) {
          ev.cq.markOverrun();
          this.#emit({ type: 'cq-error', cq: ev.cq });
        }
        return;
      case 'peerLost': {
        // A connect waiting on that peer fails with the cause (udp has no refusal: a port where
        // nothing answers is known only when the link's retries run out).
        const key = addressKey(ev.peer);
        for (const [qpn, k] of this.#connectingTo) {
          if (k === key) this.failConnect(qpn, new SabreError(ErrorCode.Unreachable, `no answer from ${JSON.stringify(ev.peer)} (the link's retries ran out)`));
        }
        this.#emit({ type: 'path-lost', peer: ev.peer });
        return;
      }
      case 'connectFailed':
        this.failConnect(ev.qpn, ev.error);
        return;
    }
  }

  /** Async events are not raised while the device closes: closing is the application's act. */
  #emit(ev: DeviceEvent): void {
    if (this.#closing) return;
    // A throwing listener must not break the engine step that raised the event.
    try {
      this.emit('event', ev);
      if ('qpn' in ev) this.#qpObjects.get(ev.qpn)?.emit('event', ev);
    } catch (e) {
      queueMicrotask(() => {
        throw e;
      });
    }
  }

  /**
   * The device's async events as an async iterator (until the device closes, `signal` aborts
   * — next() rejects with ERR_ABORTED — or the loop breaks). Bounded: a reader more than
   * EVENT_BUFFER events behind loses the oldest (counted in the iterator's `dropped`).
   */
  events(opts: { signal?: AbortSignal } = {}): EventStream {
    return eventStream(this, opts);
  }
}

/** Transport contexts dev.stats().linkContexts lists at most (those retransmitting most first). */
export const LINK_CONTEXTS_SHOWN = 64;

/**
 * dev.stats(): the engine's counters, the device memory, the link's counters (udp, tcp) and,
 * on udp, one row per transport context (peer): retransmissions, RTT, congestion window.
 */
export type DeviceStats = DeviceCounters & {
  memory: AllocatorStats;
  /** With a NIC thread: the wake-ups and doorbells between this thread and it, its WQE-ring polls (nicPollUs), the completion records it wrote (NicCounters). */
  nic?: NicCounters;
  link?: Record<string, number>;
  linkContexts?: TransportContextStats[];
  [source: string]: unknown;
};

export async function openDevice(opts: OpenDeviceOptions): Promise<Device> {
  if (!opts || typeof opts !== 'object') throw new SabreError(ErrorCode.InvalidArgument, 'openDevice needs an options object');
  const provider = providerFor(opts.transport);
  if (opts.mss !== undefined && (!Number.isInteger(opts.mss) || opts.mss < 64 || opts.mss > 1 << 20)) {
    throw new SabreError(ErrorCode.InvalidArgument, 'mss must be an integer in 64..1048576');
  }
  const limits = splitLimits(opts.limits, provider);
  // host, port, and the integrity modes the transport's wire can carry.
  provider.checkOptions(opts);
  if (opts.keepaliveMs !== undefined && !(Number.isInteger(opts.keepaliveMs) && opts.keepaliveMs >= 0 && opts.keepaliveMs <= 3_600_000)) {
    throw new SabreError(ErrorCode.InvalidArgument, 'keepaliveMs must be an integer in 0..3600000');
  }
  const workers = opts.workers ?? defaultWorkers();
  if (!Number.isInteger(workers) || workers < 0 || workers > 16) throw new SabreError(ErrorCode.InvalidArgument, 'workers must be an integer in 0..16');
  // Resolved here (SABRE_NIC_POLL_US included), before anything is opened.
  const poll = { nicPollUs: nicPollUs(opts.nicPollUs), nicPollSpin: nicPollSpin(opts.nicPollSpin) };
  if (opts.maxMr !== undefined && !(Number.isInteger(opts.maxMr) && opts.maxMr >= 1 && opts.maxMr < 1 << 24)) throw new SabreError(ErrorCode.InvalidArgument, 'maxMr must be an integer in 1..16777215');
  return new Device(await openPort(provider, { ...opts, workers, ...poll }, limits));
}
