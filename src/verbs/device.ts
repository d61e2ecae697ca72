// Device: one shared device memory, one RDMAP engine, one transport. The device is the I/O
// shell around the sans-I/O engine: it feeds the engine work requests and received frames
// with the clock, hands the engine's frames to the transport, and keeps one timer for the
// engine's next deadline.
import { DataPlaneWorkers } from '../dataplane/workers.js';
import { performance } from 'node:perf_hooks';
import { DeviceMemory } from '../dataplane/device-memory.js';
import { ErrorCode, SabreError } from '../errors.js';
import { RdmapEngine } from '../rdmap/engine.js';
import { type DeviceCounters, EngineMemory } from '../rdmap/memory.js';
import { InprocTransport } from '../transport/inproc/fabric.js';
import { type DeviceAddress, type Frame, type Transport, addressKey } from '../transport/types.js';
import { UdpTransport } from '../transport/udp/transport.js';
import { TcpTransport } from '../transport/tcp/transport.js';
import { CompletionQueue } from './cq.js';
import { ProtectionDomain } from './pd.js';
import type { CqInit, OpenDeviceOptions } from './types.js';

export class Device {
  readonly address: DeviceAddress;
  /** @internal */
  readonly engine: RdmapEngine;
  /** @internal */
  readonly engineMemory: EngineMemory;
  readonly #transport: Transport;
  readonly #cqs = new Set<CompletionQueue>();
  readonly #pds = new Set<ProtectionDomain>();
  #pdNext = 1;
  #qpnNext = 1;
  #closed = false;
  #timer?: ReturnType<typeof setTimeout>;
  #timerAt = Infinity;

  /** @internal use openDevice */
  constructor(mem: DeviceMemory, transport: Transport, opts: { mss?: number }) {
    this.engineMemory = new EngineMemory(mem);
    this.engine = new RdmapEngine(this.engineMemory, opts);
    this.#transport = transport;
    this.address = transport.address;
    transport.onReceive((batch) => {
      if (this.#closed) return;
      this.run((now) => this.engine.receive(batch, now));
    });
    // A link that lost a peer for good (UDP past its retry limit): fail what depended on it.
    transport.onLinkFailure?.((to) => {
      if (this.#closed) return;
      this.run((now) => this.engine.linkFailed(addressKey(to), now));
    });
  }

  /** udp: the path MTU (largest datagram); tcp: the MULPDU; inproc: undefined. */
  get mtu(): number | undefined {
    return this.#transport.mtu;
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
    const link = this.#transport.stats?.();
    return { ...this.engine.counters, memory: this.engineMemory.dm.stats(), ...(link ? { link } : {}) };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    for (const pd of this.#pds) for (const qp of [...pd.qps]) qp.destroy();
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#transport.close();
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
    return this.#transport.reachable(a);
  }

  /** @internal */
  memoryView(addr: number, length: number): Uint8Array {
    return this.engineMemory.dm.u8().subarray(addr, addr + length);
  }

  /** @internal run an engine step at the current time, then carry out its actions. */
  run(step: (now: number) => void): void {
    step(performance.now());
    this.#flush();
  }

  #flush(): void {
    const out = this.engine.takeOutbox();
    let i = 0;
    while (i < out.length) {
      const to = out[i]!.to;
      const frames: Frame[] = [];
      while (i < out.length && out[i]!.to === to) frames.push(out[i++]!.frame);
      this.#transport.send(to, frames);
    }
    const at = this.engine.nextDeadline();
    if (at !== undefined && at < this.#timerAt && !this.#closed) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timerAt = at;
      this.#timer = setTimeout(this.#onTimer, Math.max(0, at - performance.now()));
    }
  }

  #onTimer = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    if (this.#closed) return;
    this.run((now) => this.engine.tick(now));
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
  if (opts.transport === 'inproc') return new Device(mem, new InprocTransport(), { mss: opts.mss ?? 65536 });
  if (opts.transport === 'tcp') {
    // tcp: iWARP, one MPA connection per rc QP pair; segments fit one FPDU of the MULPDU.
    const t = await TcpTransport.open({ dp: mem, host: opts.host ?? '127.0.0.1', port: opts.port ?? 0 });
    const dev = new Device(mem, t, { mss: Math.min(opts.mss ?? t.mss, t.mss) });
    t.bind(dev);
    return dev;
  }
  // udp: segments are cut so envelope + DDP header + payload fill one datagram of the path MTU.
  const dp = dataPlaneWorkers > 0 ? await DataPlaneWorkers.start(mem, dataPlaneWorkers) : undefined;
  let t: UdpTransport;
  try {
    t = await UdpTransport.open({
      host: opts.host ?? '127.0.0.1',
      port: opts.port ?? 0,
      deviceMemory: mem,
      ...(dp ? { workers: dp } : {}),
      ...(opts.mtu !== undefined ? { mtu: opts.mtu } : {}),
      ...(opts.sockets !== undefined ? { sockets: opts.sockets } : {}),
    });
  } catch (e) {
    // The transport owns the workers once open; before that they are ours to stop.
    await dp?.close();
    throw e;
  }
  return new Device(mem, t, { mss: Math.min(opts.mss ?? t.mss, t.mss) });
}
