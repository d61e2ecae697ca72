// The inline port: the driver, the RDMAP engine and the link run on the calling thread
// (openDevice `workers: 0`, and inproc devices). Every verb is one driver step, at once; posts
// are the exception: the posts of one run of JavaScript join one step, whose output goes out in a
// promise job when that run ends (an application refilling its window after a completion posts
// dozens in a row, and each step's poll of the engine's output, events and timers is a
// per-message cost). The link writes to its socket in a job of its own anyway.
import type { DeviceAddress } from '../core/address.js';
import { QpState } from '../core/enums.js';
import type { Link, QpDownCause, ServiceRequest } from '../core/link.js';
import type { DeviceMemory } from '../dataplane/device-memory.js';
import type { EngineBounds } from '../rdmap/bounds.js';
import { RdmapEngine } from '../rdmap/engine.js';
import { EngineMemory, type MrRecord } from '../rdmap/memory.js';
import type { OpcodeRow } from '../rdmap/opcodes.js';
import { type EngineQp, newRecvWork, newSendWork, type Piece, type QpCaps } from '../rdmap/state.js';
import { job } from '../transport/job.js';
import { NicDriver, type NicEvent } from './driver.js';
import { RegionFence } from './region-fence.js';
import type { NicPort, PortCq, PortDest, PortMr, PortPiece, PortQp, PortSend, PortStats } from './port.js';

class InlineQp implements PortQp {
  readonly qpn: number;
  readonly #port: InlinePort;
  readonly q: EngineQp;

  constructor(port: InlinePort, q: EngineQp) {
    this.#port = port;
    this.q = q;
    this.qpn = q.qpn;
  }

  get state() {
    return this.q.state;
  }

  get sqLength(): number {
    return this.q.sq.length;
  }

  get rqLength(): number {
    return this.q.rq.length;
  }

  get standardPeer(): boolean {
    const flow = this.q.flow;
    return flow !== undefined && !flow.profile.extensions;
  }

  get downCause(): QpDownCause | undefined {
    return this.#port.downCauses.get(this.qpn);
  }

  init(): void {
    this.q.state = QpState.Init;
  }

  connect(peer: DeviceAddress, rqpn: number, secret?: Uint8Array, passive = false): void {
    const p = this.#port;
    const conns = p.link.connections;
    p.driver.run((now) => p.engine.connect(this.q, peer, rqpn, now, conns === undefined && !passive));
    conns?.openQp(this.qpn, peer, rqpn, secret);
  }

  toError(): void {
    const p = this.#port;
    p.driver.run((now) => p.engine.toError(this.q, now));
  }

  reset(): void {
    const p = this.#port;
    if (this.q.state === QpState.Init && this.q.rq.length > 0) this.toError();
    p.engine.reset(this.q);
    p.downCauses.delete(this.qpn);
  }

  postSend(w: PortSend, row: OpcodeRow, pieces: PortPiece[], total: number, dest: PortDest | undefined, inline: Uint8Array | undefined): void {
    const p = this.#port;
    // The inline port's regions are the engine's own records (lookup hands them out).
    const c = newSendWork(w, row, pieces as Piece[], total);
    if (dest) c.flow = p.engine.srdFlow(this.q, dest.address, dest.remoteQpn, dest.key);
    if (inline) c.inline = inline;
    p.engine.postSend(this.q, c, p.postTime());
  }

  postRecv(wrId: number | bigint, pieces: PortPiece[], total: number): void {
    const p = this.#port;
    const r = newRecvWork(wrId, pieces as Piece[], total);
    p.engine.postRecv(this.q, r, p.postTime());
  }

  destroy(deviceOpen: boolean): void {
    const p = this.#port;
    if (deviceOpen) p.driver.run((now) => p.engine.close(this.q, now));
    p.engine.destroyQp(this.q);
    p.downCauses.delete(this.qpn);
  }
}

export class InlinePort implements NicPort {
  readonly engine: RdmapEngine;
  readonly memory: EngineMemory;
  /** Regions over device memory their registrant allocated (a view): deregistering frees nothing. */
  readonly #lent = new WeakSet<MrRecord>();
  readonly link: Link;
  readonly driver: NicDriver;
  /** When a deregistered region's memory may be handed on. */
  readonly fence: RegionFence;
  readonly #onEvent: { fn: (ev: NicEvent) => void; after?: () => void } = { fn: () => {} };
  /**
   * @internal why each QP that went down by itself did (PortQp.downCause): only QPs in ERROR
   * with a cause are here (an idle QP costs nothing), until reset or destroy.
   */
  readonly downCauses = new Map<number, QpDownCause>();
  /** The time of the batch step running now (batch(), or posts waiting for their job), or -1: posts then join that one step. */
  batchNow = -1;
  /** Posts wait for #endPosts (a promise job) to flush their step. */
  #postsOpen = false;

  constructor(mem: DeviceMemory, link: Link, opts: { mss?: number; bounds?: Partial<EngineBounds> } = {}) {
    this.memory = new EngineMemory(mem);
    this.engine = new RdmapEngine(this.memory, {
      mss: Math.min(opts.mss ?? link.mss, link.mss), maxControl: link.mss, linkCutsTagged: link.cutsTagged === true, ...(opts.bounds ? { bounds: opts.bounds } : {}),
    });
    this.link = link;
    const sink = this.#onEvent;
    const onEvent = (ev: NicEvent): void => {
      // Noted before anyone hears of it: the event's listeners may poll the flushed completions.
      if (ev.kind === 'qpError' && ev.cause !== undefined && this.engine.qps.has(ev.qpn) && !this.downCauses.has(ev.qpn)) this.downCauses.set(ev.qpn, ev.cause);
      sink.fn(ev);
    };
    this.driver = new NicDriver(this.engine, link, { onEvent, afterStep: () => sink.after?.() });
    this.fence = new RegionFence(this.engine, link, this.memory);
  }

  get dataPlane(): DeviceMemory {
    return this.memory.dm;
  }

  get address(): DeviceAddress {
    return this.link.address;
  }

  get mtu(): number | undefined {
    return this.link.mtu;
  }

  get integrity(): 'crc32c' | 'xxh3' | 'none' | undefined {
    return this.link.integrity;
  }

  get mss(): number {
    return this.engine.mss;
  }

  get maxControl(): number {
    return this.engine.maxControl;
  }

  get bounds(): EngineBounds {
    return this.engine.bounds;
  }

  /** The engine's work records keep the pieces posted. */
  readonly keepsPieces = true;

  get linkServices(): boolean {
    return this.link.connections !== undefined;
  }

  /** The time posts join: the open step's, or a new one's that a promise job flushes. */
  postTime(): number {
    if (this.batchNow >= 0) return this.batchNow;
    const now = this.driver.now();
    this.batchNow = now;
    this.#postsOpen = true;
    job(this.#endPosts);
    return now;
  }

  readonly #endPosts = (): void => {
    if (!this.#postsOpen) return;
    this.#postsOpen = false;
    const now = this.batchNow;
    this.batchNow = -1;
    this.driver.step(now);
  };

  batch(fn: () => void): void {
    if (this.batchNow >= 0) return fn();
    this.driver.run((now) => {
      this.batchNow = now;
      try {
        fn();
      } finally {
        this.batchNow = -1;
      }
    });
  }

  start(onEvent: (ev: NicEvent) => void, afterStep?: () => void): void {
    this.#onEvent.fn = onEvent;
    if (afterStep) this.#onEvent.after = afterStep;
  }

  stats(contextsShown: number): PortStats {
    const link = this.link.stats?.();
    const linkContexts = this.link.contextStats?.(contextsShown);
    return { counters: this.engine.counters, memory: this.memory.dm.stats(), ...(link ? { link } : {}), ...(linkContexts ? { linkContexts } : {}) };
  }

  reachable(a: DeviceAddress): boolean {
    return this.link.reachable(a);
  }

  view(addr: number, length: number): Uint8Array {
    return this.memory.dm.u8().subarray(addr, addr + length);
  }

  regDevice(length: number, pd: number, access: number): PortMr {
    const dm = this.memory.dm;
    const addr = dm.alloc(length, 64);
    dm.u8().fill(0, addr, addr + length);
    try {
      return this.memory.register({ addr, length, pd, access });
    } catch (e) {
      dm.free(addr);
      throw e;
    }
  }

  regExternal(buf: Uint8Array, pd: number, access: number): PortMr {
    // A view of device memory is registered as the device memory it is (placed, checksummed and
    // hashed in place; a view would go stale at the memory's next growth), and stays its owner's.
    if (buf.buffer === this.memory.dm.u8().buffer) {
      const rec = this.memory.register({ addr: buf.byteOffset, length: buf.length, pd, access });
      this.#lent.add(rec);
      return rec;
    }
    return this.memory.register({ length: buf.length, pd, access, ext: buf });
  }

  /** `release`: what gives the memory back once nothing can read it any more (default: freed here; ./region-fence.ts). */
  deregister(mr: PortMr, release?: () => void): void {
    const rec = mr as MrRecord;
    this.memory.deregister(rec.stag);
    const dm = this.memory.dm;
    this.fence.letGo(rec, rec.ext || this.#lent.delete(rec) ? undefined : release ?? (() => dm.free(rec.addr)));
  }

  lookup(stag: number): PortMr | undefined {
    return this.memory.lookup(stag);
  }

  check(stag: number, pd: number, addr: number, len: number, access: number): number {
    return this.memory.check(stag, pd, addr, len, access);
  }

  addCq(_cq: PortCq): void {}

  dropCq(_cq: PortCq): void {}

  hasQpn(qpn: number): boolean {
    return this.engine.qps.has(qpn);
  }

  createQp(qpn: number, type: 'rc' | 'srd', pd: number, caps: QpCaps, sendCq: PortCq, recvCq: PortCq, reportSource: boolean): PortQp {
    return new InlineQp(this, this.engine.createQp(qpn, type, pd, caps, sendCq, recvCq, reportSource));
  }

  listenService(service: number, handler: ((r: ServiceRequest) => void) | undefined): void {
    this.link.connections!.listen(service, handler);
  }

  dialService(qpn: number, to: DeviceAddress, service: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ remoteQpn: number; privateData: Uint8Array | undefined }> {
    return this.link.connections!.dial(qpn, to, service, privateData, timeoutMs);
  }

  closing(): void {}

  stop(): void {
    this.driver.stop();
  }

  async close(): Promise<void> {
    await this.link.close();
  }
}
