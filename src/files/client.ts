// The file client: the I/O shell around PipeClient (./pipe.ts) and ClientConnection
// (./client-core.ts). It opens the control pipe, proves the token, obtains the resume key,
// negotiates a provider, connects an rc QP over it with sabre's cm, authenticates that connection
// with the negotiated key, and then runs requests: reads answered by the server's RDMA Writes
// into registered sinks here, writes carried by Sends from registered buffers here.
//
//   const c = await FileClient.connect('10.0.0.5:7000', { token, transport: 'udp' });
//   const f = await c.open('data/x.bin');                 // { id, size }
//   const bytes = await c.read(f, 0, 4096);
//   await c.close(f); await c.end();
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import { promisify } from 'node:util';
// The verbs and cm API (what src/index.ts exports), from their modules: the file service sits above cm and verbs.
import { connect } from '../cm/index.js';
import type { DeviceAddress } from '../core/address.js';
import { Access, Opcode, WcOpcode, WcStatus, wcStatusName } from '../core/enums.js';
import type { WorkCompletion } from '../core/work.js';
import type { CompletionQueue } from '../verbs/cq.js';
import { type Device, openDevice } from '../verbs/device.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { QueuePair } from '../verbs/qp.js';
import { FILE_SERVICE, FILE_SLOT_BYTES, FileAccess, FileOp, FileProvider, FileStatus } from '../wire/spec.js';
import { type ClientAction, ClientConnection, type NegotiatedLimits, sealOf } from './client-core.js';
import { RESERVE } from './credits.js';
import { type DirEntry, decodeDirEntries } from './dirents.js';
import { type Body, HDR_LEN, STATUS_BLOCK_LEN, bodyLength } from './messages.js';
import { type Negotiated, PipeClient } from './pipe.js';
import { dedupGet, dedupPut, type DedupTransferStats } from './dedup.js';
import { LeasePool } from './pool.js';
import type { Provider } from './server.js';
import { checkData, checkFile, checkPieces, checkPosition, checkReadLength, refused } from './client-args.js';
import { FileError, LocalCode, statusCode } from './status.js';

const fsRead = promisify(fs.read);
const fsWrite = promisify(fs.write);

export interface ConnectOptions {
  /** The server's token (never sent: the pipe proves it). */
  token: string;
  /** Providers in order of preference. Default ['udp', 'tcp']. */
  transport?: Provider | Provider[];
  /** Whole connect deadline (ms). Default 10 000. */
  timeoutMs?: number;
  /**
   * Credits the server may hold (our receives for its messages: each interrupt-mode completion
   * spends one). Default 16: as many as the requests a server lets us have outstanding (its
   * default credits, on every provider).
   */
  credits?: number;
  /** Status slots: the most requests outstanding at once. Default 64. */
  statusSlots?: number;
  /**
   * Registered read sinks of maxReadWriteSize each: the reads a get keeps in flight. Default 16
   * (udp; its acknowledgements are slower to come back than tcp's, so more must be in flight to
   * keep the wire busy), 8 (tcp, inproc).
   */
  sinks?: number;
  /** Registered write buffers of maxWriteSize each: the writes a put keeps in flight. Default 16 (udp), 8 (tcp, inproc). */
  writeBuffers?: number;
  /** Default completion mode of requests. Default 'interrupt'. */
  mode?: 'interrupt' | 'poll';
  /** Polling: look at a slot for this long before asking for an InterruptResponse (ms). Default 2. */
  spinMs?: number;
  /** Reach the server's RDMA device here instead of (pipe host, negotiated port): a relay, a forwarded port. */
  via?: { host: string; port: number };
  /** udp device options (openDevice's). */
  mtu?: number;
  workers?: number;
  /** Cut get/put/read/write at whole segments of the device's mss (fitToSegments). Default true; false: at the negotiated maxima. */
  segmentFit?: boolean;
  /** The integrity check of the client's device (openDevice's): udp 'xxh3' (default), 'crc32c', 'none'; tcp 'crc32c' (default), 'none' ('xxh3' leaves it at its default). */
  integrity?: 'crc32c' | 'xxh3' | 'none';
}

/** Pipeline depths by provider (ConnectOptions.sinks / writeBuffers / credits when not given). */
const PIPELINE_DEFAULTS: Record<Provider, { sinks: number; writeBuffers: number; credits: number }> = {
  udp: { sinks: 16, writeBuffers: 16, credits: 16 },
  tcp: { sinks: 8, writeBuffers: 8, credits: 16 },
  inproc: { sinks: 8, writeBuffers: 8, credits: 16 },
};

/** Bytes before the data in a Write's Send (header and body). */
const WRITE_HDR = HDR_LEN + bodyLength({ op: FileOp.Write, fileId: 0, offset: 0, length: 0, dataOff: 0 });

/**
 * The largest size ≤ `max` whose message (`hdr` bytes, then the data) fills whole segments of
 * `mss`: a message of k·mss + a little goes as k full datagrams and one nearly empty one (the
 * transport does not re-cut segments), so a transfer cut at the fitted size sends ~6% fewer
 * datagrams for 1 MiB reads at a 64 KB mss, and 20% fewer for 256 KiB writes. `max` when no
 * whole segment fits.
 */
export function fitToSegments(max: number, hdr: number, mss: number): number {
  const k = Math.floor((max + hdr) / mss);
  return k >= 1 && k * mss - hdr > 0 ? k * mss - hdr : max;
}

export interface OpenOptions {
  /** 'r' (default), 'r+', 'w' (create or truncate in place), 'wx' (create, fail if it exists), 'replace' (write a temporary file, renamed into place on close). */
  flags?: 'r' | 'r+' | 'w' | 'wx' | 'replace';
  mode?: number;
  /** With 'replace': fsync before the rename. */
  fsync?: boolean;
}

export interface RemoteFile {
  readonly id: number;
  readonly path: string;
  /** Size when opened. */
  readonly size: number;
}

export interface OpOptions {
  signal?: AbortSignal;
  mode?: 'interrupt' | 'poll';
}

export interface TransferResult {
  bytes: number;
  seconds: number;
  transport: Provider;
  /** put/get with { dedup: true }: the basis and what crossed the wire. */
  dedup?: DedupTransferStats;
}

const MAX_INLINE = 512;
const RECV_SIZE = 128;
/** A request's header area: the largest request (a RegisterFile with a 4096-byte path) fits. */
const HDR_AREA = 4224;
const DATA_WR = 0x1_0000_0000;

const FLAG_BITS: Record<NonNullable<OpenOptions['flags']>, number> = {
  r: FileAccess.Read,
  'r+': FileAccess.Read | FileAccess.Write,
  w: FileAccess.Write | FileAccess.Create | FileAccess.Truncate,
  wx: FileAccess.Write | FileAccess.Create | FileAccess.Exclusive,
  replace: FileAccess.Write | FileAccess.Create | FileAccess.Replace,
};

interface Waiting {
  resolve: (d: { status: number; value: number; aux: number }) => void;
  reject: (e: Error) => void;
  what: string;
  poll: boolean;
  since: number;
  asked: boolean;
}

function parseTarget(t: string | { host: string; port: number }): { host: string; port: number } {
  if (typeof t !== 'string') return t;
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(t);
  if (!m) throw new FileError('ERR_FILE_INVALID_PARAMETER', `expected HOST:PORT, got '${t}'`);
  return { host: m[1]!, port: Number(m[2]) };
}

export class FileClient {
  readonly transport: Provider;
  readonly limits: NegotiatedLimits;
  readonly server: { host: string; port: number };
  readonly #dev: Device;
  readonly #pipe: net.Socket;
  readonly #qp: QueuePair;
  readonly #cq: CompletionQueue;
  readonly #core: ClientConnection;
  readonly #status: MemoryRegion;
  readonly #recv: MemoryRegion;
  readonly #hdrs: MemoryRegion;
  readonly #scratch: MemoryRegion;
  #sinks: MemoryRegion | undefined;
  #data: MemoryRegion | undefined;
  #sinkPool: LeasePool;
  #dataPool: LeasePool;
  readonly #opts: ConnectOptions;
  readonly #waiting = new Map<number, Waiting>();
  #failure: FileError | undefined;
  #closed = false;
  #polling = false;
  #currentRecv = -1;
  readonly #dataBySend = new Map<number, number>();
  /** The pipe's state machine, kept for negotiating the keys of dedup channels. */
  readonly #pc: PipeClient;
  /** Where the server's RDMA device was reached. */
  readonly #address: DeviceAddress;
  #negotiating: Array<{ resolve: (n: Negotiated) => void; reject: (e: Error) => void }> = [];

  private constructor(o: {
    transport: Provider; limits: NegotiatedLimits; server: { host: string; port: number }; dev: Device; pipe: net.Socket; qp: QueuePair; cq: CompletionQueue;
    core: ClientConnection; status: MemoryRegion; recv: MemoryRegion; hdrs: MemoryRegion; scratch: MemoryRegion; opts: ConnectOptions;
    pc: PipeClient; address: DeviceAddress;
  }) {
    this.#pc = o.pc;
    this.#address = o.address;
    this.transport = o.transport;
    this.limits = o.limits;
    this.server = o.server;
    this.#dev = o.dev;
    this.#pipe = o.pipe;
    this.#qp = o.qp;
    this.#cq = o.cq;
    this.#core = o.core;
    this.#status = o.status;
    this.#recv = o.recv;
    this.#hdrs = o.hdrs;
    this.#scratch = o.scratch;
    this.#opts = o.opts;
    this.#sinkPool = new LeasePool(0);
    this.#dataPool = new LeasePool(0);
  }

  /**
   * Connect to the file server at `target` ('host:port' of its control pipe): prove the token,
   * negotiate a provider, connect and authenticate the RDMA connection.
   */
  static async connect(target: string | { host: string; port: number }, opts: ConnectOptions): Promise<FileClient> {
    if (!opts || typeof opts.token !== 'string' || opts.token.length === 0) throw new FileError('ERR_FILE_INVALID_PARAMETER', 'connect needs { token }');
    const server = parseTarget(target);
    const prefs = ([] as Provider[]).concat(opts.transport ?? ['udp', 'tcp']);
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const deadline = Date.now() + timeoutMs;
    const left = (): number => Math.max(1, deadline - Date.now());
    let providers = 0;
    for (const p of prefs) providers |= FileProvider[p];

    // 1. The control pipe: token proof, resume key, negotiate.
    const pipe = net.connect({ host: server.host, port: server.port, noDelay: true });
    const pc = new PipeClient({ token: opts.token, providers, random: (n) => new Uint8Array(randomBytes(n)) });
    let neg: Negotiated;
    try {
      neg = await new Promise<Negotiated>((resolve, reject) => {
        const t = setTimeout(() => reject(new FileError(LocalCode.Timeout, `no answer from ${server.host}:${server.port} within ${timeoutMs} ms`)), left());
        const flush = (): void => {
          for (const e of pc.take()) {
            if (e.t === 'write') pipe.write(e.bytes);
            else if (e.t === 'error') {
              clearTimeout(t);
              reject(new FileError(statusCode(e.status), e.message, e.status));
            } else {
              clearTimeout(t);
              resolve(e.result);
            }
          }
        };
        pipe.on('connect', flush);
        pipe.on('data', (b: Buffer) => {
          pc.receive(new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
          flush();
        });
        pipe.once('error', (e: NodeJS.ErrnoException) => {
          clearTimeout(t);
          reject(new FileError(LocalCode.ConnectionLost, `cannot reach ${server.host}:${server.port}: ${e.code ?? e.message}`, undefined, { cause: e }));
        });
        pipe.once('close', () => {
          clearTimeout(t);
          reject(new FileError(LocalCode.ConnectionLost, `${server.host}:${server.port} closed the connection during the handshake`));
        });
      });
    } catch (e) {
      pipe.destroy();
      throw e;
    }
    pipe.removeAllListeners('data');
    pipe.removeAllListeners('connect');
    pipe.removeAllListeners('close');
    pipe.removeAllListeners('error');
    pipe.on('error', () => {});

    // 2. The RDMA connection over the first provider of ours the server has.
    const transport = prefs.find((p) => neg.providers & FileProvider[p])!;
    const localHost = (pipe.localAddress ?? '127.0.0.1').replace(/^::ffff:/, '');
    let dev: Device | undefined;
    try {
      dev = transport === 'inproc' ? await openDevice({ transport: 'inproc' })
        : await openDevice({
          transport, host: localHost, port: 0, ...(opts.mtu ? { mtu: opts.mtu } : {}), ...(opts.workers ? { workers: opts.workers } : {}),
          // tcp has MPA's CRC or nothing: 'xxh3' leaves it at its default.
          ...(opts.integrity && !(transport === 'tcp' && opts.integrity === 'xxh3') ? { integrity: opts.integrity } : {}),
        });
      const address: DeviceAddress = transport === 'inproc' ? { transport: 'inproc', id: neg.inprocId }
        : { transport, host: opts.via?.host ?? server.host, port: opts.via?.port ?? (transport === 'udp' ? neg.udpPort : neg.tcpPort) };
      const credits = opts.credits ?? PIPELINE_DEFAULTS[transport].credits;
      const statusSlots = opts.statusSlots ?? 64;
      const pd = dev.allocPd();
      const status = pd.regMr(statusSlots * FILE_SLOT_BYTES, Access.LocalWrite | Access.RemoteWrite);
      const recv = pd.regMr((credits + RESERVE) * RECV_SIZE, Access.LocalWrite);
      const hdrs = pd.regMr(statusSlots * HDR_AREA, Access.LocalWrite);
      const scratch = pd.regMr(MAX_INLINE, Access.LocalWrite);
      const cq = dev.createCq({ depth: 2 * (statusSlots + credits) + 64 });
      const qp = await connect(dev, address, {
        pd, service: FILE_SERVICE, timeoutMs: left(),
        qpInit: { sendCq: cq, recvCq: cq, maxSendWr: statusSlots + credits + 16, maxRecvWr: credits + RESERVE + 1, maxSge: 2, maxInline: MAX_INLINE, timeoutMs: 8000 },
        setup: (q) => {
          for (let i = 0; i < credits + RESERVE; i++) q.postRecv({ wrId: i, sgList: [{ addr: recv.addr + i * RECV_SIZE, length: RECV_SIZE, lkey: recv.lkey }] });
        },
      }).catch((e: Error) => {
        throw new FileError(LocalCode.ConnectionLost, `cannot connect the ${transport} RDMA connection to ${JSON.stringify(address)}: ${e.message}`, undefined, { cause: e });
      });
      const core = new ClientConnection({ credits, statusSlots, receiveSize: RECV_SIZE });
      // 3. Authenticate the connection with the negotiated key; wait for the status response.
      const c = new FileClient({
        transport, limits: undefined as unknown as NegotiatedLimits, server, dev, pipe, qp, cq, core, status, recv, hdrs, scratch, opts, pc, address,
      });
      await c.#authenticate(neg, left());
      return c;
    } catch (e) {
      pipe.destroy();
      await dev?.close().catch(() => {});
      throw e;
    }
  }

  async #authenticate(neg: Negotiated, timeoutMs: number): Promise<void> {
    const ready = new Promise<NegotiatedLimits>((resolve, reject) => {
      this.#onReady = resolve;
      this.#onFail = reject;
    });
    const timer = setTimeout(() => this.#fail(new FileError(LocalCode.Timeout, `the server did not authenticate the connection within ${timeoutMs} ms`)), timeoutMs);
    this.#watchPipe();
    void this.#cqLoop();
    this.#core.start({ resumeKey: neg.resumeKey, keyId: neg.keyId, kAuth: neg.kAuth, nonce: new Uint8Array(randomBytes(16)), statusAddr: this.#status.addr, statusRkey: this.#status.rkey });
    this.#run();
    try {
      const limits = await ready;
      (this as { limits: NegotiatedLimits }).limits = limits;
      const pd = this.#status.pd;
      const { sinks, writeBuffers: bufs } = this.pipeline;
      this.#sinks = pd.regMr(sinks * limits.maxReadWriteSize, Access.LocalWrite | Access.RemoteWrite);
      this.#data = pd.regMr(bufs * limits.maxWriteSize, Access.LocalWrite);
      this.#sinkPool = new LeasePool(sinks);
      this.#dataPool = new LeasePool(bufs);
    } catch (e) {
      await this.end().catch(() => {});
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  #onReady: (l: NegotiatedLimits) => void = () => {};
  #onFail: (e: Error) => void = () => {};

  /**
   * The pipeline of get and put: `sinks` reads and `writeBuffers` writes in flight, cut at
   * `readChunk` / `writeChunk` bytes (the negotiated maxima fitted to the device's segment size).
   */
  get pipeline(): { sinks: number; writeBuffers: number; readChunk: number; writeChunk: number } {
    const d = PIPELINE_DEFAULTS[this.transport];
    // Without fitting, a segment as large as the maxima leaves them as they are.
    const mss = this.#opts.segmentFit === false ? 0x7fff_ffff : this.#qp.mss;
    const l = this.limits as NegotiatedLimits | undefined;
    return {
      sinks: this.#opts.sinks ?? d.sinks, writeBuffers: this.#opts.writeBuffers ?? d.writeBuffers,
      readChunk: l ? fitToSegments(l.maxReadWriteSize, 0, mss) : 0, writeChunk: l ? fitToSegments(l.maxWriteSize, WRITE_HDR, mss) : 0,
    };
  }

  #watchPipe(): void {
    // The session lives as long as the pipe: the server gone (killed, closed) ends everything.
    this.#pipe.on('close', () => {
      if (!this.#closed) this.#fail(new FileError(LocalCode.ConnectionLost, `the server ${this.server.host}:${this.server.port} closed the connection`));
    });
    this.#pipe.on('data', (b: Buffer) => {
      // After the handshake only answers to the negotiations of dedup channels.
      this.#pc.receive(new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
      this.#pcFlush();
    });
  }

  #pcFlush(): void {
    for (const e of this.#pc.take()) {
      if (e.t === 'write') this.#pipe.write(e.bytes);
      else if (e.t === 'error') {
        for (const w of this.#negotiating.splice(0)) w.reject(new FileError(statusCode(e.status), e.message, e.status));
      } else this.#negotiating.shift()?.resolve(e.result);
    }
  }

  /** A fresh single-use key of the session (one per dedup channel). */
  #negotiate(): Promise<Negotiated> {
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise<Negotiated>((resolve, reject) => {
      const t = setTimeout(() => reject(new FileError(LocalCode.Timeout, 'no NegotiateResponse')), this.#opts.timeoutMs ?? 10_000);
      this.#negotiating.push({ resolve: (n) => (clearTimeout(t), resolve(n)), reject: (e) => (clearTimeout(t), reject(e)) });
      this.#pc.negotiate();
      this.#pcFlush();
    });
  }

  #dedupSide() {
    return { dev: this.#dev, address: this.#address, negotiate: () => this.#negotiate(), timeoutMs: this.#opts.timeoutMs ?? 10_000 };
  }

  #fail(e: FileError): void {
    if (this.#failure) return;
    this.#failure = e;
    this.#core.fail(e.code, e.message, e.status);
    this.#run();
    this.#onFail(e);
    for (const w of this.#waiting.values()) w.reject(e);
    this.#waiting.clear();
    this.#sinkPool.fail(e);
    this.#dataPool.fail(e);
  }

  async #cqLoop(): Promise<void> {
    for (;;) {
      try {
        await this.#cq.wait();
      } catch {
        return;
      }
      for (;;) {
        const wcs = this.#cq.poll(128);
        if (wcs.length === 0) break;
        for (const wc of wcs) this.#onWc(wc);
      }
    }
  }

  #onWc(wc: WorkCompletion): void {
    if (wc.status !== WcStatus.Success) {
      if (!this.#closed) this.#fail(new FileError(LocalCode.ConnectionLost, `the RDMA connection failed (${wcStatusName(wc.status)})`));
      return;
    }
    if (wc.opcode === WcOpcode.Recv || wc.opcode === WcOpcode.RecvRdmaWithImm) {
      this.#currentRecv = Number(wc.wrId);
      if (wc.opcode === WcOpcode.Recv) {
        const at = this.#currentRecv * RECV_SIZE;
        this.#core.receive(this.#recv.buffer.subarray(at, at + wc.byteLen));
      } else {
        const slot = wc.imm ?? -1;
        if (slot >= 0 && slot < this.#core.statusSlots) this.#core.statusBlock(slot, this.#slot(slot).slice(), true);
        else this.#core.receive(new Uint8Array(0));
      }
      this.#run();
      this.#currentRecv = -1;
      return;
    }
    if (typeof wc.wrId === 'number' && wc.wrId >= DATA_WR) {
      const b = this.#dataBySend.get(wc.wrId);
      this.#dataBySend.delete(wc.wrId);
      if (b !== undefined) this.#dataPool.release(b);
    }
  }

  /** A polled block is read exactly once: the slot is cleared as it is handed over (its grant counts once). */
  #consumeBlock(slot: number, b: Uint8Array): void {
    const copy = b.slice();
    b.fill(0);
    this.#core.statusBlock(slot, copy, false);
  }

  #slot(slot: number): Uint8Array {
    return this.#status.buffer.subarray(slot * FILE_SLOT_BYTES, slot * FILE_SLOT_BYTES + STATUS_BLOCK_LEN);
  }

  #run(): void {
    for (;;) {
      const acts = this.#core.take();
      if (acts.length === 0) return;
      for (const a of acts) this.#act(a);
    }
  }

  #act(a: ClientAction): void {
    switch (a.t) {
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
        w?.resolve(a);
        return;
      }
      case 'ready':
        return this.#onReady(a.limits);
      case 'failed': {
        const e = new FileError(a.code, a.message, a.status);
        if (!this.#failure) this.#fail(e);
        return;
      }
    }
  }

  #post(a: Extract<ClientAction, { t: 'send' }>): void {
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
        sg.push({ addr: this.#data!.addr + data.buf * this.limits.maxWriteSize, length: data.length, lkey: this.#data!.lkey });
        this.#qp.postSend({ wrId, opcode: Opcode.Send, sgList: sg, signaled: true });
      } else this.#qp.postSend({ wrId: 0, opcode: Opcode.Send, sgList: sg, signaled: false });
    } catch (e) {
      this.#fail(new FileError(LocalCode.ConnectionLost, `cannot post to the RDMA connection: ${(e as Error).message}`, undefined, { cause: e }));
    }
  }

  // -------------------------------------------------------------------------------------------
  // Requests

  #check(): void {
    if (this.#failure) throw this.#failure;
    if (this.#closed) throw new FileError(LocalCode.Closed, 'the client is closed');
  }

  /** Send `body`; resolves with the completion (a status other than Success included). */
  #request(body: Body, what: string, o: OpOptions & { collapse?: boolean; data?: { buf: number; length: number } } = {}): Promise<{ status: number; value: number; aux: number }> {
    this.#check();
    const poll = (o.mode ?? this.#opts.mode ?? 'interrupt') === 'poll';
    if (o.signal?.aborted) return Promise.reject(FileError.of(FileStatus.Cancelled, what));
    return new Promise((resolve, reject) => {
      const id = this.#core.request(body, { interrupt: !poll, ...(o.collapse ? { collapse: true } : {}), ...(o.data ? { data: o.data } : {}) });
      const w: Waiting = { resolve, reject, what, poll, since: performance.now(), asked: false };
      this.#waiting.set(id, w);
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

  /** Polling completions: look at the slots every turn of the event loop; ask for an interrupt after spinMs. */
  #startPolling(): void {
    if (this.#polling) return;
    this.#polling = true;
    const spin = this.#opts.spinMs ?? 2;
    const turn = (): void => {
      if (this.#closed || this.#failure) {
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

  #ok(d: { status: number }, what: string): void {
    if (d.status !== FileStatus.Success) throw FileError.of(d.status, what);
  }

  /** Open (register) `path`, relative to the served directory. */
  async open(path: string, o: OpenOptions = {}): Promise<RemoteFile> {
    const flags = o.flags ?? 'r';
    let access = FLAG_BITS[flags];
    if (access === undefined) throw new FileError('ERR_FILE_INVALID_PARAMETER', `unknown open flags '${flags}'`);
    if (o.fsync) access |= FileAccess.Fsync;
    const d = await this.#request({ op: FileOp.RegisterFile, access, mode: o.mode ?? 0o644, path }, `open ${path}`);
    this.#ok(d, `open ${path}`);
    return Object.freeze({ id: d.aux, path, size: d.value });
  }

  /**
   * Close `f`; for a 'replace' open this is when the file appears under its name — or, with
   * `discard`, when its temporary is thrown away and the name left as it was.
   */
  async close(f: RemoteFile, o: { discard?: boolean } = {}): Promise<void> {
    checkFile(f, 'close');
    const d = await this.#request({ op: FileOp.Close, fileId: f.id, discard: o.discard ? 1 : 0 }, `close ${f.path}`);
    this.#ok(d, `close ${f.path}`);
  }

  /**
   * Cancel an operation this client started (the promise read / readv / write / writev / get /
   * put returned): its requests still waiting are dropped, those at the server are cancelled
   * there (a read in progress drops its data), and the promise rejects with
   * ERR_FILE_CANCELLED — or settles with its result if it was too late. False: not ours, or done.
   */
  cancel(op: Promise<unknown>): boolean {
    const ac = this.#controllers.get(op);
    if (!ac || ac.signal.aborted) return false;
    ac.abort();
    return true;
  }

  readonly #controllers = new WeakMap<Promise<unknown>, AbortController>();

  /** Run `fn` with a signal that aborts on the caller's signal or on cancel(promise). */
  #track<T>(o: { signal?: AbortSignal }, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const ac = new AbortController();
    // One listener per request in flight (a get keeps dozens): not a leak.
    setMaxListeners(0, ac.signal);
    const user = o.signal;
    if (user?.aborted) ac.abort();
    else if (user) {
      // One listener on the caller's signal however many operations share it.
      let set = this.#bySignal.get(user);
      if (!set) {
        const s = new Set<AbortController>();
        set = s;
        this.#bySignal.set(user, s);
        user.addEventListener('abort', () => {
          for (const x of s) x.abort();
        }, { once: true });
      }
      set.add(ac);
    }
    const p = fn(ac.signal);
    this.#controllers.set(p, ac);
    const done = (): void => {
      this.#controllers.delete(p);
      if (user) this.#bySignal.get(user)?.delete(ac);
    };
    p.then(done, done);
    return p;
  }

  readonly #bySignal = new WeakMap<AbortSignal, Set<AbortController>>();

  /** Read up to `length` bytes at `position` (fewer at the end of the file). */
  read(f: RemoteFile, position: number, length: number, o: OpOptions = {}): Promise<Uint8Array> {
    const bad = refused(() => {
      checkFile(f, 'read');
      checkPosition(position, 'read');
      checkReadLength(position, length, 'read');
    });
    if (bad) return bad;
    return this.#track(o, (signal) => this.#read(f, position, length, { ...o, signal }));
  }

  async #read(f: RemoteFile, position: number, length: number, o: OpOptions): Promise<Uint8Array> {
    const out = new Uint8Array(length);
    const n = await this.readInto(f, position, out, o);
    return n === length ? out : out.slice(0, n);
  }

  /** Read into `target` from `position`; returns the bytes read. Large reads go as several requests. */
  async readInto(f: RemoteFile, position: number, target: Uint8Array, o: OpOptions = {}): Promise<number> {
    checkFile(f, 'readInto');
    checkPosition(position, 'readInto');
    checkData(position, target, 'readInto');
    this.#check();
    const max = this.pipeline.readChunk;
    const parts: Promise<number>[] = [];
    for (let at = 0; at < target.length; at += max) {
      const len = Math.min(max, target.length - at);
      parts.push(this.#readChunk(f, position + at, len, (view, n) => target.set(view.subarray(0, n), at), o));
    }
    let total = 0;
    for (const [i, n] of (await Promise.all(parts)).entries()) {
      total += n;
      if (n < Math.min(max, target.length - i * max)) break;
    }
    return total;
  }

  /** One read of at most maxReadWriteSize through a leased sink; `take` sees the sink before it is reused. */
  async #readChunk(f: RemoteFile, position: number, length: number, take: (view: Uint8Array, n: number) => void | Promise<void>, o: OpOptions): Promise<number> {
    const s = await this.#sinkPool.acquire();
    try {
      const max = this.limits.maxReadWriteSize;
      const d = await this.#request({ op: FileOp.Read, fileId: f.id, length, offset: position, sinkAddr: this.#sinks!.addr + s * max, sinkRkey: this.#sinks!.rkey }, `read ${f.path}`, o);
      this.#ok(d, `read ${f.path}`);
      await take(this.#sinks!.buffer.subarray(s * max, s * max + d.value), d.value);
      return d.value;
    } finally {
      this.#sinkPool.release(s);
    }
  }

  /**
   * Vectored read: one request, the server RDMA-writes each piece. `collapse` (default true):
   * the pieces land back to back in one sink run.
   */
  readv(f: RemoteFile, pieces: { position: number; length: number }[], o: OpOptions & { collapse?: boolean } = {}): Promise<Uint8Array[]> {
    const bad = refused(() => {
      checkFile(f, 'readv');
      checkPieces(pieces, 'readv');
      for (const p of pieces) {
        checkPosition(p?.position, 'readv');
        checkReadLength(p.position, p.length, 'readv');
      }
    });
    if (bad) return bad;
    return this.#track(o, (signal) => this.#readv(f, pieces, { ...o, signal }));
  }

  async #readv(f: RemoteFile, pieces: { position: number; length: number }[], o: OpOptions & { collapse?: boolean }): Promise<Uint8Array[]> {
    this.#check();
    const max = this.limits.maxReadWriteSize;
    const total = pieces.reduce((a, p) => a + p.length, 0);
    if (pieces.length === 0 || pieces.length > this.limits.maxVectors || total > max) {
      throw new FileError(statusCode(FileStatus.LimitExceeded), `readv of ${pieces.length} pieces, ${total} bytes exceeds the server's ${this.limits.maxVectors} pieces / ${max} bytes`, FileStatus.LimitExceeded);
    }
    const collapse = o.collapse ?? true;
    const s = await this.#sinkPool.acquire();
    try {
      const base = this.#sinks!.addr + s * max;
      let at = 0;
      const entries = pieces.map((p) => {
        const e = { offset: p.position, length: p.length, sinkAddr: collapse ? 0 : base + at };
        at += p.length;
        return e;
      });
      const d = await this.#request({ op: FileOp.ReadV, fileId: f.id, sinkAddr: collapse ? base : 0, sinkRkey: this.#sinks!.rkey, entries }, `readv ${f.path}`, { ...o, collapse });
      this.#ok(d, `readv ${f.path}`);
      if (d.value > total) throw new FileError(LocalCode.ProtocolError, `readv ${f.path}: the server reports ${d.value} bytes for ${total} asked`);
      const view = this.#sinks!.buffer.subarray(s * max, s * max + total);
      // The server reads the pieces in order and stops at the first short one (the end of the
      // file as it is now, not as it was at open): `value` bytes fill the pieces in order, and
      // the rest of the sink — whatever an earlier request left there — is never handed out.
      let off = 0;
      let left = d.value;
      return pieces.map((p) => {
        const n = Math.min(p.length, left);
        left -= n;
        const piece = view.slice(off, off + n);
        off += p.length;
        return piece;
      });
    } finally {
      this.#sinkPool.release(s);
    }
  }

  /** Write `data` at `position` (split into Sends of at most maxWriteSize); returns the bytes written. */
  write(f: RemoteFile, position: number, data: Uint8Array, o: OpOptions = {}): Promise<number> {
    const bad = refused(() => {
      checkFile(f, 'write');
      checkPosition(position, 'write');
      checkData(position, data, 'write');
    });
    if (bad) return bad;
    return this.#track(o, (signal) => this.#write(f, position, data, { ...o, signal }));
  }

  async #write(f: RemoteFile, position: number, data: Uint8Array, o: OpOptions): Promise<number> {
    this.#check();
    const max = this.pipeline.writeChunk;
    const parts: Promise<number>[] = [];
    for (let at = 0; at < data.length || (at === 0 && data.length === 0); at += max) {
      const piece = data.subarray(at, Math.min(data.length, at + max));
      parts.push(this.#writeChunk(f, position + at, piece.length, (view) => view.set(piece), o));
      if (data.length === 0) break;
    }
    return (await Promise.all(parts)).reduce((a, b) => a + b, 0);
  }

  async #writeChunk(f: RemoteFile, position: number, length: number, fill: (view: Uint8Array) => void | Promise<void>, o: OpOptions): Promise<number> {
    const b = await this.#dataPool.acquire();
    let sent = false;
    try {
      const max = this.limits.maxWriteSize;
      await fill(this.#data!.buffer.subarray(b * max, b * max + length));
      sent = true;
      // The buffer goes back to the pool when the Send completes (see #onWc).
      const d = await this.#request({ op: FileOp.Write, fileId: f.id, offset: position, length, dataOff: 0 }, `write ${f.path}`, { ...o, data: { buf: b, length } });
      this.#ok(d, `write ${f.path}`);
      return d.value;
    } finally {
      if (!sent) this.#dataPool.release(b);
    }
  }

  /** Vectored write: the pieces are gathered into one Send (the Collapse flag). */
  writev(f: RemoteFile, pieces: { position: number; data: Uint8Array }[], o: OpOptions = {}): Promise<number> {
    const bad = refused(() => {
      checkFile(f, 'writev');
      checkPieces(pieces, 'writev');
      for (const p of pieces) {
        checkPosition(p?.position, 'writev');
        checkData(p.position, p.data, 'writev');
      }
    });
    if (bad) return bad;
    return this.#track(o, (signal) => this.#writev(f, pieces, { ...o, signal }));
  }

  async #writev(f: RemoteFile, pieces: { position: number; data: Uint8Array }[], o: OpOptions): Promise<number> {
    this.#check();
    const total = pieces.reduce((a, p) => a + p.data.length, 0);
    if (pieces.length === 0 || pieces.length > this.limits.maxVectors || total > this.limits.maxWriteSize) {
      throw new FileError(statusCode(FileStatus.LimitExceeded), `writev of ${pieces.length} pieces, ${total} bytes exceeds the server's ${this.limits.maxVectors} pieces / ${this.limits.maxWriteSize} bytes`, FileStatus.LimitExceeded);
    }
    const b = await this.#dataPool.acquire();
    const max = this.limits.maxWriteSize;
    const view = this.#data!.buffer.subarray(b * max, b * max + total);
    let at = 0;
    for (const p of pieces) {
      view.set(p.data, at);
      at += p.data.length;
    }
    const d = await this.#request({ op: FileOp.WriteV, fileId: f.id, entries: pieces.map((p) => ({ offset: p.position, length: p.data.length })), dataOff: 0, dataLen: total },
      `writev ${f.path}`, { ...o, collapse: true, data: { buf: b, length: total } });
    this.#ok(d, `writev ${f.path}`);
    return d.value;
  }

  /** The entries of a directory (default: the served directory itself), all pages. */
  async list(path = '', o: OpOptions = {}): Promise<DirEntry[]> {
    this.#check();
    const out: DirEntry[] = [];
    let cookie = 0;
    const s = await this.#sinkPool.acquire();
    try {
      const max = this.limits.maxReadWriteSize;
      const len = Math.min(max, 256 * 1024);
      do {
        const d = await this.#request({ op: FileOp.List, cookie, sinkLength: len, sinkAddr: this.#sinks!.addr + s * max, sinkRkey: this.#sinks!.rkey, path }, `ls ${path || '/'}`, o);
        this.#ok(d, `ls ${path || '/'}`);
        const page = decodeDirEntries(this.#sinks!.buffer.subarray(s * max, s * max + d.value));
        if (typeof page === 'string') throw new FileError(LocalCode.ProtocolError, `ls ${path || '/'}: ${page}`);
        out.push(...page);
        cookie = d.aux;
      } while (cookie !== 0);
      return out;
    } finally {
      this.#sinkPool.release(s);
    }
  }

  /** Download `remote` into the local file `local` (written to `local`.part, renamed at the end). */
  get(remote: string, local: string, o: { onProgress?: (done: number, total: number) => void; signal?: AbortSignal; dedup?: boolean } = {}): Promise<TransferResult> {
    if (o.dedup) return this.#track(o, () => this.#getDedup(remote, local));
    return this.#track(o, (signal) => this.#get(remote, local, { ...o, signal }));
  }

  /**
   * get --dedup: the local file as it is now is the basis (rsync over RDMA): only the chunks of
   * the server's version it lacks cross the wire. Written to `local`.sabre-part, renamed at the end.
   */
  async #getDedup(remote: string, local: string): Promise<TransferResult> {
    const t0 = performance.now();
    const basis = await fs.promises.readFile(local).then((b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength), () => undefined);
    const r = await dedupGet(this.#dedupSide(), remote, basis).catch((e: Error & { status?: number }) => {
      throw e instanceof FileError ? e : new FileError(e.status !== undefined ? statusCode(e.status) : LocalCode.ProtocolError, `get --dedup ${remote}: ${e.message}`, e.status);
    });
    const tmp = `${local}.sabre-part`;
    await fs.promises.writeFile(tmp, r.bytes, { mode: 0o644 });
    await fs.promises.rename(tmp, local);
    return { bytes: r.bytes.length, seconds: (performance.now() - t0) / 1000, transport: this.transport, dedup: r.stats };
  }

  async #get(remote: string, local: string, o: { onProgress?: (done: number, total: number) => void; signal: AbortSignal }): Promise<TransferResult> {
    const t0 = performance.now();
    const f = await this.open(remote);
    const tmp = `${local}.sabre-part`;
    const fd = await promisify(fs.open)(tmp, 'w', 0o644);
    let ok = false;
    try {
      const { readChunk: max, sinks } = this.pipeline;
      let done = 0;
      const chunks: Promise<void>[] = [];
      let failed: unknown;
      for (let pos = 0; pos < f.size; pos += max) {
        const len = Math.min(max, f.size - pos);
        // Leases bound what is in flight: at most `sinks` reads at once.
        const p = this.#readChunk(f, pos, len, async (view, n) => {
          let w = 0;
          while (w < n) w += (await fsWrite(fd, view, w, n - w, pos + w)).bytesWritten;
          done += n;
          o.onProgress?.(done, f.size);
        }, { signal: o.signal }).then((n) => {
          if (n !== len) throw new FileError(LocalCode.ProtocolError, `get ${remote}: the file shrank while it was read`);
        }).catch((e) => {
          failed ??= e;
        });
        chunks.push(p);
        if (chunks.length >= sinks * 2) await chunks.shift();
        if (failed) break;
      }
      await Promise.all(chunks);
      if (failed) throw failed;
      await this.close(f);
      await promisify(fs.close)(fd);
      await fs.promises.rename(tmp, local);
      ok = true;
      return { bytes: f.size, seconds: (performance.now() - t0) / 1000, transport: this.transport };
    } finally {
      if (!ok) {
        await promisify(fs.close)(fd).catch(() => {});
        await fs.promises.unlink(tmp).catch(() => {});
        if (!this.#failure && !this.#closed) await this.close(f).catch(() => {});
      }
    }
  }

  /** Upload the local file `local` to `remote` (a Replace open: the name appears complete or not at all). */
  put(local: string, remote: string, o: { fsync?: boolean; onProgress?: (done: number, total: number) => void; signal?: AbortSignal; dedup?: boolean } = {}): Promise<TransferResult> {
    if (o.dedup) return this.#track(o, () => this.#putDedup(local, remote, o.fsync ?? false));
    return this.#track(o, (signal) => this.#put(local, remote, { ...o, signal }));
  }

  /** put --dedup: the server's current version of `remote` is the basis; it is replaced whole. */
  async #putDedup(local: string, remote: string, fsync: boolean): Promise<TransferResult> {
    const t0 = performance.now();
    const b = await fs.promises.readFile(local);
    const bytes = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    const stats = await dedupPut(this.#dedupSide(), bytes, remote, fsync).catch((e: Error & { status?: number }) => {
      throw e instanceof FileError ? e : new FileError(e.status !== undefined ? statusCode(e.status) : LocalCode.ProtocolError, `put --dedup ${remote}: ${e.message}`, e.status);
    });
    return { bytes: bytes.length, seconds: (performance.now() - t0) / 1000, transport: this.transport, dedup: stats };
  }

  async #put(local: string, remote: string, o: { fsync?: boolean; onProgress?: (done: number, total: number) => void; signal: AbortSignal }): Promise<TransferResult> {
    const t0 = performance.now();
    const fd = await promisify(fs.open)(local, 'r');
    try {
      const size = (await promisify(fs.fstat)(fd)).size;
      const f = await this.open(remote, { flags: 'replace', ...(o.fsync ? { fsync: true } : {}) });
      const { writeChunk: max, writeBuffers } = this.pipeline;
      let done = 0;
      let failed: unknown;
      const chunks: Promise<void>[] = [];
      for (let pos = 0; pos < size; pos += max) {
        const len = Math.min(max, size - pos);
        const p = this.#writeChunk(f, pos, len, async (view) => {
          let r = 0;
          while (r < len) {
            const n = (await fsRead(fd, view, r, len - r, pos + r)).bytesRead;
            if (n === 0) throw new FileError('ERR_FILE_IO_ERROR', `put ${local}: the file shrank while it was read`);
            r += n;
          }
        }, { signal: o.signal }).then((n) => {
          done += n;
          o.onProgress?.(done, size);
        }).catch((e) => {
          failed ??= e;
        });
        chunks.push(p);
        if (chunks.length >= writeBuffers * 2) await chunks.shift();
        if (failed) break;
      }
      await Promise.all(chunks);
      if (failed) {
        // Abandon the temporary: the name keeps whatever it had.
        if (!this.#failure) await this.close(f, { discard: true }).catch(() => {});
        throw failed;
      }
      await this.close(f);
      return { bytes: size, seconds: (performance.now() - t0) / 1000, transport: this.transport };
    } finally {
      await promisify(fs.close)(fd).catch(() => {});
    }
  }

  stats(): ClientConnection['counters'] & { outstanding: number; credits: number } {
    return { ...this.#core.counters, outstanding: this.#core.outstanding, credits: this.#core.credits.send };
  }

  /** Close the RDMA connection and the pipe (the server frees the session). */
  async end(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#fail(new FileError(LocalCode.Closed, 'the client is closed'));
    this.#pipe.destroy();
    try {
      this.#qp.destroy();
    } catch {
      // with the device
    }
    await this.#dev.close();
  }
}
