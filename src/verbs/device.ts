// Device: one shared device memory, one RDMAP engine, one link — the one shell that joins an
// engine to a link. It feeds the engine work requests and the link's events with the clock,
// hands the engine's frames to the link, acts on the engine's events (a QP connected or in
// ERROR) and keeps one timer for the engine's next deadline. Neither side sees the other.
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { addressKey, type DeviceAddress } from '../core/address.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { QpState } from '../core/enums.js';
import type { Frame } from '../core/frame.js';
import type { Link, QpDownCause, ServiceRequest, TransportContextStats } from '../core/link.js';
import type { AllocatorStats } from '../dataplane/allocator.js';
import { DeviceMemory } from '../dataplane/device-memory.js';
import { DataPlaneWorkers } from '../dataplane/workers.js';
import { RdmapEngine } from '../rdmap/engine.js';
import type { EngineEvent } from '../rdmap/events.js';
import { type DeviceCounters, EngineMemory } from '../rdmap/memory.js';
import type { EngineBounds } from '../rdmap/bounds.js';
import type { EngineQp } from '../rdmap/state.js';
import { InprocLink } from '../transport/inproc/fabric.js';
import { TcpLink } from '../transport/tcp/link.js';
import { UdpLink } from '../transport/udp/link.js';
import { mpaCrcCounts } from '../transport/tcp/connection.js';
import { INTEGRITY_MODES, checkIntegrityMode } from '../transport/udp/integrity.js';
import { CompletionQueue } from './cq.js';
import { type DeviceEvent, eventStream, type EventStream } from './events.js';
import { ProtectionDomain } from './pd.js';
import type { QueuePair } from './qp.js';
import type { CqInit, DeviceLimits, OpenDeviceOptions } from './types.js';

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
  /** @internal */
  readonly engine: RdmapEngine;
  /** @internal */
  readonly engineMemory: EngineMemory;
  readonly #link: Link;
  readonly #cqs = new Set<CompletionQueue>();
  readonly #pds = new Set<ProtectionDomain>();
  readonly #statsSources = new Map<string, () => Record<string, unknown>>();
  readonly #connecting = new Map<number, ConnectWatch>();
  /** The peer (addressKey) each connecting QP waits on. */
  readonly #connectingTo = new Map<number, string>();
  /** Pending waits of objects built on this device (listeners, the CM agent): settled on close. */
  readonly #closeHooks = new Set<() => void>();
  /** rc QPs that reached RTS (for 'disconnected'), and the link's last word on a QP going down. */
  readonly #established = new Set<number>();
  readonly #downCause = new Map<number, QpDownCause>();
  #closing = false;
  #closeP: Promise<void> | undefined;
  /** The QueuePair objects by QPN, for their per-QP events. */
  readonly #qpObjects = new Map<number, QueuePair>();
  #pdNext = 1;
  #qpnNext = 1;
  #closed = false;
  #timer?: ReturnType<typeof setTimeout>;
  #timerAt = Infinity;
  /** tcp: what openDevice asked MPA for (the link itself does not say). */
  readonly #integrity: 'crc32c' | 'none' | undefined;

  /** @internal use openDevice. `mss` caps the link's segment size (the smaller wins). */
  constructor(mem: DeviceMemory, link: Link, opts: { mss?: number; integrity?: 'crc32c' | 'none'; bounds?: Partial<EngineBounds> } = {}) {
    super();
    this.#integrity = opts.integrity;
    this.engineMemory = new EngineMemory(mem);
    this.engine = new RdmapEngine(this.engineMemory, {
      mss: Math.min(opts.mss ?? link.mss, link.mss), linkCutsTagged: link.cutsTagged === true, ...(opts.bounds ? { bounds: opts.bounds } : {}),
    });
    this.#link = link;
    this.address = link.address;
    link.start({
      frames: (batch) => {
        if (!this.#closed) this.run((now) => this.engine.handleFrames(batch, now));
      },
      // A link that lost a peer for good (udp past its retry limit): fail what depended on it.
      peerLost: (peer) => {
        if (this.#closed) return;
        // A connect waiting on that peer fails with the cause (udp has no refusal: a port where
        // nothing answers is known only when the link's retries run out).
        const key = addressKey(peer);
        for (const [qpn, k] of this.#connectingTo) {
          if (k === key) this.failConnect(qpn, new SabreError(ErrorCode.Unreachable, `no answer from ${JSON.stringify(peer)} (the link's retries ran out)`));
        }
        this.#emit({ type: 'path-lost', peer });
        // The rc QPs it fails were connected to a peer that stopped answering: cause 'lost', as tcp says.
        const lost: number[] = [];
        for (const qpn of this.#established) if (this.engine.qps.get(qpn)?.flow?.peerKey === key) lost.push(qpn);
        for (const qpn of lost) this.#downCause.set(qpn, 'lost');
        this.run((now) => this.engine.handlePeerLost(peer, now));
        for (const qpn of lost) this.#downCause.delete(qpn);
      },
      // udp keeps probing an idle peer only while an rc QP here is connected to it (RTR/RTS/SQD).
      keepsPeer: (peer) => {
        if (this.#closed) return false;
        const key = addressKey(peer);
        for (const qpn of this.#established) {
          const qp = this.engine.qps.get(qpn);
          if (qp?.type === 'rc' && qp.flow?.peerKey === key && qp.state !== QpState.Error && qp.state !== QpState.Reset) return true;
        }
        return false;
      },
      qpUp: (qpn, profile, ord) => {
        if (!this.#closed) this.run((now) => this.engine.handleLinkUp(qpn, profile, now, ord));
      },
      qpDown: (qpn, cause, error) => {
        if (this.#closed) return;
        // A connect the link could not make fails with the link's reason (refused, host not
        // found), not the generic 'QP entered ERROR' the engine's qpError would give.
        if (error instanceof Error) this.failConnect(qpn, error);
        this.#downCause.set(qpn, cause);
        this.run((now) => this.engine.handleLinkDown(qpn, cause, now));
        this.#downCause.delete(qpn);
      },
      // A connection for a QP that does not exist yet (the peer process can be a step ahead)
      // or has not connected yet may be held for its connect().
      awaitsConnection: (qpn) => {
        const qp = this.engine.qps.get(qpn);
        return !qp || (qp.type === 'rc' && (qp.state === QpState.Reset || qp.state === QpState.Init || qp.state === QpState.Rtr));
      },
    });
  }

  /**
   * The integrity check this device asks its peers for (openDevice's `integrity`, defaulted);
   * what each peer connection settled on is in stats().link (docs/integrity.md). inproc: undefined.
   */
  get integrity(): 'crc32c' | 'xxh3' | 'none' | undefined {
    return this.#link.integrity ?? this.#integrity;
  }

  /** udp: the path MTU (largest datagram); tcp: the MULPDU; inproc: undefined. */
  get mtu(): number | undefined {
    return this.#link.mtu;
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
    return cq;
  }

  /**
   * Per-device counters: direct vs indirect placement (M3), drops, terminates, RNR; the memory;
   * the link; and one key per stats source a feature registered (addStatsSource).
   */
  stats(): DeviceStats {
    let link = this.#link.stats?.();
    // tcp: connections by negotiated MPA CRC (counted per device memory by the connections).
    if (link !== undefined && this.#integrity !== undefined) link = { ...link, ...mpaCrcCounts(this.engineMemory.dm) };
    const linkContexts = this.#link.contextStats?.(LINK_CONTEXTS_SHOWN);
    const out: DeviceStats = {
      ...this.engine.counters, memory: this.engineMemory.dm.stats(), ...(link ? { link } : {}), ...(linkContexts ? { linkContexts } : {}),
    };
    for (const [name, fn] of this.#statsSources) out[name] = fn();
    return out;
  }

  /**
   * The registration hook for features above verbs (dedup, channels, the file service), which
   * verbs must not import: dev.stats()[name] is fn()'s value from now on. One source per name;
   * a name that is already a key of dev.stats() is refused. Returns the unregister call.
   */
  addStatsSource(name: string, fn: () => Record<string, unknown>): () => void {
    if (!/^[a-z][A-Za-z0-9]*$/.test(name) || name in this.engine.counters || name === 'memory' || name === 'link' || name === 'linkContexts' || this.#statsSources.has(name)) {
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
        const q = qp.engineQp;
        if (q.state !== QpState.Rts) continue;
        for (const w of q.sq) if (!w.done) n++;
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
    const closed = (): SabreError => new SabreError(ErrorCode.Closed, 'device closed');
    for (const cq of this.#cqs) cq.closing();
    for (const qpn of [...this.#connecting.keys()]) this.failConnect(qpn, closed());
    for (const pd of this.#pds) for (const qp of [...pd.qps]) qp.destroy();
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    for (const hook of [...this.#closeHooks]) hook();
    this.#closeHooks.clear();
    await this.#link.close();
    for (const cq of this.#cqs) cq.close();
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
    if (this.#cqs.delete(cq)) cq.close();
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
    if (this.#qpObjects.get(qp.qpn) === qp) this.#qpObjects.delete(qp.qpn);
  }

  /** @internal */
  nextQpn(): number {
    return this.#qpnNext++;
  }

  /** @internal */
  reachable(a: DeviceAddress): boolean {
    return this.#link.reachable(a);
  }

  /** @internal */
  memoryView(addr: number, length: number): Uint8Array {
    return this.engineMemory.dm.u8().subarray(addr, addr + length);
  }

  /**
   * @internal QueuePair.connect: bind rc QP `qp` to `rqpn` at `peer`. On a link without
   * connections the engines greet each other; a connection link (tcp) is asked for the QP's
   * connection and reports it up (or down).
   */
  connectQp(qp: EngineQp, peer: DeviceAddress, rqpn: number): void {
    this.#connectingTo.set(qp.qpn, addressKey(peer));
    const conns = this.#link.connections;
    this.run((now) => this.engine.connect(qp, peer, rqpn, now, conns === undefined));
    conns?.openQp(qp.qpn, peer, rqpn);
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
    return this.#link.connections !== undefined;
  }

  /** @internal src/cm on a linkServices device: route connects for `service` to `handler` (undefined stops). */
  listenService(service: number, handler: ((r: ServiceRequest) => void) | undefined): void {
    this.#link.connections!.listen(service, handler);
  }

  /** @internal src/cm on a linkServices device: connect rc QP `qpn` to the listener for `service` at `to`. */
  dialService(qpn: number, to: DeviceAddress, service: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ remoteQpn: number; privateData: Uint8Array | undefined }> {
    return this.#link.connections!.dial(qpn, to, service, privateData, timeoutMs);
  }

  /** @internal run an engine step at the current time, then carry out what it asks for. */
  run(step: (now: number) => void): void {
    step(performance.now());
    this.#flush();
  }

  #flush(): void {
    const engine = this.engine;
    // Hand-off completions (a peer without acks) can let more work go: until nothing is left.
    for (let out = engine.pollTransmit(); out.length > 0; out = engine.pollTransmit()) {
      let i = 0;
      while (i < out.length) {
        const to = out[i]!.to;
        const frames: Frame[] = [];
        while (i < out.length && out[i]!.to === to) frames.push(out[i++]!.frame);
        this.#link.send(to, frames);
      }
    }
    for (let ev = engine.pollEvent(); ev !== undefined; ev = engine.pollEvent()) this.#onEvent(ev);
    const at = engine.pollTimeout();
    if (at !== undefined && at < this.#timerAt && !this.#closed) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timerAt = at;
      this.#timer = setTimeout(this.#onTimer, Math.max(0, at - performance.now()));
    }
  }

  #onEvent(ev: EngineEvent): void {
    switch (ev.kind) {
      case 'connected':
        this.#connecting.get(ev.qpn)?.connected();
        this.#connecting.delete(ev.qpn);
        this.#connectingTo.delete(ev.qpn);
        this.#established.add(ev.qpn);
        this.#emit({ type: 'established', qpn: ev.qpn });
        return;
      case 'qpError': {
        const w = this.#connecting.get(ev.qpn);
        this.#connecting.delete(ev.qpn);
        this.#connectingTo.delete(ev.qpn);
        w?.failed();
        // After the frames above (a Terminate, if any) were handed over: nothing follows them.
        this.#link.connections?.closeQp(ev.qpn);
        const cause = this.#downCause.get(ev.qpn);
        if (ev.fatal) this.#emit({ type: 'qp-fatal', qpn: ev.qpn, ...(cause ? { cause } : {}) });
        if (this.#established.delete(ev.qpn)) this.#emit({ type: 'disconnected', qpn: ev.qpn, ...(cause ? { cause } : {}) });
        return;
      }
      case 'cqError':
        // The CQ reports its overrun itself too (poll/wait throw InvalidState once drained).
        if (ev.cq instanceof CompletionQueue) this.#emit({ type: 'cq-error', cq: ev.cq });
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

  #onTimer = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    if (this.#closed) return;
    this.run((now) => this.engine.handleTimeout(now));
  };
}

/** Transport contexts dev.stats().linkContexts lists at most (those retransmitting most first). */
export const LINK_CONTEXTS_SHOWN = 64;

/**
 * dev.stats(): the engine's counters, the device memory, the link's counters (udp, tcp) and,
 * on udp, one row per transport context (peer): retransmissions, RTT, congestion window.
 */
export type DeviceStats = DeviceCounters & {
  memory: AllocatorStats;
  link?: Record<string, number>;
  linkContexts?: TransportContextStats[];
  [source: string]: unknown;
};

export async function openDevice(opts: OpenDeviceOptions): Promise<Device> {
  if (!opts || typeof opts !== 'object') throw new SabreError(ErrorCode.InvalidArgument, 'openDevice needs an options object');
  if (opts.transport !== 'inproc' && opts.transport !== 'udp' && opts.transport !== 'tcp') {
    throw new SabreError(ErrorCode.InvalidArgument, `unknown transport ${String(opts.transport)}`);
  }
  if (opts.mss !== undefined && (!Number.isInteger(opts.mss) || opts.mss < 64 || opts.mss > 1 << 20)) {
    throw new SabreError(ErrorCode.InvalidArgument, 'mss must be an integer in 64..1048576');
  }
  const { engine: bounds, udp: udpLimits, tcp: tcpLimits } = splitLimits(opts.limits);
  if (opts.transport !== 'inproc' && opts.host !== undefined && (typeof opts.host !== 'string' || opts.host.length === 0)) throw new SabreError(ErrorCode.InvalidArgument, 'host must be a non-empty string');
  if (opts.transport !== 'inproc' && opts.port !== undefined && !(Number.isInteger(opts.port) && opts.port >= 0 && opts.port < 65536)) throw new SabreError(ErrorCode.InvalidArgument, 'port must be an integer in 0..65535');
  // tcp speaks MPA, whose only integrity is its CRC (on or off); udp has sabre's three modes.
  if (opts.integrity !== undefined && opts.transport !== 'inproc') checkIntegrityMode(opts.integrity, opts.transport === 'tcp' ? ['crc32c', 'none'] : INTEGRITY_MODES);
  if (opts.keepaliveMs !== undefined && !(Number.isInteger(opts.keepaliveMs) && opts.keepaliveMs >= 0 && opts.keepaliveMs <= 3_600_000)) {
    throw new SabreError(ErrorCode.InvalidArgument, 'keepaliveMs must be an integer in 0..3600000');
  }
  const workers = opts.workers ?? 0;
  if (!Number.isInteger(workers) || workers < 0 || workers > 16) throw new SabreError(ErrorCode.InvalidArgument, 'workers must be an integer in 0..16');
  // Only udp runs its data plane on workers (the CRC32C of large datagrams, both directions).
  const dataPlaneWorkers = opts.transport === 'udp' ? workers : 0;
  if (opts.maxMr !== undefined && !(Number.isInteger(opts.maxMr) && opts.maxMr >= 1 && opts.maxMr < 1 << 24)) throw new SabreError(ErrorCode.InvalidArgument, 'maxMr must be an integer in 1..16777215');
  const mem = await DeviceMemory.create({
    ...(opts.memoryBytes !== undefined ? { initialBytes: opts.memoryBytes } : {}),
    ...(opts.maxMr !== undefined ? { regionEntries: opts.maxMr + 1 } : {}),
    maximumBytes: opts.maximumMemoryBytes ?? 1024 * 1024 * 1024,
    workerSlots: dataPlaneWorkers,
  });
  if (opts.transport === 'inproc') return new Device(mem, new InprocLink(), { mss: opts.mss ?? 65536, bounds });
  if (opts.transport === 'tcp') {
    // tcp: iWARP, one MPA connection per rc QP pair; segments fit one FPDU of the MULPDU.
    // MPA's CRC: asked for unless integrity 'none'; on when either side asks (RFC 5044 §7.1).
    const integrity = opts.integrity === 'none' ? 'none' : 'crc32c';
    const host = opts.host ?? '127.0.0.1';
    const t = await TcpLink.open({ dp: mem, host, port: opts.port ?? 0, connection: { mpa: { crc: integrity === 'crc32c' } }, ...tcpLimits }).catch((e: unknown) => {
      throw bindError(e, 'tcp', host, opts.port ?? 0);
    });
    return new Device(mem, t, { ...(opts.mss !== undefined ? { mss: opts.mss } : {}), integrity, bounds });
  }
  // udp: segments are cut so envelope + DDP header + payload fill one datagram of the path MTU.
  const dp = dataPlaneWorkers > 0 ? await DataPlaneWorkers.start(mem, dataPlaneWorkers) : undefined;
  let t: UdpLink;
  try {
    t = await UdpLink.open({
      host: opts.host ?? '127.0.0.1',
      port: opts.port ?? 0,
      deviceMemory: mem,
      ...(dp ? { workers: dp } : {}),
      ...(opts.mtu !== undefined ? { mtu: opts.mtu } : {}),
      ...(opts.sockets !== undefined ? { sockets: opts.sockets } : {}),
      ...(opts.integrity !== undefined ? { integrity: opts.integrity } : {}),
      ...(opts.keepaliveMs !== undefined ? { context: { keepaliveMs: opts.keepaliveMs } } : {}),
      ...udpLimits,
    });
  } catch (e) {
    // The link owns the workers once open; before that they are ours to stop.
    await dp?.close();
    throw bindError(e, 'udp', opts.host ?? '127.0.0.1', opts.port ?? 0);
  }
  return new Device(mem, t, { ...(opts.mss !== undefined ? { mss: opts.mss } : {}), bounds });
}

/** Which layer enforces each of openDevice's limits (one row per limit). */
const LIMIT_OWNER = {
  maxOooEntries: 'engine', maxOooBytes: 'engine', maxSrdFlows: 'engine', maxSrdFlowsPerPeer: 'engine', maxIrd: 'engine', maxAnswerBytes: 'engine',
  maxContexts: 'udp', maxContextsPerHost: 'udp',
  maxConnections: 'tcp', maxConnectionsPerHost: 'tcp', handshakeTimeoutMs: 'tcp', maxQueuedBytes: 'tcp',
} as const satisfies Record<keyof DeviceLimits, 'engine' | 'udp' | 'tcp'>;

/** Check openDevice's limits before anything is bound, and sort them by the layer that keeps them. */
function splitLimits(limits: DeviceLimits | undefined): { engine: Partial<EngineBounds>; udp: Record<string, number>; tcp: Record<string, number> } {
  const out = { engine: {} as Record<string, number>, udp: {} as Record<string, number>, tcp: {} as Record<string, number> };
  if (limits === undefined) return out;
  if (typeof limits !== 'object' || limits === null) throw new SabreError(ErrorCode.InvalidArgument, 'limits must be an object');
  for (const [k, v] of Object.entries(limits)) {
    if (v === undefined) continue;
    const owner = (LIMIT_OWNER as Record<string, 'engine' | 'udp' | 'tcp'>)[k];
    if (owner === undefined) throw new SabreError(ErrorCode.InvalidArgument, `unknown limit '${k}' (have: ${Object.keys(LIMIT_OWNER).join(', ')})`);
    if (!Number.isSafeInteger(v) || (v as number) < 1) throw new SabreError(ErrorCode.InvalidArgument, `limits.${k} must be a positive integer, got ${String(v)}`);
    out[owner][k] = v as number;
  }
  return out;
}

/**
 * One code per cause when a link cannot bind, the same on udp and tcp, with the system error
 * as `cause`: the port is taken (ERR_ADDRESS_IN_USE), the host is not an address of this
 * machine or does not resolve (ERR_INVALID_ARGUMENT). Anything else passes through.
 */
function bindError(e: unknown, transport: string, host: string, port: number): unknown {
  let sys: unknown = e;
  while (sys instanceof SabreError && sys.cause !== undefined) sys = sys.cause;
  const code = (sys as { code?: unknown } | undefined)?.code;
  const where = `${transport} ${host}:${port}`;
  if (code === 'EADDRINUSE') return new SabreError(ErrorCode.AddressInUse, `cannot bind ${where}: address in use`, { cause: sys });
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new SabreError(ErrorCode.InvalidArgument, `cannot bind ${where}: ${code === 'EADDRNOTAVAIL' ? 'not an address of this host' : 'host does not resolve'}`, { cause: sys });
  }
  if (code === 'EACCES') return new SabreError(ErrorCode.InvalidArgument, `cannot bind ${where}: permission denied`, { cause: sys });
  return e;
}
