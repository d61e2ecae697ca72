// Device: one shared device memory, one RDMAP engine, one link — the one shell that joins an
// engine to a link. It feeds the engine work requests and the link's events with the clock,
// hands the engine's frames to the link, acts on the engine's events (a QP connected or in
// ERROR) and keeps one timer for the engine's next deadline. Neither side sees the other.
import { performance } from 'node:perf_hooks';
import type { DeviceAddress } from '../core/address.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { QpState } from '../core/enums.js';
import type { Frame } from '../core/frame.js';
import type { Link, ServiceRequest } from '../core/link.js';
import { DeviceMemory } from '../dataplane/device-memory.js';
import { DataPlaneWorkers } from '../dataplane/workers.js';
import { RdmapEngine } from '../rdmap/engine.js';
import type { EngineEvent } from '../rdmap/events.js';
import { type DeviceCounters, EngineMemory } from '../rdmap/memory.js';
import type { EngineQp } from '../rdmap/state.js';
import { InprocLink } from '../transport/inproc/fabric.js';
import { TcpLink } from '../transport/tcp/link.js';
import { UdpLink } from '../transport/udp/link.js';
import { mpaCrcCounts } from '../transport/tcp/connection.js';
import { INTEGRITY_MODES, checkIntegrityMode } from '../transport/udp/integrity.js';
import { CompletionQueue } from './cq.js';
import { ProtectionDomain } from './pd.js';
import type { CqInit, OpenDeviceOptions } from './types.js';

interface ConnectWatch {
  connected(): void;
  failed(): void;
}

export class Device {
  readonly address: DeviceAddress;
  /** @internal */
  readonly engine: RdmapEngine;
  /** @internal */
  readonly engineMemory: EngineMemory;
  readonly #link: Link;
  readonly #cqs = new Set<CompletionQueue>();
  readonly #pds = new Set<ProtectionDomain>();
  readonly #connecting = new Map<number, ConnectWatch>();
  #pdNext = 1;
  #qpnNext = 1;
  #closed = false;
  #timer?: ReturnType<typeof setTimeout>;
  #timerAt = Infinity;
  /** tcp: what openDevice asked MPA for (the link itself does not say). */
  readonly #integrity: 'crc32c' | 'none' | undefined;

  /** @internal use openDevice. `mss` caps the link's segment size (the smaller wins). */
  constructor(mem: DeviceMemory, link: Link, opts: { mss?: number; integrity?: 'crc32c' | 'none' } = {}) {
    this.#integrity = opts.integrity;
    this.engineMemory = new EngineMemory(mem);
    this.engine = new RdmapEngine(this.engineMemory, { mss: Math.min(opts.mss ?? link.mss, link.mss), linkCutsTagged: link.cutsTagged === true });
    this.#link = link;
    this.address = link.address;
    link.start({
      frames: (batch) => {
        if (!this.#closed) this.run((now) => this.engine.handleFrames(batch, now));
      },
      // A link that lost a peer for good (udp past its retry limit): fail what depended on it.
      peerLost: (peer) => {
        if (!this.#closed) this.run((now) => this.engine.handlePeerLost(peer, now));
      },
      qpUp: (qpn, profile) => {
        if (!this.#closed) this.run((now) => this.engine.handleLinkUp(qpn, profile, now));
      },
      qpDown: (qpn, cause) => {
        if (!this.#closed) this.run((now) => this.engine.handleLinkDown(qpn, cause, now));
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

  /** Per-device counters: direct vs indirect placement (M3), drops, terminates, RNR. */
  stats(): DeviceCounters & { memory: ReturnType<DeviceMemory['stats']>; link?: Record<string, number> } {
    let link = this.#link.stats?.();
    // tcp: connections by negotiated MPA CRC (counted per device memory by the connections).
    if (link !== undefined && this.#integrity !== undefined) link = { ...link, ...mpaCrcCounts(this.engineMemory.dm) };
    return { ...this.engine.counters, memory: this.engineMemory.dm.stats(), ...(link ? { link } : {}) };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    for (const pd of this.#pds) for (const qp of [...pd.qps]) qp.destroy();
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#link.close();
    for (const cq of this.#cqs) cq.close();
  }

  /** @internal */
  assertOpen(): void {
    if (this.#closed) throw new SabreError(ErrorCode.Closed, 'device is closed');
  }

  /** @internal */
  ownsCq(cq: unknown): cq is CompletionQueue {
    return cq instanceof CompletionQueue && this.#cqs.has(cq);
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
        return;
      case 'qpError': {
        const w = this.#connecting.get(ev.qpn);
        this.#connecting.delete(ev.qpn);
        w?.failed();
        // After the frames above (a Terminate, if any) were handed over: nothing follows them.
        this.#link.connections?.closeQp(ev.qpn);
        return;
      }
      case 'cqError':
        // The CQ already reports its overrun (poll/wait throw InvalidState). Async events for
        // the application (QP fatal, CQ error, path lost) would be raised here.
        return;
    }
  }

  #onTimer = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    if (this.#closed) return;
    this.run((now) => this.engine.handleTimeout(now));
  };
}

export async function openDevice(opts: OpenDeviceOptions): Promise<Device> {
  if (!opts || typeof opts !== 'object') throw new SabreError(ErrorCode.InvalidArgument, 'openDevice needs an options object');
  if (opts.transport !== 'inproc' && opts.transport !== 'udp' && opts.transport !== 'tcp') {
    throw new SabreError(ErrorCode.InvalidArgument, `unknown transport ${String(opts.transport)}`);
  }
  if (opts.mss !== undefined && (!Number.isInteger(opts.mss) || opts.mss < 64 || opts.mss > 1 << 20)) {
    throw new SabreError(ErrorCode.InvalidArgument, 'mss must be an integer in 64..1048576');
  }
  if (opts.transport !== 'inproc' && opts.host !== undefined && (typeof opts.host !== 'string' || opts.host.length === 0)) throw new SabreError(ErrorCode.InvalidArgument, 'host must be a non-empty string');
  if (opts.transport !== 'inproc' && opts.port !== undefined && !(Number.isInteger(opts.port) && opts.port >= 0 && opts.port < 65536)) throw new SabreError(ErrorCode.InvalidArgument, 'port must be an integer in 0..65535');
  // tcp speaks MPA, whose only integrity is its CRC (on or off); udp has sabre's three modes.
  if (opts.integrity !== undefined && opts.transport !== 'inproc') checkIntegrityMode(opts.integrity, opts.transport === 'tcp' ? ['crc32c', 'none'] : INTEGRITY_MODES);
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
  if (opts.transport === 'inproc') return new Device(mem, new InprocLink(), { mss: opts.mss ?? 65536 });
  if (opts.transport === 'tcp') {
    // tcp: iWARP, one MPA connection per rc QP pair; segments fit one FPDU of the MULPDU.
    // MPA's CRC: asked for unless integrity 'none'; on when either side asks (RFC 5044 §7.1).
    const integrity = opts.integrity === 'none' ? 'none' : 'crc32c';
    const t = await TcpLink.open({ dp: mem, host: opts.host ?? '127.0.0.1', port: opts.port ?? 0, connection: { mpa: { crc: integrity === 'crc32c' } } });
    return new Device(mem, t, { ...(opts.mss !== undefined ? { mss: opts.mss } : {}), integrity });
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
    });
  } catch (e) {
    // The link owns the workers once open; before that they are ours to stop.
    await dp?.close();
    throw e;
  }
  return new Device(mem, t, opts.mss !== undefined ? { mss: opts.mss } : {});
}
