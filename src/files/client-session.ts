// The request machinery of a file client: one authenticated rc connection to the server and the
// ClientConnection (./client-core.ts) it drives. It posts what the core asks, feeds the core the
// completions of its CQ and the status blocks the server writes (interrupt or polled), and
// settles each request's promise; the control pipe stays open for the keys of dedup channels.
// ./client-connect.ts opens it; FileClient (./client.ts) builds the file operations on request().
import { randomBytes } from 'node:crypto';
import type net from 'node:net';
import type { DeviceAddress } from '../core/address.js';
import { Access, Opcode, WcOpcode, WcStatus, wcStatusName } from '../core/enums.js';
import type { WorkCompletion } from '../core/work.js';
import type { CompletionQueue } from '../verbs/cq.js';
import { driveCq } from '../verbs/cq-driver.js';
import type { Device } from '../verbs/device.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { QueuePair } from '../verbs/qp.js';
import { FILE_SLOT_BYTES, FileStatus } from '../wire/files-spec.js';
import { Lifecycle } from '../core/lifecycle.js';
import { type ClientAction, type ClientConnection, type NegotiatedLimits, sealOf } from './client-core.js';
import { type Body, STATUS_BLOCK_LEN } from './messages.js';
import type { Negotiated, PipeClient } from './pipe.js';
import { LeasePool } from './pool.js';
import type { Provider } from './server.js';
import { FileError, LocalCode, statusCode } from './status.js';
import { copyBytes } from '../core/bytes.js';

/** Sends up to this size go inline from one scratch buffer (the QP's maxInline). */
export const MAX_INLINE = 512;
/** One receive slot: the largest message the server sends (a response or a credit message). */
export const RECV_SIZE = 128;
/** A request's header area: the largest request (a RegisterFile with a 4096-byte path) fits. */
export const HDR_AREA = 4224;
/** wrIds of Sends carrying a write buffer: the buffer returns to its pool when the Send completes. */
const DATA_WR = 0x1_0000_0000;

/** How a request completes when its options do not say. */
export interface SessionOptions {
  mode?: 'interrupt' | 'poll';
  spinMs?: number;
  timeoutMs?: number;
  /** ConnectOptions.requestTimeoutMs (ms; 0: none). */
  requestTimeoutMs?: number;
}

/** The default deadline of one request (ConnectOptions.requestTimeoutMs). */
export const REQUEST_TIMEOUT_MS = 60_000;
/** After a request's deadline, how long its Cancel may take (at most; the deadline if shorter). */
const CANCEL_GRACE_MS = 10_000;

export interface RequestOptions {
  signal?: AbortSignal;
  mode?: 'interrupt' | 'poll';
  collapse?: boolean;
  /** A write's data: leased buffer `buf` of the write buffers, `length` bytes of it. */
  data?: { buf: number; length: number };
}

export interface Completion {
  status: number;
  value: number;
  aux: number;
}

interface Waiting {
  resolve: (d: Completion) => void;
  reject: (e: Error) => void;
  what: string;
  poll: boolean;
  since: number;
  asked: boolean;
  /** The deadline, then the Cancel's grace (cleared when the request settles). */
  timer?: ReturnType<typeof setTimeout>;
  /** Past its deadline, a Cancel sent: a Cancelled answer rejects with ERR_FILE_TIMEOUT. */
  overdue?: string;
}

/** What ./client-connect.ts made: the connected QP, its buffers and the pipe it was negotiated on. */
export interface SessionParts {
  transport: Provider;
  server: { host: string; port: number };
  dev: Device;
  pipe: net.Socket;
  pc: PipeClient;
  /** Where the server's RDMA device was reached. */
  address: DeviceAddress;
  qp: QueuePair;
  cq: CompletionQueue;
  core: ClientConnection;
  status: MemoryRegion;
  recv: MemoryRegion;
  hdrs: MemoryRegion;
  scratch: MemoryRegion;
  opts: SessionOptions;
}

export class ClientSession {
  readonly transport: Provider;
  readonly server: { host: string; port: number };
  readonly dev: Device;
  /** Where the server's RDMA device was reached. */
  readonly address: DeviceAddress;
  /** Set by authenticate(). */
  limits!: NegotiatedLimits;
  /**
   * Read sinks (maxReadWriteSize each) and write buffers (maxWriteSize each), leased by index.
   * Each is registered at its first use: a registration zero-fills device memory on the NIC
   * thread while this thread waits, and a session that only makes dedup transfers (which run on
   * channels of their own) or only reads or only writes needs none or one of them.
   */
  get sinks(): MemoryRegion | undefined {
    if (!this.#sinks && this.#sinkBytes > 0) this.#sinks = this.#register(this.#sinkBytes, Access.LocalWrite | Access.RemoteWrite);
    return this.#sinks;
  }

  get data(): MemoryRegion | undefined {
    if (!this.#data && this.#dataBytes > 0) this.#data = this.#register(this.#dataBytes, Access.LocalWrite);
    return this.#data;
  }

  /** A request that reaches its buffers after the session ended fails as every request then does. */
  #register(bytes: number, access: number): MemoryRegion {
    if (this.failure) throw this.failure;
    if (this.#closed) throw new FileError(LocalCode.Closed, 'the client is closed');
    return this.#status.pd.regMr(bytes, access);
  }

  #sinks: MemoryRegion | undefined;
  #data: MemoryRegion | undefined;
  #sinkBytes = 0;
  #dataBytes = 0;
  sinkPool = new LeasePool(0);
  dataPool = new LeasePool(0);
  /** The first failure: every later request fails with it. */
  failure: FileError | undefined;
  readonly #pipe: net.Socket;
  readonly #pc: PipeClient;
  readonly #qp: QueuePair;
  readonly #cq: CompletionQueue;
  readonly #core: ClientConnection;
  readonly #status: MemoryRegion;
  readonly #recv: MemoryRegion;
  readonly #hdrs: MemoryRegion;
  readonly #scratch: MemoryRegion;
  readonly #opts: SessionOptions;
  readonly #waiting = new Map<number, Waiting>();
  /** end() once: every call gets the promise of the first (requests fail with ERR_FILE_CLOSED). */
  readonly #life = new Lifecycle(() => new FileError(LocalCode.Closed, 'the client is closed'));
  #polling = false;
  #currentRecv = -1;
  readonly #dataBySend = new Map<number, number>();
  #negotiating: Array<{ resolve: (n: Negotiated) => void; reject: (e: Error) => void }> = [];

  constructor(p: SessionParts) {
    this.transport = p.transport;
    this.server = p.server;
    this.dev = p.dev;
    this.address = p.address;
    this.#pipe = p.pipe;
    this.#pc = p.pc;
    this.#qp = p.qp;
    this.#cq = p.cq;
    this.#core = p.core;
    this.#status = p.status;
    this.#recv = p.recv;
    this.#hdrs = p.hdrs;
    this.#scratch = p.scratch;
    this.#opts = p.opts;
  }

  get closed(): boolean {
    return this.#life.closing;
  }

  get #closed(): boolean {
    return this.#life.closing;
  }

  /** The deadline of a negotiation (and of a dedup transfer's steps): the connect deadline. */
  get timeoutMs(): number {
    return this.#opts.timeoutMs ?? 10_000;
  }

  /** The device's untagged segment size, which get and put fit their chunks to. */
  get mss(): number {
    return this.#qp.mss;
  }

  /**
   * Authenticate the connection with the negotiated key and register the sinks and write
   * buffers `pipeline` asks for once the limits are known.
   */
  async authenticate(neg: Negotiated, timeoutMs: number, pipeline: (l: NegotiatedLimits) => { sinks: number; writeBuffers: number }): Promise<void> {
    const ready = new Promise<NegotiatedLimits>((resolve, reject) => {
      this.#onReady = resolve;
      this.#onFail = reject;
    });
    const timer = setTimeout(() => this.fail(new FileError(LocalCode.Timeout, `the server did not authenticate the connection within ${timeoutMs} ms`)), timeoutMs);
    this.#watchPipe();
    void this.#cqLoop();
    this.#core.start({ resumeKey: neg.resumeKey, keyId: neg.keyId, kAuth: neg.kAuth, nonce: new Uint8Array(randomBytes(16)), statusAddr: this.#status.addr, statusRkey: this.#status.rkey });
    this.#run();
    try {
      const limits = await ready;
      this.limits = limits;
      const { sinks, writeBuffers: bufs } = pipeline(limits);
      this.#sinkBytes = sinks * limits.maxReadWriteSize;
      this.#dataBytes = bufs * limits.maxWriteSize;
      this.sinkPool = new LeasePool(sinks);
      this.dataPool = new LeasePool(bufs);
    } catch (e) {
      await this.end().catch(() => {});
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  #onReady: (l: NegotiatedLimits) => void = () => {};
  #onFail: (e: Error) => void = () => {};

  #watchPipe(): void {
    // The session lives as long as the pipe: the server gone (killed, closed) ends everything.
    this.#pipe.on('close', () => {
      if (!this.#closed) this.fail(new FileError(LocalCode.ConnectionLost, `the server ${this.server.host}:${this.server.port} closed the connection`));
    });
    this.#pipe.on('data', (b: Buffer) => {
      // After the handshake only answers to the negotiations of dedup channels.
      this.#pc.handleReceive(new Uint8Array(b.buffer, b.byteOffset, b.byteLength), performance.now());
      this.#pcFlush();
    });
  }

  #pcFlush(): void {
    for (let e = this.#pc.pollAction(); e; e = this.#pc.pollAction()) {
      if (e.kind === 'write') this.#pipe.write(e.bytes);
      else if (e.kind === 'error') {
        // A refusal answers the oldest negotiation (the server answers in order); a failed pipe all.
        const err = new FileError(statusCode(e.status), e.message, e.status);
        for (const w of e.fatal ? this.#negotiating.splice(0) : this.#negotiating.splice(0, 1)) w.reject(err);
      } else this.#negotiating.shift()?.resolve(e.result);
    }
  }

  /** A fresh single-use key of the session (one per dedup channel). */
  negotiate(): Promise<Negotiated> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<Negotiated>((resolve, reject) => {
      const t = setTimeout(() => reject(new FileError(LocalCode.Timeout, 'no NegotiateResponse')), this.timeoutMs);
      this.#negotiating.push({ resolve: (n) => (clearTimeout(t), resolve(n)), reject: (e) => (clearTimeout(t), reject(e)) });
      this.#pc.negotiate();
      this.#pcFlush();
    });
  }

  fail(e: FileError): void {
    if (this.failure) return;
    this.failure = e;
    this.#core.fail(e.code, e.message, e.status);
    this.#run();
    this.#onFail(e);
    for (const w of this.#waiting.values()) {
      clearTimeout(w.timer);
      w.reject(e);
    }
    this.#waiting.clear();
    this.sinkPool.fail(e);
    this.dataPool.fail(e);
  }

  /** The connection's completions, until end() closes the device; any other end fails the session. */
  #cqLoop(): Promise<void> {
    return driveCq(this.#cq, 128, {
      onBatch: (wcs) => {
        for (const wc of wcs) this.#onWc(wc);
      },
      onEnd: (e) => {
        if (!this.#closed) this.fail(new FileError(LocalCode.ConnectionLost, `the completion queue stopped: ${(e as Error).message}`, undefined, { cause: e }));
      },
    });
  }

  #onWc(wc: WorkCompletion): void {
    if (wc.status !== WcStatus.Success) {
      if (!this.#closed) this.fail(new FileError(LocalCode.ConnectionLost, `the RDMA connection failed (${wcStatusName(wc.status)})`));
      return;
    }
    if (wc.opcode === WcOpcode.Recv || wc.opcode === WcOpcode.RecvRdmaWithImm) {
      this.#currentRecv = Number(wc.wrId);
      const now = performance.now();
      if (wc.opcode === WcOpcode.Recv) {
        const at = this.#currentRecv * RECV_SIZE;
        this.#core.handleReceive(this.#recv.buffer.subarray(at, at + wc.byteLen), now);
      } else {
        const slot = wc.imm ?? -1;
        if (slot >= 0 && slot < this.#core.statusSlots) this.#core.handleStatusBlock(slot, copyBytes(this.#slot(slot)), true, now);
        else this.#core.handleReceive(new Uint8Array(0), now);
      }
      this.#run();
      this.#currentRecv = -1;
      return;
    }
    if (typeof wc.wrId === 'number' && wc.wrId >= DATA_WR) {
      const b = this.#dataBySend.get(wc.wrId);
      this.#dataBySend.delete(wc.wrId);
      if (b !== undefined) this.dataPool.release(b);
    }
  }

  /** A polled block is read exactly once: the slot is cleared as it is handed over (its grant counts once). */
  #consumeBlock(slot: number, b: Uint8Array): void {
    const copy = copyBytes(b);
    b.fill(0);
    this.#core.handleStatusBlock(slot, copy, false, performance.now());
  }

  #slot(slot: number): Uint8Array {
    return this.#status.buffer.subarray(slot * FILE_SLOT_BYTES, slot * FILE_SLOT_BYTES + STATUS_BLOCK_LEN);
  }

  #run(): void {
    for (let a = this.#core.pollAction(); a; a = this.#core.pollAction()) this.#act(a);
  }

  #act(a: ClientAction): void {
    switch (a.kind) {
      case 'send':
        return this.#post(a);
      case 'repost': {
        const i = this.#currentRecv;
        if (i >= 0 && !this.#closed) this.#qp.postRecv({ wrId: i, sgList: [{ addr: this.#recv.addr + i * RECV_SIZE, length: RECV_SIZE, lkey: this.#recv.lkey }] });
        return;
      }
      case 'check': {
        const b = this.#slot(a.slot);
        if (sealOf(b) === a.id) this.#consumeBlock(a.slot, b);
        else {
          // rc ordering says the block is there; if it is not, look again rather than wait forever.
          const w = this.#waiting.get(a.id);
          if (w) {
            w.asked = false;
            w.since = performance.now();
            this.#startPolling();
          }
        }
        return;
      }
      case 'complete': {
        const w = this.#waiting.get(a.id);
        this.#waiting.delete(a.id);
        if (!w) return;
        clearTimeout(w.timer);
        // Overdue and cancelled: the deadline is what the caller hears. Any other answer is
        // what the server did after all (a write that happened must not read as not done).
        if (w.overdue && a.status === FileStatus.Cancelled) w.reject(new FileError(LocalCode.Timeout, w.overdue));
        else w.resolve(a);
        return;
      }
      case 'reject': {
        const w = this.#waiting.get(a.id);
        this.#waiting.delete(a.id);
        if (!w) return;
        clearTimeout(w.timer);
        w.reject(new FileError(a.code, `${w.what}: ${a.message}`));
        return;
      }
      case 'ready':
        return this.#onReady(a.limits);
      case 'failed': {
        const e = new FileError(a.code, a.message, a.status);
        if (!this.failure) this.fail(e);
        return;
      }
    }
  }

  #post(a: Extract<ClientAction, { kind: 'send' }>): void {
    if (this.#closed) return;
    try {
      if (a.slot !== undefined) this.#slot(a.slot).fill(0);
      const data = a.data as { buf: number; length: number } | undefined;
      if (!data && a.bytes.length <= MAX_INLINE) {
        this.#scratch.buffer.set(a.bytes);
        this.#qp.postSend({ wrId: 0, opcode: Opcode.Send, sgList: [{ addr: this.#scratch.addr, length: a.bytes.length, lkey: this.#scratch.lkey }], signaled: false });
        return;
      }
      const at = a.slot! * HDR_AREA;
      this.#hdrs.buffer.set(a.bytes, at);
      const sg = [{ addr: this.#hdrs.addr + at, length: a.bytes.length, lkey: this.#hdrs.lkey }];
      if (data) {
        const wrId = DATA_WR + a.id!;
        this.#dataBySend.set(wrId, data.buf);
        sg.push({ addr: this.data!.addr + data.buf * this.limits.maxWriteSize, length: data.length, lkey: this.data!.lkey });
        this.#qp.postSend({ wrId, opcode: Opcode.Send, sgList: sg, signaled: true });
      } else this.#qp.postSend({ wrId: 0, opcode: Opcode.Send, sgList: sg, signaled: false });
    } catch (e) {
      this.fail(new FileError(LocalCode.ConnectionLost, `cannot post to the RDMA connection: ${(e as Error).message}`, undefined, { cause: e }));
    }
  }

  check(): void {
    if (this.failure) throw this.failure;
    if (this.#closed) throw new FileError(LocalCode.Closed, 'the client is closed');
  }

  /** Send `body`; resolves with the completion (a status other than Success included). */
  request(body: Body, what: string, o: RequestOptions = {}): Promise<Completion> {
    this.check();
    const poll = (o.mode ?? this.#opts.mode ?? 'interrupt') === 'poll';
    if (o.signal?.aborted) return Promise.reject(FileError.of(FileStatus.Cancelled, what));
    return new Promise((resolve, reject) => {
      const id = this.#core.request(body, { interrupt: !poll, ...(o.collapse ? { collapse: true } : {}), ...(o.data ? { data: o.data } : {}) });
      const w: Waiting = { resolve, reject, what, poll, since: performance.now(), asked: false };
      this.#waiting.set(id, w);
      const limit = this.#opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
      // Above setTimeout's range (2^31 − 1 ms, 24.8 days) it would fire at once: none.
      if (limit > 0 && limit <= 0x7fff_ffff) w.timer = setTimeout(() => this.#overdue(id, w, limit), limit);
      if (o.signal) {
        const onAbort = (): void => {
          this.#core.cancel(id);
          this.#run();
        };
        o.signal.addEventListener('abort', onAbort, { once: true });
        const done = w.resolve;
        const failed = w.reject;
        w.resolve = (d) => {
          o.signal!.removeEventListener('abort', onAbort);
          done(d);
        };
        w.reject = (e) => {
          o.signal!.removeEventListener('abort', onAbort);
          failed(e);
        };
      }
      this.#run();
      if (poll) this.#startPolling();
    });
  }

  /**
   * Request `id` had no answer within `limit` ms. Cancel it, and let the server say so: until it
   * answers, its slot and its sink stay the server's (a read's data may still land there, and a
   * later request must not find it). A server that answers neither within the grace is not
   * serving: the session fails with ERR_FILE_TIMEOUT, every request with it, and a late answer
   * finds the core closed.
   */
  #overdue(id: number, w: Waiting, limit: number): void {
    if (this.#waiting.get(id) !== w) return;
    w.overdue = `${w.what}: no answer from the server within ${limit} ms`;
    const grace = Math.min(limit, CANCEL_GRACE_MS);
    w.timer = setTimeout(() => {
      if (this.#waiting.get(id) === w) this.fail(new FileError(LocalCode.Timeout, `${w.overdue}, nor to its Cancel within ${grace} ms: the session is given up`));
    }, grace);
    this.#core.cancel(id);
    this.#run();
  }

  /** Polling completions: look at the slots every turn of the event loop; ask for an interrupt after spinMs. */
  #startPolling(): void {
    if (this.#polling) return;
    this.#polling = true;
    const spin = this.#opts.spinMs ?? 2;
    const turn = (): void => {
      if (this.#closed || this.failure) {
        this.#polling = false;
        return;
      }
      let spinning = 0;
      const now = performance.now();
      for (const { slot, id } of this.#core.pollingSlots()) {
        const b = this.#slot(slot);
        if (sealOf(b) === id) {
          this.#consumeBlock(slot, b);
          continue;
        }
        const w = this.#waiting.get(id);
        if (w && !w.asked && now - w.since > spin) {
          // Tired of looking: the server will say it by Send (a receive completion wakes us).
          w.asked = true;
          this.#core.interruptRequest(id);
        }
        if (w && !w.asked) spinning++;
      }
      this.#run();
      if (spinning > 0) setImmediate(turn);
      else this.#polling = false;
    };
    setImmediate(turn);
  }


  stats(): ClientConnection['counters'] & { outstanding: number; credits: number } {
    return { ...this.#core.counters, outstanding: this.#core.outstanding, credits: this.#core.credits.send };
  }

  /** Close the RDMA connection and the pipe (the server frees the session). */
  end(): Promise<void> {
    return this.#life.close(() => this.#end());
  }

  async #end(): Promise<void> {
    this.fail(this.#life.closedError() as FileError);
    this.#pipe.destroy();
    try {
      this.#qp.destroy();
    } catch {
      // with the device
    }
    await this.dev.close();
    this.#life.end();
  }
}
