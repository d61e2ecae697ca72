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
import { ErrorCode, SabreError } from '../core/errors.js';
import { type HashAlgName, hashAlgName } from './hash.js';
import { ChunkHasher } from './hash.js';
import { DeviceChunker, type KernelRunner } from './chunker.js';
import type { DedupMemory } from './types.js';
import { dedupTotals, type DedupTotals } from './stats.js';
import type { Hello } from './messages.js';
import { DedupSendCore, type SendAction, type SendResult, type WritePiece } from './transfer.js';
import { type DedupSource, isDedupSource, type MessagePipe, pipeClosed, type RdmaWritePath } from './pipes.js';

export { type DedupSource, isDedupSource, type MessagePipe, type RdmaWritePath } from './pipes.js';
export { DedupReceiver, type DedupReceiverInit, type Received } from './receiver.js';
import { readRuns, SourceWindow, type WindowStep } from './source-window.js';

/** A windowed send's staging of needed runs (see DedupSender #sendWindowed). */
interface Runs {
  src: DedupSource;
  stage: number;
  slotLen: number;
  chain: Promise<void>;
}

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
    o.pipe.onClose?.((e) => this.#broken(pipeClosed(e)));
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
   * Stage the object: bytes at once; a source read straight into `reserve(length)` where the path
   * has one (an object smaller than the window: see #send), else whole into a buffer first, then
   * staged. `until(n)` resolves once its first n bytes are in device memory (rejects if reading
   * it failed), `stop()` once no read of it is in flight any more.
   */
  #stageObject(obj: Uint8Array | DedupSource, reserve?: (length: number) => { addr: number; view: Uint8Array }): { until(n: number): Promise<void>; stop(): Promise<void> } {
    if (obj instanceof Uint8Array) {
      this.#src = this.#rdma.stage(obj);
      return { until: () => Promise.resolve(), stop: () => Promise.resolve() };
    }
    const total = obj.length;
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
        if (reserve ? filled >= n : filled === total && stopped) return;
        if (stopped) throw new SabreError(ErrorCode.Closed, 'dedup: the send stopped');
        await new Promise<void>((r) => (wake = r));
      }
    };
    return { until, stop: () => ((stopped = true), reading) };
  }

  async #send(obj: Uint8Array | DedupSource): Promise<SendResult> {
    if (this.#error) throw this.#error;
    // A source on a path that hands out registered memory: chunked through a window, its needed
    // runs read again into slot-sized staging (./source-window.ts says why) — when that is less
    // memory than the object. The staging is sized by the receiver's HELLO (slots × slotLen, up
    // to 64 × 4 GiB): a peer's numbers never make us hold more than staging the object whole.
    // Else read straight into object-sized staging, as a plain send of its bytes would be staged.
    const reserve = this.#rdma.reserve?.bind(this.#rdma);
    if (!(obj instanceof Uint8Array) && reserve) {
      const h = await this.#hello;
      if (h.slots * h.slotLen + 2 * (h.max + this.#step) < obj.length) return this.#sendWindowed(obj, reserve);
    }
    // Staged (or read in) while the receiver's HELLO is still on its way (it may be filling its basis).
    const staged = this.#stageObject(obj, reserve);
    let at = 0;
    const step = this.#step;
    try {
      return await this.#transfer(obj.length, () => staged.until(0), async (open) => {
        if (at >= obj.length) return undefined;
        const len = Math.min(step, obj.length - at);
        await staged.until(at + len);
        const s = { at: this.#src + at, len, open };
        at += len;
        return s;
      });
    } finally {
      // Nothing writes into the staging memory once this has settled: the caller may release it.
      await staged.stop();
    }
  }

  /** The windowed send of a source: see #send. */
  async #sendWindowed(obj: DedupSource, reserve: (length: number) => { addr: number; view: Uint8Array }): Promise<SendResult> {
    let win: SourceWindow | undefined;
    const runs: Runs = { src: obj, stage: 0, slotLen: 0, chain: Promise.resolve() };
    try {
      return await this.#transfer(obj.length, async (h) => {
        // The staging of one landing zone's worth: slot s's run is read into its s-th part, which
        // is free again once slot s is (the core reuses a slot only once its writes completed).
        runs.stage = reserve(h.slots * h.slotLen).addr;
        runs.slotLen = h.slotLen;
        this.#runs = runs;
        win = new SourceWindow(this.#mem, obj, this.#step, h.max);
      }, (open) => win!.next(open));
    } finally {
      if (this.#runs === runs) this.#runs = undefined;
      // No read lands in the window or the staging once this has settled.
      await runs.chain;
      await win?.settle();
      win?.free();
    }
  }

  /**
   * One transfer: `prepare` once the receiver's HELLO is in; then `next(open)` gives each step of
   * the object in device memory (`open`: where the chunk still open begins), chunked and hashed
   * as it comes, its chunks offered at once.
   */
  async #transfer(total: number, prepare: (h: Hello) => Promise<void>, next: (open: number) => Promise<WindowStep | undefined>): Promise<SendResult> {
    const h = await this.#hello;
    // Closed while waiting (a close that did not reject the HELLO): a chunker made now would be
    // freed by nobody.
    if (this.#error) throw this.#error;
    await prepare(h);
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
    for (let seen = 0; seen < total;) {
      let s: WindowStep | undefined;
      try {
        s = await next(chunkAt);
      } catch (e) {
        this.#readFailed(e);
        throw e;
      }
      if (!s || !this.#pending) break; // failed meanwhile
      seen += s.len;
      chunkAt = s.open;
      await feed(pool ? await chunker.pushOn(pool, s.at, s.len) : chunker.push(s.at, s.len));
      if (!this.#pending) break; // failed meanwhile
      if (seen < total) {
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

  /** Reading the object failed: the receiver is told (ABORT) and nothing of it lands after that. */
  #readFailed(e: unknown): void {
    const err = e instanceof SabreError ? e : new SabreError(ErrorCode.InvalidState, `dedup: reading the object failed: ${(e as Error).message}`);
    this.#core.abort(err, performance.now());
    this.#rdma.cancel?.();
    this.#run();
  }

  /** A windowed send's staging: each write action's runs are read into its slot's part first, one action after another. */
  #runs: Runs | undefined;

  /** Post a write action's pieces (`src`: where each is in registered memory). */
  #post(a: Extract<SendAction, { kind: 'write' }>, src: (p: WritePiece, i: number) => number): void {
    const { slot, seq } = a;
    const posted = this.#rdma.ordered
      ? () => {
        this.#core.handleWritePosted(slot, performance.now(), seq);
        this.#run();
      }
      : undefined;
    this.#rdma
      .write(a.pieces.map((p, i) => ({ src: src(p, i), len: p.len, remoteAddr: p.remoteAddr })), a.rkey, posted)
      .then(() => this.#core.handleWriteDone(slot, performance.now(), seq))
      .catch((e) => this.#core.handleWriteFailed(slot, e instanceof SabreError ? e : new SabreError(ErrorCode.Unreachable, String(e)), performance.now(), seq))
      .finally(() => this.#run());
  }

  /** Read a write action's runs into its slot's staging, then post it (unless its transfer is over meanwhile). */
  #readAndPost(r: Runs, a: Extract<SendAction, { kind: 'write' }>): void {
    const base = r.stage + a.slot * r.slotLen;
    const at: number[] = [];
    let to = base;
    for (const p of a.pieces) {
      at.push(to);
      to += p.len;
    }
    r.chain = r.chain.then(async () => {
      if (this.#runs !== r || !this.#pending) return;
      try {
        await readRuns(r.src, () => this.#mem.u8(), base, a.pieces);
      } catch (e) {
        if (this.#runs === r && this.#pending) this.#readFailed(e);
        return;
      }
      if (this.#runs === r && this.#pending) this.#post(a, (_p, i) => at[i]!);
    });
  }

  /** Carry out what the core has queued, in order. */
  #run(): void {
    for (let a = this.#core.pollAction(); a !== undefined; a = this.#core.pollAction()) {
      switch (a.kind) {
        case 'send':
          void Promise.resolve(this.#pipe.send(a.bytes)).catch((e) => this.#broken(e as Error));
          break;
        case 'write': {
          if (this.#runs) this.#readAndPost(this.#runs, a);
          else this.#post(a, (p) => this.#src + p.off);
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
