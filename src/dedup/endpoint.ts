// DedupSender / DedupReceiver: the shells around the transfer cores (./transfer.ts), over any
// reliable ordered message pipe plus an RDMA write path. This is the interface channels
// (`ch.send(bytes, { dedup: true })`) and the file service (`sabre put/get --dedup`) call: they
// bring a pipe (their own control messages) and a way to RDMA-WRITE from the sender's registered
// memory; everything about chunking, hashing, stores and slots stays in here.
//
//   const tx = new DedupSender({ pipe, rdma, mem });         const rx = new DedupReceiver({ pipe, mem, store, zone, scope });
//   const r = await tx.send(bytes);                           for await (const { bytes, stats } of rx) …
//
// src/dedup/qp-link.ts provides both halves over a connected rc QP (sends for the pipe, RDMA
// WRITE into the receiver's landing zone).
import { peerDeadline } from '../core/deadline.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { untilClosed } from '../core/lifecycle.js';
import { type HashAlgName, hashAlgName } from './hash.js';
import { ChunkHasher } from './hash.js';
import { DeviceChunker, type KernelRunner } from './chunker.js';
import { DeviceMemory } from '../dataplane/device-memory.js';
import type { DedupMemory } from './types.js';
import { dedupTotals, type DedupTotals } from './stats.js';
import type { Hello } from './messages.js';
import { DedupRecvCore, type DedupRecvOptions, DedupSendCore, type LandingZone, type RecvStats, type SendResult } from './transfer.js';

/** A reliable, ordered message pipe. */
export interface MessagePipe {
  /** Send one message (delivered whole, in order). */
  send(bytes: Uint8Array): void | Promise<void>;
  /** Register the handler of every message that arrives. */
  onMessage(handler: (bytes: Uint8Array) => void): void;
  /** Register the handler of the pipe's end (error when it broke). */
  onClose?(handler: (error?: Error) => void): void;
}

/** RDMA WRITE from the sender's device memory into the receiver's landing zone. */
export interface RdmaWritePath {
  /**
   * Copy `src` bytes of the object (already in device memory, as `stage` returned it) to the
   * remote pieces; resolve when every write has completed (placed at the receiver). `onPosted`
   * (only where `ordered`): called once every piece is posted.
   */
  write(pieces: ReadonlyArray<{ src: number; len: number; remoteAddr: number }>, rkey: number, onPosted?: () => void): Promise<void>;
  /**
   * Whether a message the pipe sends after a write's pieces are all posted is placed at the
   * receiver after them (writes and messages on one rc QP): then a ROUND goes right behind its
   * writes instead of waiting for their completions.
   */
  readonly ordered?: boolean;
  /** Drop the writes not posted yet (their promises reject): the transfer they were for is over. */
  cancel?(): void;
  /** Place `bytes` in registered device memory the writes can read from; returns the address. */
  stage(bytes: Uint8Array): number;
  /**
   * Registered device memory for an object of `length` bytes that the caller fills itself (the
   * writes read from it, like a stage): its address and a view of it. Without it a DedupSource
   * is read into a buffer first and staged.
   */
  reserve?(length: number): { addr: number; view: Uint8Array };
}

/**
 * An object the sender reads into its staging memory itself, a piece at a time, chunking each
 * piece as it is in (a file: no copy of it outside device memory, and the chunking starts with
 * the first piece instead of after the last).
 */
export interface DedupSource {
  readonly length: number;
  /** Read bytes of the object from offset `at` into `into` (at most its length); 0: there are no more. */
  read(into: Uint8Array, at: number): Promise<number>;
}

export const isDedupSource = (v: unknown): v is DedupSource =>
  !!v && typeof v === 'object' && !(v instanceof Uint8Array) && Number.isSafeInteger((v as DedupSource).length) && (v as DedupSource).length >= 0 && typeof (v as DedupSource).read === 'function';

/** Bytes of a DedupSource read per call (the chunking steps over each as it is in). */
const SOURCE_PIECE = 2 << 20;

export interface DedupSenderInit {
  pipe: MessagePipe;
  rdma: RdmaWritePath;
  mem: DedupMemory;
  /** OFFER pages in flight before their NEED. Default 4. */
  window?: number;
  /** Bytes chunked and hashed per step (each step's chunks are offered at once). Default 2 MiB. */
  step?: number;
  /**
   * Run the chunk + hash steps on this pool's thread (a KernelPool over the same device memory),
   * so the sender's thread keeps the transport going meanwhile. Default: on the caller's thread.
   */
  pool?: KernelRunner;
  /** The most bytes one pipe message may have: OFFER pages are cut to fit (DedupSendOptions.maxMessage). */
  maxMessage?: number;
}

export class DedupSender {
  readonly #core: DedupSendCore;
  readonly #pipe: MessagePipe;
  readonly #rdma: RdmaWritePath;
  readonly #mem: DedupMemory;
  readonly #totals: DedupTotals;
  readonly #step: number;
  readonly #pool: KernelRunner | undefined;
  #hello: Promise<Hello>;
  #helloResolve!: (h: Hello) => void;
  #helloReject!: (e: Error) => void;
  #pending: { resolve: (r: SendResult) => void; reject: (e: Error) => void } | undefined;
  #chunker: DeviceChunker | undefined;
  #hasher: ChunkHasher | undefined;
  #src = 0;
  #busy: Promise<unknown> = Promise.resolve();
  /** Sends queued or running (close() frees the chunker and hasher after them). */
  #running = 0;
  #error: Error | undefined;

  constructor(o: DedupSenderInit) {
    this.#core = new DedupSendCore({ ...(o.window !== undefined ? { window: o.window } : {}), ...(o.maxMessage !== undefined ? { maxMessage: o.maxMessage } : {}) });
    this.#pipe = o.pipe;
    this.#rdma = o.rdma;
    this.#mem = o.mem;
    this.#totals = dedupTotals(o.mem);
    this.#step = o.step ?? 2 << 20;
    this.#pool = o.pool;
    this.#hello = new Promise((resolve, reject) => {
      this.#helloResolve = resolve;
      this.#helloReject = reject;
    });
    this.#hello.catch(() => undefined);
    o.pipe.onMessage((b) => {
      this.#core.handleMessage(b, performance.now());
      this.#run();
      const h = this.#core.hello;
      if (h) this.#helloResolve(h);
      // A refused HELLO fails the send waiting for it and every later one (no transfer of
      // this pipe has parameters), rather than leaving them waiting for a HELLO that came.
      else if (this.#core.helloRefused) this.#broken(this.#core.helloRefused);
    });
    o.pipe.onClose?.((e) => this.#broken(new SabreError(ErrorCode.Closed, `dedup: the pipe closed${e ? `: ${e.message}` : ''}`)));
  }

  /** The receiver's parameters (resolves when its HELLO has arrived). */
  ready(): Promise<Hello> {
    return this.#hello;
  }

  /**
   * Send `bytes` (or what a DedupSource reads) to the receiver, moving only the chunks it lacks.
   * One transfer at a time (queued). A source's reads have all ended when this settles.
   */
  send(bytes: Uint8Array | DedupSource): Promise<SendResult> {
    if (!(bytes instanceof Uint8Array) && !isDedupSource(bytes)) return Promise.reject(new SabreError(ErrorCode.InvalidArgument, 'dedup send needs a Uint8Array'));
    this.#running++;
    const p = this.#busy.then(() => this.#send(bytes)).finally(() => this.#running--);
    this.#busy = p.catch(() => undefined);
    return p;
  }

  /**
   * Stage the object; `until(n)` resolves once its first n bytes are in device memory (rejects
   * if reading it failed), `stop()` once no read of it is in flight any more.
   */
  #stageObject(obj: Uint8Array | DedupSource): { until(n: number): Promise<void>; stop(): Promise<void> } {
    if (obj instanceof Uint8Array) {
      this.#src = this.#rdma.stage(obj);
      return { until: () => Promise.resolve(), stop: () => Promise.resolve() };
    }
    const total = obj.length;
    const reserve = this.#rdma.reserve?.bind(this.#rdma);
    let view: Uint8Array;
    if (reserve) {
      const r = reserve(total);
      this.#src = r.addr;
      view = r.view;
    } else view = new Uint8Array(total);
    let filled = 0;
    let failed: unknown;
    let stopped = false;
    let wake: (() => void) | undefined;
    const reading = (async () => {
      try {
        while (filled < total && !stopped) {
          const n = await obj.read(view.subarray(filled, Math.min(filled + SOURCE_PIECE, total)), filled);
          if (!Number.isSafeInteger(n) || n <= 0 || filled + n > total) throw new SabreError(ErrorCode.InvalidState, `dedup: the object's source ended at ${filled} of its ${total} bytes`);
          filled += n;
          wake?.();
        }
        if (!reserve && !stopped) this.#src = this.#rdma.stage(view);
      } catch (e) {
        failed = e;
      } finally {
        stopped = true;
        wake?.();
      }
    })();
    const until = async (n: number): Promise<void> => {
      for (;;) {
        if (failed) throw failed;
        if (filled >= n && (reserve || filled === total)) return;
        if (stopped) throw new SabreError(ErrorCode.Closed, 'dedup: the send stopped');
        await new Promise<void>((r) => (wake = r));
      }
    };
    return { until, stop: () => ((stopped = true), reading) };
  }

  async #send(obj: Uint8Array | DedupSource): Promise<SendResult> {
    if (this.#error) throw this.#error;
    // Staged (or read in) while the receiver's HELLO is still on its way (it may be filling its basis).
    const staged = this.#stageObject(obj);
    try {
      return await this.#transfer(obj.length, staged.until);
    } finally {
      // Nothing writes into the staging memory once this has settled: the caller may release it.
      await staged.stop();
    }
  }

  async #transfer(total: number, until: (n: number) => Promise<void>): Promise<SendResult> {
    const h = await this.#hello;
    await until(0); // a source read into a buffer first is staged (this.#src set) once it is all in
    // Closed while waiting (a close that did not reject the HELLO): a chunker made now would be
    // freed by nobody.
    if (this.#error) throw this.#error;
    const alg = hashAlgName(h.hashAlg) as HashAlgName;
    this.#chunker ??= new DeviceChunker(this.#mem, { avg: h.avg, min: h.min, max: h.max, normalization: h.normalization, key: h.key });
    this.#hasher ??= new ChunkHasher(this.#mem, alg, h.seed);
    const done = new Promise<SendResult>((resolve, reject) => (this.#pending = { resolve, reject }));
    done.catch(() => undefined); // a failed read below settles it and throws its own error
    this.#core.begin(total);
    const chunker = this.#chunker;
    const hasher = this.#hasher;
    let chunkAt = this.#src;
    const pool = this.#pool;
    const feed = async (lens: number[]): Promise<void> => {
      if (lens.length === 0) return;
      const hashes = pool ? await hasher.hashRunOn(pool, chunkAt, lens) : hasher.hashRun(chunkAt, lens);
      for (const l of lens) chunkAt += l;
      if (!this.#pending) return;
      this.#core.addChunks(lens, hashes);
      this.#run();
    };
    chunker.finish(); // a fresh stream
    for (let at = 0; at < total; at += this.#step) {
      const len = Math.min(this.#step, total - at);
      try {
        await until(at + len);
      } catch (e) {
        const err = e instanceof SabreError ? e : new SabreError(ErrorCode.InvalidState, `dedup: reading the object failed: ${(e as Error).message}`);
        this.#core.abort(err, performance.now());
        this.#rdma.cancel?.(); // nothing of it lands after the ABORT
        this.#run();
        throw e;
      }
      if (!this.#pending) break; // failed meanwhile
      await feed(pool ? await chunker.pushOn(pool, this.#src + at, len) : chunker.push(this.#src + at, len));
      if (!this.#pending) break; // failed meanwhile
      if (at + this.#step < total) {
        this.#core.flush();
        this.#run();
      }
      // Let completions and messages in between steps: the manifest streams while it is built.
      await new Promise<void>((r) => setImmediate(r));
    }
    if (this.#pending) {
      await feed(chunker.finish());
      if (this.#pending) {
        this.#core.endChunks();
        this.#run();
      }
    }
    return done;
  }

  /** Carry out what the core has queued, in order. */
  #run(): void {
    for (let a = this.#core.pollAction(); a !== undefined; a = this.#core.pollAction()) {
      switch (a.kind) {
        case 'send':
          void Promise.resolve(this.#pipe.send(a.bytes)).catch((e) => this.#broken(e as Error));
          break;
        case 'write': {
          const { slot, seq } = a;
          const posted = this.#rdma.ordered
            ? () => {
              this.#core.handleWritePosted(slot, performance.now(), seq);
              this.#run();
            }
            : undefined;
          this.#rdma
            .write(a.pieces.map((p) => ({ src: this.#src + p.off, len: p.len, remoteAddr: p.remoteAddr })), a.rkey, posted)
            .then(() => this.#core.handleWriteDone(slot, performance.now(), seq))
            .catch((e) => this.#core.handleWriteFailed(slot, e instanceof SabreError ? e : new SabreError(ErrorCode.Unreachable, String(e)), performance.now(), seq))
            .finally(() => this.#run());
          break;
        }
        case 'done':
          this.#totals.addSent(a.result);
          this.#pending?.resolve(a.result);
          this.#pending = undefined;
          break;
        case 'failed':
          this.#totals.sent.failed++;
          this.#pending?.reject(a.error);
          this.#pending = undefined;
          break;
      }
    }
  }

  #broken(e: Error): void {
    this.#error ??= e;
    this.#helloReject(e);
    this.#core.handleFailure(e instanceof SabreError ? e : new SabreError(ErrorCode.Closed, e.message), performance.now());
    this.#run();
  }

  /**
   * Free the chunker and hasher; a transfer still running (its pipe just failed, a source read
   * in flight) frees them once it has stopped, so nothing writes into memory freed under it.
   */
  close(): void {
    this.#error ??= new SabreError(ErrorCode.Closed, 'dedup: the sender is closed');
    const chunker = this.#chunker;
    const hasher = this.#hasher;
    this.#chunker = undefined;
    this.#hasher = undefined;
    const free = (): void => {
      chunker?.free();
      hasher?.free();
    };
    if (this.#running === 0) free();
    else void this.#busy.then(free);
  }
}

export interface DedupReceiverInit extends Omit<DedupRecvOptions, 'zone'> {
  pipe: MessagePipe;
  zone: LandingZone;
  /** Hash arrivals in-band, inside place() (default true; false: each slot is hashed at its ROUND). */
  inBand?: boolean;
  /**
   * Hand each object (or a transfer's error) here, synchronously, the moment it is complete,
   * instead of queueing it for next(): a channel puts it in its message order at once.
   */
  onObject?: (r: Received | Error) => void;
  /**
   * Told, synchronously, each time the verified prefix of the object being assembled grows: its
   * first `done` bytes are final (a file can be written while the rest arrives). `bytes` stays
   * the receiver's until the object is delivered: read it, keep no view past a failed transfer.
   * `moved`: `bytes` is a new array with the same first `done` bytes as the one told before (an
   * object assembled in its basis, store.takeInPlaceBasis, left it at the first chunk that moved).
   */
  onProgress?: (bytes: Uint8Array, done: number, moved?: boolean) => void;
  /**
   * The longest the receiver holds the sender's messages for its basis fill (store.fill of its
   * scope), in ms; past it, it answers from what the basis holds so far. The sender hears
   * nothing meanwhile: a channel gives half its dedupIdleMs, so a slow fill — or one whose read
   * never ends — costs bytes on the wire, not the transfer. Default: no bound.
   */
  holdMs?: number;
}

/**
 * Messages a receiver holds while its basis fills: a sender keeps 4 OFFER pages out by default
 * (window), a few more answers and ROUNDs cannot come before a NEED.
 */
const MAX_HELD = 16;

export interface Received {
  bytes: Uint8Array;
  stats: RecvStats;
}

/**
 * The receiving end: sends HELLO at once, then assembles each object the peer sends from its
 * store and the chunks that arrive. Objects are delivered in order (next(), or for await).
 */
export class DedupReceiver implements AsyncIterable<Received> {
  readonly #core: DedupRecvCore;
  readonly #pipe: MessagePipe;
  readonly #ready: Received[] = [];
  readonly #waiters: Array<{ resolve: (r: Received) => void; reject: (e: Error) => void }> = [];
  readonly #errors: Error[] = [];
  #closed: Error | undefined;
  #hooked: { regions: DeviceMemory['regions']; idx: number; stag: number } | undefined;
  readonly #totals: DedupTotals;
  readonly #onObject: ((r: Received | Error) => void) | undefined;
  readonly #onProgress: ((bytes: Uint8Array, done: number, moved?: boolean) => void) | undefined;

  constructor(o: DedupReceiverInit) {
    this.#core = new DedupRecvCore(o.onProgress ? { ...o, progress: true } : o);
    this.#onProgress = o.onProgress;
    this.#pipe = o.pipe;
    this.#totals = dedupTotals(o.mem);
    this.#onObject = o.onObject;
    this.#holdMs = o.holdMs;
    if (o.inBand !== false) this.#hookPlacement(o.mem, o.zone);
    this.#store = o.store;
    this.#scope = o.scope;
    o.pipe.onMessage((b) => this.#onMessage(b));
    o.pipe.onClose?.((e) => {
      this.#closed = new SabreError(ErrorCode.Closed, `dedup: the pipe closed${e ? `: ${e.message}` : ''}`);
      this.#held = [];
      this.#holding?.clear();
      this.#core.handleFailure(this.#closed as SabreError, performance.now());
      this.#run();
      for (const w of this.#waiters.splice(0)) w.reject(this.#closed);
    });
    this.#core.start();
    this.#run();
  }

  readonly #store: DedupReceiverInit['store'];
  readonly #scope: string;
  /** Messages held, in order, while the scope's basis is still being filled (store.fill). */
  #held: Uint8Array[] = [];
  #gaveUp: Promise<void> | undefined;
  #shut = false;

  /**
   * While the store is still filling this scope (a basis being read and ingested as the transfer
   * starts), hold the peer's messages: an OFFER answered now would ask for chunks the basis
   * holds. At most MAX_HELD: past that they are handled at once, in order (a NEED may then ask
   * for more than it had to; nothing else changes).
   */
  #onMessage(b: Uint8Array): void {
    // The pipe is the caller's and may outlive close(): what it still brings is dropped (the
    // core's memory is freed; it would not be answered either).
    if (this.#shut) return;
    if (this.#held.length === 0) {
      const filling = this.#store.filling(this.#scope);
      if (!filling || filling === this.#gaveUp) return this.#handle(b);
      void filling.then(() => this.#release());
      if (this.#holdMs !== undefined) this.#holding = peerDeadline(this.#holdMs, () => this.#giveUp(filling));
    }
    this.#held.push(b);
    if (this.#held.length > MAX_HELD) this.#giveUp(this.#store.filling(this.#scope));
  }

  /** No more waiting on this fill: what is held is handled now, and what comes later at once. */
  #giveUp(filling: Promise<void> | undefined): void {
    this.#gaveUp = filling;
    this.#release();
  }

  readonly #holdMs: number | undefined;
  #holding: { clear(): void } | undefined;

  #release(): void {
    this.#holding?.clear();
    this.#holding = undefined;
    if (this.#shut) return;
    const held = this.#held;
    this.#held = [];
    for (const m of held) this.#handle(m);
  }

  /** Messages held so far while the basis fills (tests). */
  get held(): number {
    return this.#held.length;
  }

  /** A transfer to us is under way: begun, or its first messages held while the basis fills. */
  get busy(): boolean {
    return this.#held.length > 0 || this.#core.active;
  }

  /** The next object received (rejects with the error of a failed transfer, in order). */
  next(): Promise<Received> {
    const r = this.#ready.shift();
    if (r) return Promise.resolve(r);
    const e = this.#errors.shift();
    if (e) return Promise.reject(e);
    if (this.#closed) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  [Symbol.asyncIterator](): AsyncIterator<Received> {
    return untilClosed(() => this.next());
  }

  /** The chunk map of a landing-zone slot (for the placement hook and tests). */
  get core(): DedupRecvCore {
    return this.#core;
  }

  #handle(b: Uint8Array): void {
    this.#core.handleMessage(b, performance.now());
    this.#run();
  }

  /** Carry out what the core has queued, in order. */
  #run(): void {
    for (let a = this.#core.pollAction(); a !== undefined; a = this.#core.pollAction()) {
      switch (a.kind) {
        case 'send':
          void Promise.resolve(this.#pipe.send(a.bytes)).catch(() => undefined);
          break;
        case 'progress':
          this.#onProgress?.(a.bytes, a.done, a.moved);
          break;
        case 'delivered':
          this.#totals.addReceived(a.stats);
          this.#deliver({ bytes: a.bytes, stats: a.stats });
          break;
        case 'failed': {
          this.#totals.received.failed++;
          // The core ends a transfer with LimitExceeded exactly when it went past this receiver's limits.
          if (a.error.code === ErrorCode.LimitExceeded) this.#totals.received.overLimit++;
          if (this.#onObject) {
            this.#onObject(a.error);
            break;
          }
          const w = this.#waiters.shift();
          if (w) w.reject(a.error);
          else this.#errors.push(a.error);
          break;
        }
        case 'refused':
          // No transfer will come: every wait, now and later, ends with why.
          this.#totals.received.helloRefused++;
          this.#closed ??= a.error;
          if (this.#onObject) this.#onObject(a.error);
          else for (const w of this.#waiters.splice(0)) w.reject(a.error);
          break;
      }
    }
  }

  #deliver(r: Received): void {
    if (this.#onObject) return this.#onObject(r);
    const w = this.#waiters.shift();
    if (w) w.resolve(r);
    else this.#ready.push(r);
  }

  /** Whether placement into the zone hashes in-band (the region table entry names our directory). */
  get inBand(): boolean {
    return this.#hooked !== undefined;
  }

  /**
   * docs/dedup.md "Hooking into place()": the zone's region table entry names the zone
   * directory, so every segment place() copies into the zone advances the armed slot's chunk
   * map. Only when the zone is a region of this device memory whose entry is exactly the zone
   * (a zone elsewhere is still verified, by hashing each slot at its ROUND).
   */
  #hookPlacement(mem: DedupMemory, zone: LandingZone): void {
    if (!(mem instanceof DeviceMemory)) return;
    const idx = zone.rkey >>> 8;
    if (idx < 1 || idx >= mem.regions.capacity) return;
    const e = mem.regions.read(idx);
    if (e.stag !== zone.rkey >>> 0 || e.external || e.base !== zone.addr || e.length < zone.length) return;
    mem.regions.setHashDir(idx, this.#core.zoneDirectory);
    this.#hooked = { regions: mem.regions, idx, stag: e.stag };
  }

  close(): void {
    // The pipe is the caller's and may stay open: what waits on this receiver ends with it.
    this.#closed ??= new SabreError(ErrorCode.Closed, 'dedup: the receiver is closed');
    for (const w of this.#waiters.splice(0)) w.reject(this.#closed);
    // Unhook before the directory is freed; a zone already deregistered (its index maybe
    // reused by another region) has a zeroed word already and is left alone.
    this.#shut = true;
    this.#held = [];
    this.#holding?.clear();
    const h = this.#hooked;
    this.#hooked = undefined;
    if (h && h.regions.read(h.idx).stag === h.stag) h.regions.setHashDir(h.idx, 0);
    this.#core.close();
  }
}
