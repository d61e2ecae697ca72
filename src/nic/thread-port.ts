// The thread port: the application's side of a device whose NIC runs on a worker thread
// (./thread-main.ts). Posts become WQE records in a shared ring and a doorbell; completions
// come back as CQE records the CQs take when polled or woken; QP state and queue occupancy are
// words of a shared control table; the slow path (registration, createQp, modify, stats) is a
// synchronous mailbox call, as uverbs' command path is a system call (DESIGN.md §8).
//
// Only a token crosses for a work request id: the application keeps the ids (as mlx5's
// providers keep wr_id arrays in user space), so any number or bigint comes back as given.
import { MessageChannel, type MessagePort, type Worker } from 'node:worker_threads';
import { Packr } from 'msgpackr';
import type { DeviceAddress } from '../core/address.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { ServiceRequest } from '../core/link.js';
import type { WrId } from '../core/work.js';
import type { EngineBounds } from '../rdmap/bounds.js';
import { checkRegion } from '../rdmap/memory.js';
import type { QpCaps } from '../rdmap/state.js';
import type { NicEvent } from './driver.js';
import { DeviceMemory } from '../dataplane/device-memory.js';
import { createMailbox, MailboxClient, markMailboxGone, wasUnanswered } from './mailbox.js';
import type { CqSource, NicPort, PortCq, PortDest, PortEvent, PortMr, PortQp, PortStats } from './port.js';
import { RecordRing } from './ring.js';
import { AhIds } from './thread-ahs.js';
import { CloseCalls } from './thread-close.js';
import { ThreadCqs } from './thread-cqs.js';
import { applicationArena } from './thread-arena.js';
import { ThreadServices } from './thread-services.js';
import { nicReady, startNicWorker, threadScript } from './thread-start.js';
import {
  CLOSE_DONE_CQ, CONTROL_BYTES, CQ_BASE, CQE_RING_BYTES, fromWireError, type NicReady, type NicThreadInit, PLACE_RECORD_CQ, QP_FENCE_CQ, QP_SLOTS, QP_WORDS, QpWord,
  WQE_RING_BYTES,
} from './thread-proto.js';
import { type QpHost, type ThreadMr, ThreadQp } from './thread-qp.js';
import { QpTable } from './thread-qps.js';
import { othersPlaceFirst, PortRegions } from './place-visible.js';
import { type Cqe, readCqe, type RecvWqe, type SendWqe } from './wqe.js';

const packr = new Packr({ useRecords: false });

export class ThreadPort implements NicPort, QpHost {
  readonly control: Int32Array;
  readonly address: DeviceAddress;
  readonly mtu: number | undefined;
  readonly integrity: 'crc32c' | 'xxh3' | 'none' | undefined;
  readonly mss: number;
  readonly maxControl: number;
  readonly bounds: EngineBounds;
  readonly linkServices: boolean;
  /** Posts become WQE records at once: the pieces are not kept. */
  readonly keepsPieces = false;
  readonly #worker: Worker;
  readonly dataPlane: DeviceMemory;
  readonly #wqe: RecordRing;
  readonly #cqe: RecordRing;
  readonly #mailbox: MailboxClient;
  /** This thread's side of dev.stats().nic (NicCounters). */
  readonly #counts = { appWakes: 0, appDoorbells: 0 };
  readonly #buffers: MessagePort;
  #onEvent: (ev: PortEvent) => void = () => {};
  readonly #mrs = new PortRegions<ThreadMr>(this);
  /** Live QPs, and destroyed ones whose flushes may still come (./thread-qps.ts). */
  readonly #qps = new QpTable();
  readonly #cqs = new ThreadCqs();
  readonly #ahs = new AhIds();
  readonly #freeQpSlots: number[] = [];
  #qpSlotNext = 0;
  readonly #trim = new Set<ThreadQp>();
  #batching = false;
  #pending = false;
  #watching = false;
  /** The CQE being taken, decoded in place of a new object per record. */
  readonly #cqeIn: Cqe = { cq: 0, token: 0, qpn: 0, status: 0, opcode: 0, byteLen: 0 };
  #closed = false;
  #closing = false;
  readonly #svc = new ThreadServices(this);
  #closedP: Promise<void> | undefined;

  readonly #arenaGone: { yes: boolean };
  /** The mailboxes other NIC threads of the device allocate through, served by this one (./thread-arena.ts). */
  readonly #arenas: readonly SharedArrayBuffer[];

  private constructor(worker: Worker, ready: Extract<NicReady, { kind: 'ready' }>, dataPlane: DeviceMemory, control: SharedArrayBuffer, wqe: RecordRing, cqe: RecordRing, mailbox: MailboxClient, buffers: MessagePort, arenaGone: { yes: boolean }, arenas: readonly SharedArrayBuffer[]) {
    this.#arenaGone = arenaGone;
    this.#arenas = arenas;
    this.#worker = worker;
    this.control = new Int32Array(control);
    this.dataPlane = dataPlane;
    this.address = Object.freeze({ ...ready.address }) as unknown as DeviceAddress;
    this.mtu = ready.mtu;
    this.integrity = ready.integrity;
    this.mss = ready.mss;
    this.maxControl = ready.maxControl;
    this.bounds = Object.freeze({ ...ready.bounds }) as unknown as EngineBounds;
    this.linkServices = ready.linkServices;
    this.#wqe = wqe;
    this.#cqe = cqe;
    this.#mailbox = mailbox;
    this.#buffers = buffers;
    worker.on('message', (m: { kind: string }) => this.#onMessage(m));
    // Without a listener, a NIC thread's uncaught error would be thrown in the application.
    worker.on('error', (e: Error) => this.#died(new SabreError(ErrorCode.Internal, `the NIC thread failed: ${e?.message ?? String(e)}`, { cause: e })));
    worker.once('exit', (code: number) => {
      this.#exited = true;
      // A thread ended from outside (terminate) runs no exit handler of its own to say so: its
      // mailbox, and those of the threads that allocate through it, fail their calls at once.
      this.#markGone();
      this.#died(new SabreError(ErrorCode.Internal, `the NIC thread exited (${code})`));
    });
    this.#watch();
  }

  /** Start a NIC thread for `transport` and wait until its link is open (or failed to). */
  static async open(transport: string, opts: Record<string, unknown>, limits: { engine: Record<string, number>; link: Record<string, number> }, shared?: Pick<NicThreadInit, 'attach' | 'arenas'>): Promise<ThreadPort> {
    const control = new SharedArrayBuffer(CONTROL_BYTES);
    const wqe = RecordRing.create(WQE_RING_BYTES);
    const cqe = RecordRing.create(CQE_RING_BYTES);
    const mailbox = createMailbox();
    const { port1, port2 } = new MessageChannel();
    const init: NicThreadInit & { buffers: MessagePort } = { transport, opts, limits, control, wqe: wqe.sab, cqe: cqe.sab, mailbox, buffers: port2, ...shared };
    const worker = startNicWorker(threadScript(), { workerData: init, transferList: [port2] });
    let ready: NicReady;
    try {
      ready = await nicReady(worker);
    } catch (e) {
      port1.close();
      throw e;
    }
    if (ready.kind === 'failed') {
      port1.close();
      await worker.terminate();
      throw fromWireError(ready.error);
    }
    // A NIC thread polling its WQE ring (nicPollUs) sleeps on the ring, not on the mailbox: a
    // slow-path call wakes it there once the request is in (without polling nothing sleeps there
    // synchronously, and a wake would only be a spurious turn).
    const polls = typeof opts['nicPollUs'] === 'number' && opts['nicPollUs'] > 0;
    const client = new MailboxClient(mailbox, polls ? () => wqe.wakeConsumer() : undefined);
    // The NIC thread owns the allocator. Once it is gone, so is the memory: a free is nothing
    // to do (features release their tables as they close, possibly after the device).
    const gone = { yes: false };
    // Through the port once there is one: a call nobody answers fails the device as any other.
    let port: ThreadPort | undefined;
    const ask = (op: string, a: Record<string, unknown>): unknown => {
      if (gone.yes) throw new SabreError(ErrorCode.Closed, 'device is closed');
      return port ? port.call(op, a) : client.call(op, a);
    };
    const dataPlane = await DeviceMemory.attach(ready.memory, ready.module, ready.map, ready.maximumBytes, applicationArena(ask, gone));
    port = new ThreadPort(worker, ready, dataPlane, control, wqe, cqe, client, port1, gone, shared?.arenas ?? []);
    return port;
  }

  /** @internal the allocation mailboxes this thread serves (a test reads them). */
  get arenas(): readonly SharedArrayBuffer[] {
    return this.#arenas;
  }

  /** Nothing will answer on this thread's mailboxes any more: calls fail at once. */
  #markGone(): void {
    this.#mailbox.markGone();
    for (const sab of this.#arenas) markMailboxGone(sab);
  }

  /** @internal a slow-path request, answered by the NIC thread before this returns. */
  call(op: string, args: Record<string, unknown> = {}, timeoutMs?: number): any {
    if (!this.#callable) throw new SabreError(ErrorCode.Closed, 'device is closed');
    // Nothing blocks while the device closes: a thread just ended (its 'exit' unseen while this
    // one blocks) or hung would hold it a deadline per call. The rest is refused (tearDown).
    if (this.#closing) throw new SabreError(ErrorCode.Closed, 'device is closing');
    try {
      return this.#mailbox.call(op, args, timeoutMs);
    } catch (e) {
      // No answer within the deadline, or the thread ended while this one blocked (its 'exit'
      // event cannot run meanwhile; a handler's own errors are not these): the NIC is gone.
      if (wasUnanswered(e)) this.hung((e as Error).message);
      throw e;
    }
  }

  /**
   * @internal the NIC thread did not answer in time (a call, a dial's answer): later calls fail at
   * once, the thread is ended, and the device fails as for a crash, from the event loop.
   */
  hung(why: string): void {
    if (this.#unanswered) return;
    this.#unanswered = true;
    // The other threads' allocations too, and the work outstanding is flushed now: a QP
    // destroyed before the event below would take its work with it.
    this.#markGone();
    this.#arenaGone.yes = true;
    this.drain();
    if (!this.#closing) this.#flushAll();
    setImmediate(() => this.#died(new SabreError(ErrorCode.Internal, `the NIC thread did not answer: ${why}`)));
    void this.#worker.terminate();
  }

  /** A call found the NIC thread gone or hung (see call()). */
  #unanswered = false;
  /** The NIC thread has ended (its 'exit' event). */
  #exited = false;
  /** The NIC thread's last record at close (CLOSE_DONE_CQ) was drained: every completion is in. */
  #handedOver = false;

  // ---- posting ------------------------------------------------------------------------------

  /** The send and receive WQEs being posted, refilled for each (ThreadQp). */
  readonly sendOut: SendWqe = { qpn: 0, token: 0, opcode: 0, signaled: true, sges: [] };
  readonly recvOut: RecvWqe = { qpn: 0, token: 0, sges: [] };

  /** Write one WQE (`write` returns false when the ring is full: the NIC takes what it holds, once). */
  post<W>(write: (ring: RecordRing, w: W) => boolean, w: W): void {
    if (!write(this.#wqe, w)) {
      this.#wqe.commit();
      this.call('drain');
      if (!write(this.#wqe, w)) throw new SabreError(ErrorCode.QueueFull, 'the NIC\'s work queue ring is full');
    }
    if (this.#batching) {
      this.#pending = true;
      return;
    }
    this.#wqe.commit();
    if (this.#wqe.ringDoorbell()) this.#counts.appDoorbells++;
  }

  batch(fn: () => void): void {
    if (this.#batching) return fn();
    this.#batching = true;
    try {
      fn();
    } finally {
      this.#batching = false;
      if (this.#pending) {
        this.#pending = false;
        this.#wqe.commit();
        if (this.#wqe.ringDoorbell()) this.#counts.appDoorbells++;
      }
    }
  }

  /** @internal the address handle id of `dest`, told to the NIC once (bounded: ./thread-ahs.ts). */
  ahId(dest: PortDest): number {
    const id = this.#ahs.id(dest.key);
    if (id !== undefined) return id;
    const a = this.#ahs.add(dest.key);
    // Records a batch wrote and has not committed may name an id forgotten here: committed
    // first, the NIC thread takes them before it serves this request.
    if (a.forgot.length > 0) this.#wqe.commit();
    this.call('ah', { id: a.id, address: dest.address, forget: a.forgot });
    return a.id;
  }

  /** @internal a QP whose id tables grew past their queue: trimmed at the next drain. */
  trimLater(qp: ThreadQp): void {
    this.#trim.add(qp);
  }

  /** @internal */
  forget(qp: ThreadQp): void {
    this.#qps.forget(qp);
    this.#trim.delete(qp);
    this.#freeQpSlots.push(qp.slot);
  }

  // ---- completions --------------------------------------------------------------------------

  /** The completion drain() hands a CQ (CompletionQueue.offer copies it): refilled, never kept. */
  readonly #wcIn: { wrId: WrId; status: number; opcode: number; byteLen: number; qpn: number; imm: number | undefined; srcQpn: number | undefined; src: unknown } = {
    wrId: 0, status: 0, opcode: 0, byteLen: 0, qpn: 0, imm: undefined, srcQpn: undefined, src: undefined,
  };

  /** Take every CQE record into its CQ (and every placement record into its region). */
  drain(): void {
    // While the device closes, its flushes wait for the end of close (see closing()).
    if (this.#closing) return;
    othersPlaceFirst(this);
    // Retired counts read before the drain: every completion of the work they retired is in
    // the ring by then (the NIC commits completions before it publishes counts).
    let retired: Map<ThreadQp, number> | undefined;
    if (this.#trim.size > 0) {
      retired = new Map();
      for (const qp of this.#trim) retired.set(qp, Atomics.load(this.control, qp.slot * QP_WORDS + QpWord.sqRetired));
    }
    const ring = this.#cqe;
    for (let off = ring.peek(); off >= 0; off = ring.peek()) {
      const c = readCqe(ring.dv, off, this.#cqeIn);
      ring.advance();
      if (c.cq === CLOSE_DONE_CQ) {
        this.#handedOver = true;
        continue;
      }
      if (c.cq === PLACE_RECORD_CQ) {
        const mr = this.#mrs.get(c.token);
        if (mr?.shadow) mr.ext!.set(mr.shadow.subarray(c.qpn, c.qpn + c.byteLen), c.qpn);
        continue;
      }
      if (c.cq === QP_FENCE_CQ) {
        this.#qps.fence(c.qpn);
        continue;
      }
      const cq = this.#cqs.get(c.cq);
      const qp = this.#qps.route(c.qpn);
      const wrId = qp?.take(c.token, (c.opcode & 128) !== 0);
      if (!cq || wrId === undefined) continue;
      // One record refilled per completion: the CQ copies it into the completion it hands out.
      const wc = this.#wcIn;
      wc.wrId = wrId;
      wc.status = c.status;
      wc.opcode = c.opcode;
      wc.byteLen = c.byteLen;
      wc.qpn = c.qpn;
      wc.imm = c.imm;
      wc.srcQpn = c.srcQpn;
      wc.src = c.src !== undefined ? packr.unpack(c.src) : undefined;
      cq.offer(wc as never);
    }
    if (retired) {
      for (const [qp, r] of retired) {
        // Tokens below the retired count are done; an unsignaled success has no completion.
        qp.sends.dropBefore(r);
        this.#trim.delete(qp);
      }
    }
  }

  #watch(): void {
    // A closing device takes its completions at the end of close(): nothing to watch for.
    if (this.#watching || this.#closed || this.#closing) return;
    const w = this.#cqe.waitForRecords();
    if (w === undefined) {
      this.drain();
      // Records came in while draining: look again next turn (never a microtask loop).
      setImmediate(() => this.#watch());
      return;
    }
    this.#watching = true;
    void w.then(this.#woken);
  }

  /** The completion ring's doorbell rang: one closure for every wake, not one per wait. */
  readonly #woken = (): void => {
    this.#watching = false;
    this.#counts.appWakes++;
    this.drain();
    this.#watch();
  };

  // ---- messages from the NIC thread ---------------------------------------------------------

  #onMessage(m: any): void {
    this.drain();
    const ev = m.ev;
    if (m.kind !== 'event') this.#svc.onMessage(m);
    else if (ev.kind === 'cqError') this.#onEvent({ kind: 'cqError', cq: this.#cqs.get(ev.cq) as never });
    else if (ev.kind === 'connectFailed') this.#onEvent({ kind: 'connectFailed', qpn: ev.qpn, error: fromWireError(ev.error) });
    else if (ev.kind === 'qpError') this.#onEvent({ ...ev, stale: (ev.resets ?? 0) < (this.#qps.route(ev.qpn)?.resets ?? 0) });
    else this.#onEvent(ev);
  }

  // ---- NicPort ------------------------------------------------------------------------------

  start(onEvent: (ev: PortEvent) => void): void {
    this.#onEvent = onEvent;
  }

  /** @internal the NIC thread (a test ends it to see the device fail as a NIC that is gone). */
  get worker(): Worker {
    return this.#worker;
  }

  /** The NIC thread threw or ended on its own: refuse every call now (none could be answered), and say so. */
  #died(error: Error): void {
    if (this.#closed || this.#closeCalled) return;
    // What it completed is in the ring; what it did not, nobody will: flushed here, as a NIC
    // that is gone (the close of a device that was closing already does it at its end).
    this.drain();
    if (!this.#closing) this.#flushAll();
    this.#closed = true;
    this.#arenaGone.yes = true;
    this.#svc.failWaits(`device closed: ${error.message}`);
    this.#onEvent({ kind: 'deviceFatal', error });
  }

  /** Every QP's outstanding work completes with WrFlushErr into its CQ (the NIC thread is gone). */
  #flushAll(): void {
    this.#qps.flushAll((cq, wc) => this.#cqs.get(cq)?.offer(wc as never));
  }

  stats(contextsShown: number): PortStats {
    const st = this.call('stats', { contexts: contextsShown }) as PortStats;
    st.nic = { ...st.nic!, ...this.#counts, ahEvictions: this.#ahs.evictions };
    return st;
  }

  reachable(a: DeviceAddress): boolean {
    // Closing (the close awaits the NIC thread, and the loop runs meanwhile): nothing is.
    if (!this.#callable || this.#closing) return false;
    return this.call('reachable', { address: a }) as boolean;
  }

  view(addr: number, length: number): Uint8Array {
    const dm = this.dataPlane;
    if (addr + length > dm.u8().length) dm.refresh();
    return dm.u8().subarray(addr, addr + length);
  }

  regDevice(length: number, pd: number, access: number): PortMr {
    // The NIC zero-fills the region (~1 ms per MiB on a busy machine): a deadline that grows with
    // it, so a large registration is not taken for a NIC that stopped answering.
    const r = this.call('regDevice', { length, pd, access }, 5000 + Math.ceil(length / (1 << 20)) * 20) as { stag: number; addr: number };
    // The NIC thread's allocation may have grown the shared memory: this thread's views of it
    // (dataPlane.u8(), refreshed only by this thread's own allocations) must reach the region
    // before its address is handed out. A caller copying into it through a stale view with
    // copyWithin copies nothing, silently, and the region's zeros go out under its key.
    if (r.addr + length > this.dataPlane.u8().length) this.dataPlane.refresh();
    const mr: ThreadMr = { stag: r.stag, addr: r.addr, length, pd, access };
    this.#mrs.set(r.stag, mr);
    return mr;
  }

  regExternal(buf: Uint8Array, pd: number, access: number): PortMr {
    // Shared memory the NIC thread reaches itself (a view of device memory: as device memory, at r.addr), other through a shadow.
    const shared = buf.buffer instanceof SharedArrayBuffer;
    const shadow = shared ? undefined : new Uint8Array(new SharedArrayBuffer(buf.length));
    shadow?.set(buf);
    this.#buffers.postMessage({ buf: shadow ?? buf });
    const device = shared && buf.buffer === this.dataPlane.u8().buffer ? buf.byteOffset : -1;
    const r = this.call('regExternal', { pd, access, shadow: !shared, device }) as { stag: number; addr: number };
    const mr: ThreadMr = { stag: r.stag, addr: r.addr, length: buf.length, pd, access, ...(device >= 0 && r.addr === device ? {} : { ext: buf }), ...(shadow ? { shadow } : {}) };
    this.#mrs.set(r.stag, mr);
    return mr;
  }

  /** `shared`: a region of several NIC threads (./shared-regions.ts DeregArgs). */
  deregister(mr: PortMr, shared?: { adopted?: boolean; fence?: number }): void {
    this.#mrs.delete(mr.stag);
    this.tearDown('dereg', { stag: mr.stag, ...shared });
  }

  /** @internal another NIC thread's region of this device's memory: the same keys here (./multi-port.ts). */
  adopt(mr: ThreadMr): void {
    const mem = mr.shadow ?? mr.ext;
    if (mem) this.#buffers.postMessage({ buf: mem });
    this.call('adopt', { stag: mr.stag, addr: mr.addr, length: mr.length, pd: mr.pd, access: mr.access, ext: mem !== undefined, shadow: mr.shadow !== undefined });
    this.#mrs.set(mr.stag, mr);
  }

  lookup(stag: number): PortMr | undefined {
    return this.#mrs.get(stag);
  }

  check(stag: number, pd: number, addr: number, len: number, access: number): number {
    return checkRegion(this.#mrs.get(stag), pd, addr, len, access);
  }

  addCq(cq: PortCq): void {
    const { id, slot } = this.#cqs.reserve();
    Atomics.store(this.control, CQ_BASE + slot, 0);
    this.call('createCq', { id, slot, depth: cq.depth });
    this.#cqs.add(id, slot, cq);
    const control = this.control;
    const source: CqSource = {
      drain: () => this.drain(),
      took: (n) => Atomics.add(control, CQ_BASE + slot, n),
    };
    cq.bind?.(source, id);
  }

  dropCq(cq: PortCq): void {
    for (const id of this.#cqs.drop(cq)) this.tearDown('dropCq', { id });
  }

  hasQpn(qpn: number): boolean {
    return this.#qps.has(qpn);
  }

  createQp(qpn: number, type: 'rc' | 'srd', pd: number, caps: QpCaps, sendCq: PortCq, recvCq: PortCq, reportSource: boolean): PortQp {
    const [sq, rq] = [this.#cqs.idOf(sendCq), this.#cqs.idOf(recvCq)];
    const slot = this.#freeQpSlots.pop() ?? this.#qpSlotNext;
    if (slot >= QP_SLOTS) throw new SabreError(ErrorCode.LimitExceeded, `a device has at most ${QP_SLOTS} QPs`);
    if (slot === this.#qpSlotNext) this.#qpSlotNext++;
    try {
      this.call('createQp', { qpn, slot, type, pd, caps, sendCq: sq, recvCq: rq, reportSource });
    } catch (e) {
      // Refused (or the NIC gone): the slot serves the next QP.
      this.#freeQpSlots.push(slot);
      throw e;
    }
    const qp = new ThreadQp(this, qpn, slot, caps.maxSendWr, sq, rq);
    this.#qps.add(qp);
    return qp;
  }

  listenService(service: number, handler: ((r: ServiceRequest) => void) | undefined): void {
    this.#svc.listen(service, handler, this.#closed || this.#closing);
  }

  dialService(qpn: number, to: DeviceAddress, service: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ remoteQpn: number; privateData: Uint8Array | undefined }> {
    return this.#svc.dial(qpn, to, service, privateData, timeoutMs);
  }

  /** @internal */
  get isClosing(): boolean {
    return this.#closing;
  }

  closing(): void {
    this.#closing = true;
    // A feature freeing its tables meanwhile has nothing to do (the memory goes with the device).
    this.#arenaGone.yes = true;
  }

  /**
   * @internal a call that lets go of something (a QP's destroy, a region, a CQ): while the device
   * closes (its QPs' destroys, a feature's close hook), sent with the close and awaited, never
   * blocked on (see call()); else now, if the NIC thread takes calls.
   */
  tearDown(op: string, args: Record<string, unknown>): void {
    // Once the close request is out its batch has gone: the thread lets go of everything anyway.
    if (this.#closing && !this.#closeCalled) this.#atClose.add(op, args);
    else if (!this.#closing && this.#callable) this.call(op, args);
  }

  stop(): void {
    try {
      this.tearDown('stop', {});
    } catch (e) {
      if (!this.#unanswered) throw e;
    }
  }

  /** The close request is out to the NIC thread (its reply is awaited): no other call now. */
  #closeCalled = false;
  /** What the device's close asks before the close itself (./thread-close.ts). */
  readonly #atClose = new CloseCalls();

  get callable(): boolean {
    return this.#callable;
  }

  /** The mailbox takes a call: not closed, no close out. */
  get #callable(): boolean {
    return !this.#closed && !this.#closeCalled && !this.#unanswered;
  }

  close(): Promise<void> {
    this.#closedP ??= this.#close();
    return this.#closedP;
  }

  async #close(): Promise<void> {
    // The NIC thread closes its link before it answers: promises this close settles are settled
    // in the turn close() resolves in, as inline. Awaited, not blocked on: the link's close
    // lingers for its peers' acknowledgements, and this thread's event loop must run meanwhile
    // (an inline peer in this thread answers). No other call while it is out (one at a time).
    const dead = this.#closed || this.#unanswered; // the NIC thread died or hung: nobody would answer
    this.#closeCalled = true;
    this.#arenaGone.yes = true;
    let answered = false;
    // (A pending Atomics.waitAsync holds no event loop open: the interval does, for both waits.)
    const alive = setInterval(() => {}, 1000);
    try {
      if (!dead) {
        // A destroy the NIC thread refused leaves the close to go on: the device closes
        // whatever one of its calls said (it used to resolve then too).
        await this.#atClose.send(this.#mailbox, 5_000).catch((e: unknown) => {
          if (wasUnanswered(e)) throw e;
        });
        await this.#mailbox.callAsync('close', {}, 10_000);
        answered = true;
      }
    } catch {
      // A thread that does not answer (or ended meanwhile) is ended below.
    }
    this.#closed = true;
    this.#arenaGone.yes = true;
    this.#closing = false;
    this.drain();
    // Completions the NIC thread held back (the ring was full) come as this thread takes the
    // ring's, up to its last record (CLOSE_DONE_CQ), bounded.
    for (const until = Date.now() + 10_000; answered && !this.#handedOver && !this.#exited && Date.now() < until; ) {
      const w = this.#cqe.waitForRecords(50);
      if (w !== undefined) await w;
      this.drain();
    }
    clearInterval(alive);
    // A thread that died, or did not finish its close, left its outstanding work unflushed.
    if (!answered || !this.#handedOver) this.#flushAll();
    this.#qps.clear();
    this.#mrs.closed();
    this.#buffers.close();
    this.#svc.failWaits('device closed');
    // Never kept alive by a thread that is ending; one that hangs is stopped.
    this.#worker.unref();
    const hung = setTimeout(() => void this.#worker.terminate(), 5_000);
    hung.unref();
    this.#worker.once('exit', () => clearTimeout(hung));
  }
}
