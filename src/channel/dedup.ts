// Dedup sends over a channel: `ch.send(bytes, { dedup: true })` (docs/dedup.md, "The interface
// channels and the file service call"; docs/channels.md, "Dedup sends").
//
// The pipe is a message kind of the channel itself: a data message with the V (msgpack) flag
// whose first byte is 0xc1 — the one byte MessagePack never uses, so no value send() encodes can
// look like it, and a peer without this code fails the channel ("does not decode") instead of
// misreading it. The second byte says which role it is for:
//   OPEN      sender → receiver: make your DedupReceiver (its HELLO answers)
//   REFUSE    receiver → sender: this channel takes no dedup sends (option dedup: false)
//   TO_RX     sender → receiver: a dedup protocol message (OFFER, ROUND, ABORT)
//   TO_TX     receiver → sender: a dedup protocol message (HELLO, NEED, GRANT, END)
// These travel in the channel's order, with its credits and window, like every message. The RDMA
// path is the channel's own QP: plain RDMA WRITEs (work-request kind Dedup, at most DEDUP_WRS
// in flight) from a staging region of the channel's PD into the receiver's landing zone, a
// region of the receiver channel's PD — so the zone's rkey is honoured on this QP only.
//
// Order: the receiver puts each finished object into the channel's message order at the place
// of the dedup messages that carried it (it handles them only once they are next in order), and
// the sending channel holds the ordinary sends made after a dedup send until that send has
// finished, so nothing overtakes the object.
import { performance } from 'node:perf_hooks';
import { peerDeadline } from '../core/deadline.js';
import { Access, Opcode, WcStatus, wcStatusName } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { WorkCompletion } from '../core/work.js';
import { type DedupSource, DedupReceiver, DedupSender, type Received } from '../dedup/endpoint.js';

export { isDedupSource } from '../dedup/endpoint.js';
import { dedupMemoryOf, dedupStoreOf } from '../dedup/memory.js';
import { returnStage, type StageBlock, takeStage } from '../dedup/stage-pool.js';
import { dedupTotals } from '../dedup/stats.js';
import { cdcParams } from '../kernels/cdc-params.js';
import type { SendResult } from '../dedup/transfer.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import { WrKind } from './link.js';
import type { DedupStoreOptions } from './options.js';

/** First byte of a dedup-kind channel message (never the first byte of MessagePack; layout chanDedup). */
export const DEDUP_MARK = 0xc1;
export const DedupSub = { Open: 0, Refuse: 1, ToRx: 2, ToTx: 3 } as const;
/**
 * RDMA WRITEs of dedup chunks one channel keeps in flight (its QP's send queue has room for them:
 * hub.ts adds them to its depth). A slot's run is often two or more writes (the needed chunks of
 * a slot need not be adjacent in the object), so this is several per slot: with one per slot the
 * sender kept only about half its slots in flight.
 */
export const DEDUP_WRS = 16;
const SLOTS = 4;
/**
 * Entries per OFFER page: a page (2 + 26 + 36 per entry bytes) then fits the default ladder's
 * largest slot, 32 KiB, and goes eagerly; at the core's default of 1024 it is a rendezvous
 * message, one RDMA READ round trip each, and the ROUNDs queued behind it in channel order wait
 * for that too.
 */
const OFFER_ENTRIES = 896;

export const isDedupMessage = (b: Uint8Array): boolean => b.length >= 2 && b[0] === DEDUP_MARK;

/** What the channel gives its dedup half. */
export interface DedupHost {
  readonly qp: QueuePair;
  readonly pd: ProtectionDomain;
  readonly accept: boolean;
  readonly zoneBytes: number;
  readonly maxMessage: number;
  /** The device chunk store incoming dedup sends use (option dedupStore). */
  readonly store: Readonly<Required<DedupStoreOptions>>;
  /** Send a dedup-kind message now (not held behind dedup sends); rejects with why it could not go. */
  sendRaw(bytes: Uint8Array): Promise<void>;
  /** The largest message the peer takes (known once connected). */
  peerMaxMessage(): number;
  /** A received object, in order (or the error of a transfer that failed). */
  deliver(r: Received | Error): void;
  /** How long a dedup transfer waits without word from the peer (option dedupIdleMs). */
  readonly idleMs: number;
  /** The peer broke the protocol ('timeout': it went silent in a dedup transfer). */
  fail(message: string, kind?: 'protocol' | 'timeout'): void;
}

interface Stage {
  block: StageBlock;
  mr: MemoryRegion;
}

interface WriteBatch {
  left: number;
  /** Pieces not posted yet, and who to tell when they all are. */
  unposted: number;
  onPosted: (() => void) | undefined;
  resolve: () => void;
  reject: (e: Error) => void;
}

let scopes = 0;

const closedError = (): SabreError => new SabreError(ErrorCode.Closed, 'channel closed');

export class ChannelDedup {
  readonly #h: DedupHost;
  #tx: DedupSender | undefined;
  #txHandler: ((b: Uint8Array) => void) | undefined;
  #txRefused: Error | undefined;
  #rx: DedupReceiver | undefined;
  #rxHandler: ((b: Uint8Array) => void) | undefined;
  #zone: MemoryRegion | undefined;
  #scope: string | undefined;
  /** The current send's staging: a kept block of device memory (stage-pool.ts) and the region over it. */
  #stage: Stage | undefined;
  /** Stages of finished sends whose last writes have not completed yet: deregistered when they have. */
  #retired: Stage[] = [];
  #queue: Array<{ src: number; len: number; remoteAddr: number; rkey: number; lkey: number; batch: WriteBatch }> = [];
  readonly #batches = new Map<number, WriteBatch>();
  #inflight = 0;
  #wr = 0;
  #closed = false;
  /** Sends not settled yet: a source may still be reading into the stage (file reads in flight). */
  #sending = 0;
  /**
   * When the peer last gave word of itself in a dedup transfer (a message, a write of ours
   * completing) and the deadline on it while a send of ours or a receive is under way: the dedup
   * protocol has no deadlines of its own, and a peer whose transport still acknowledges (a stopped
   * process over tcp, a hostile peer) would otherwise keep a send (its source, its stage) or a
   * receive (the object being assembled, the landing zone) waiting for ever.
   */
  #heard = 0;
  /** A transfer to us has begun (a message for our receiver) and its object is not out yet. */
  #receiving = false;
  #idle: { clear(): void } | undefined;
  /** Set when that deadline failed the channel: what the send rejects with (not the pipe's ERR_CLOSED). */
  #stalled: SabreError | undefined;

  constructor(h: DedupHost) {
    this.#h = h;
  }

  /** Send `bytes` (or what a source reads) by dedup (one at a time; the caller orders them). */
  send(bytes: Uint8Array | DedupSource): Promise<SendResult> {
    if (this.#txRefused) return Promise.reject(this.#txRefused);
    // Closed between the channel's check and this call (it starts a microtask later): a sender
    // made now would never hear the close, nor settle.
    if (this.#closed) return Promise.reject(closedError());
    if (!this.#tx) {
      // A message the channel refuses (over what the peer takes, its queue full) fails the
      // sender with that reason at once: dropped, the transfer would only time out later.
      const pipe = {
        send: (b: Uint8Array) => this.#h.sendRaw(frame(DedupSub.ToRx, b)),
        onMessage: (f: (b: Uint8Array) => void) => void (this.#txHandler = f),
        onClose: (f: (e?: Error) => void) => void (this.#onTxClose = f),
      };
      // OFFER pages cut to what the peer takes, less this frame's 2 bytes.
      this.#tx = new DedupSender({ pipe, rdma: this, mem: dedupMemoryOf(this.#h.pd), maxMessage: this.#h.peerMaxMessage() - 2 });
      this.#h.sendRaw(frame(DedupSub.Open)).catch(() => undefined); // a channel that fails tells the sender itself
    }
    this.#sending++;
    this.#heard = performance.now();
    this.#watch();
    return this.#tx.send(bytes).then(
      (r) => (this.#settled(), r),
      (e: unknown) => {
        this.#settled();
        throw this.#txRefused ?? this.#stalled ?? e;
      },
    );
  }

  #settled(): void {
    if (--this.#sending === 0 && !this.#receiving) this.#unwatch();
    this.#releaseStage();
  }

  /** While a transfer is under way: fail the channel once the peer has been silent in it for idleMs. */
  #watch(): void {
    if (this.#idle || this.#closed || (this.#sending === 0 && !this.#receiving)) return;
    const ms = this.#h.idleMs;
    this.#idle = peerDeadline(Math.max(0, this.#heard + ms - performance.now()), () => {
      this.#idle = undefined;
      if (this.#closed || (this.#sending === 0 && !this.#receiving)) return;
      if (performance.now() - this.#heard >= ms) {
        const why = `dedup ${this.#sending > 0 ? 'send: no word from the receiver (stopped, or its application not taking what came)' : 'receive: no word from the sender'} for ${ms} ms`;
        this.#stalled = new SabreError(ErrorCode.Timeout, `channel: ${why}`);
        return this.#h.fail(why, 'timeout');
      }
      this.#watch();
    });
  }

  #unwatch(): void {
    this.#idle?.clear();
    this.#idle = undefined;
  }

  #onTxClose: ((e?: Error) => void) | undefined;

  /** A dedup-kind message, next in the channel's order. */
  onMessage(b: Uint8Array): void {
    const body = b.subarray(2);
    switch (b[1]) {
      case DedupSub.Open:
        if (this.#rx) return this.#h.fail('a second dedup OPEN');
        if (!this.#h.accept) return this.#refuse();
        try {
          return this.#openRx();
        } catch {
          // No device memory for the landing zone (or the store): refuse, as with dedup: false.
          for (const r of [this.#zone]) if (r?.valid) r.deregister();
          this.#zone = undefined;
          this.#rx = undefined;
          return this.#refuse();
        }
      case DedupSub.Refuse:
        this.#heard = performance.now();
        this.#txRefused = new SabreError(ErrorCode.NotSupported, 'channel: the peer takes no dedup sends (its option dedup is false, or it has no memory for a landing zone)');
        this.#onTxClose?.(this.#txRefused);
        return;
      case DedupSub.ToRx:
        if (!this.#rxHandler) return this.#h.fail('a dedup message before OPEN');
        this.#heard = performance.now();
        this.#receiving = true;
        this.#watch();
        this.#rxHandler(body);
        // The sender refused our HELLO (its waiting application was told): no transfer will
        // come, so the landing zone goes now rather than at the channel's close.
        if (this.#rx!.core.refused) this.#dropZone();
        // What the message left under way: an ABORT, an object out, or a straggler of a transfer
        // that has ended (ignored) leaves nothing the sender still owes us word for.
        this.#receiving = this.#rx!.busy;
        if (!this.#receiving && this.#sending === 0) this.#unwatch();
        return;
      case DedupSub.ToTx:
        if (!this.#txHandler) return this.#h.fail('a dedup answer with no dedup send');
        this.#heard = performance.now();
        return this.#txHandler(body);
      default:
        return this.#h.fail(`unknown dedup message kind ${b[1]}`);
    }
  }

  #basis: { scope: string; key: Uint8Array; avg?: number; onProgress?: (bytes: Uint8Array, done: number) => void } | undefined;

  /** Refuse the peer's dedup send, counted in dev.stats().dedup.received.refused. */
  #refuse(): void {
    try {
      dedupTotals(dedupMemoryOf(this.#h.pd)).received.refused++;
    } catch {
      // Not even 64 bytes of device memory to find the totals with: refused all the same.
    }
    this.#h.sendRaw(frame(DedupSub.Refuse)).catch(() => undefined); // a failing channel tells the peer itself
  }

  /** Close the receiver and release its landing zone (the receiver stays, closed: later messages are dropped). */
  #dropZone(): void {
    this.#rx?.close();
    if (this.#zone?.valid) this.#zone.deregister();
  }

  /**
   * Receive under this scope, key and average chunk size (set before the peer's OPEN; the
   * scope is the caller's to drop). The scope is the caller's basis: the chunks that arrive are
   * not added to it (a repeat inside the object is served from the object).
   */
  setBasis(scope: string, key: Uint8Array, avg?: number, onProgress?: (bytes: Uint8Array, done: number) => void): void {
    if (this.#rx) throw new SabreError(ErrorCode.InvalidState, 'channel: the dedup receiver is already open');
    if (!(key instanceof Uint8Array) || key.length !== 32) throw new SabreError(ErrorCode.InvalidArgument, 'channel: a dedup key is 32 bytes');
    // Checked by the chunker's rule now: at the peer's OPEN it could only refuse the send.
    if (avg !== undefined) cdcParams({ avg });
    this.#basis = { scope, key, ...(avg !== undefined ? { avg } : {}), ...(onProgress ? { onProgress } : {}) };
  }

  #openRx(): void {
    const pd = this.#h.pd;
    const mem = dedupMemoryOf(pd);
    const slotLen = Math.floor(this.#h.zoneBytes / SLOTS);
    this.#zone = pd.regMr(SLOTS * slotLen, Access.LocalWrite | Access.RemoteWrite);
    if (!this.#basis) this.#scope = `channel:${++scopes}`; // ours to drop at close
    const pipe = {
      send: (b: Uint8Array) => this.#h.sendRaw(frame(DedupSub.ToTx, b)),
      onMessage: (f: (b: Uint8Array) => void) => void (this.#rxHandler = f),
    };
    // The chunking key is this scope's own (on a shared store too): nobody else's chunk
    // boundaries match it.
    const store = dedupStoreOf(pd, this.#h.store);
    const scope = this.#basis?.scope ?? this.#scope!;
    const key = this.#basis?.key ?? store.chunkKey(scope);
    this.#rx = new DedupReceiver({
      pipe, mem, store, scope, key, slots: SLOTS, maxEntries: OFFER_ENTRIES,
      zone: { addr: this.#zone.addr, rkey: this.#zone.rkey, length: this.#zone.length }, maxTotal: this.#h.maxMessage,
      onObject: (r) => {
        this.#receiving = false;
        if (this.#sending === 0) this.#unwatch();
        this.#h.deliver(r);
      },
      ...(this.#basis?.avg !== undefined ? { avg: this.#basis.avg } : {}),
      ...(this.#basis?.onProgress ? { onProgress: this.#basis.onProgress } : {}),
      keepReceived: !this.#basis,
      // Within the sender's deadline on our silence (its own dedupIdleMs, by default equal).
      holdMs: Math.floor(this.#h.idleMs / 2),
    });
  }

  // ---- RdmaWritePath over the channel's QP ------------------------------------------------------

  stage(bytes: Uint8Array): number {
    const r = this.reserve(bytes.length);
    r.view.set(bytes);
    return r.addr;
  }

  reserve(length: number): { addr: number; view: Uint8Array } {
    if (this.#closed) throw closedError();
    const need = Math.max(length, 1);
    const mem = dedupMemoryOf(this.#h.pd);
    if (!this.#stage || this.#stage.block.length < need) {
      this.#releaseStage();
      const block = takeStage(mem, need);
      try {
        // An external region over the block (shared memory the NIC reaches itself): no fill.
        const mr = this.#h.pd.regMr(mem.u8().subarray(block.addr, block.addr + block.length), Access.LocalWrite);
        this.#stage = { block, mr };
      } catch (e) {
        returnStage(mem, block);
        throw e;
      }
    }
    const { addr } = this.#stage.block;
    return { addr, view: mem.u8().subarray(addr, addr + length) };
  }

  /**
   * The channel's messages go on the same rc QP as these writes, posted by the channel only
   * after the dedup shell asks for them: a message sent once a batch is all posted is placed
   * after its writes.
   */
  readonly ordered = true;

  write(pieces: ReadonlyArray<{ src: number; len: number; remoteAddr: number }>, rkey: number, onPosted?: () => void): Promise<void> {
    if (this.#closed) return Promise.reject(closedError());
    if (pieces.length === 0) {
      onPosted?.();
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const batch: WriteBatch = { left: pieces.length, unposted: pieces.length, onPosted, resolve, reject };
      const { block, mr } = this.#stage!;
      // The pieces name device memory (the block); the region has addresses of its own.
      const lkey = mr.lkey;
      for (const p of pieces) this.#queue.push({ src: p.src - block.addr + mr.addr, len: p.len, remoteAddr: p.remoteAddr, rkey, lkey, batch });
      this.#post();
    });
  }

  #post(): void {
    while (this.#inflight < DEDUP_WRS && this.#queue.length > 0 && !this.#closed) {
      const w = this.#queue.shift()!;
      const wrId = (++this.#wr * 8) | WrKind.Dedup;
      this.#batches.set(wrId, w.batch);
      this.#inflight++;
      this.#h.qp.postSend({ wrId, opcode: Opcode.RdmaWrite, sgList: [{ addr: w.src, length: w.len, lkey: w.lkey }], remoteAddr: w.remoteAddr, rkey: w.rkey });
      if (--w.batch.unposted === 0) w.batch.onPosted?.();
    }
  }

  cancel(): void {
    const e = new SabreError(ErrorCode.Closed, 'dedup: the send was aborted');
    for (const w of this.#queue.splice(0)) w.batch.reject(e);
  }

  /** A completion of one of our writes. */
  onWc(wc: WorkCompletion): void {
    const id = Number(wc.wrId);
    const b = this.#batches.get(id);
    if (!b) return;
    this.#heard = performance.now();
    this.#batches.delete(id);
    if (--this.#inflight === 0) for (const r of this.#retired.splice(0)) this.#dropStage(r);
    if (wc.status !== WcStatus.Success) {
      // The QP is in error now: the channel fails through its own completions too.
      this.#queue = this.#queue.filter((w) => w.batch !== b);
      b.left = -1;
      b.reject(new SabreError(ErrorCode.Unreachable, `dedup write failed: ${wcStatusName(wc.status)}`));
    } else if (b.left > 0 && --b.left === 0) b.resolve();
    try {
      this.#post();
    } catch (e) {
      for (const w of this.#queue.splice(0)) w.batch.reject(e as Error);
    }
  }

  /** A send is over: its stage goes now, or once the writes still out (an END can beat their completions) complete. */
  #releaseStage(): void {
    const st = this.#stage;
    this.#stage = undefined;
    if (!st) return;
    // Closed: no completion comes any more (and close released the writes' batches).
    if (this.#inflight > 0 && !this.#closed) this.#retired.push(st);
    else this.#dropStage(st);
  }

  /** Deregister a stage's region; its block serves a later send (no write or read refers to it now). */
  #dropStage(st: Stage): void {
    if (st.mr.valid) st.mr.deregister();
    returnStage(dedupMemoryOf(this.#h.pd), st.block);
  }

  /** The channel is gone: fail what waits, release the zone, the stage and the scope. */
  close(error: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unwatch();
    for (const w of this.#queue.splice(0)) w.batch.reject(error);
    for (const b of this.#batches.values()) b.reject(error);
    this.#batches.clear();
    this.#onTxClose?.(error);
    this.#tx?.close();
    this.#rx?.close();
    if (this.#scope) dedupStoreOf(this.#h.pd, this.#h.store).dropScope(this.#scope);
    // A send still settling may have a source read in flight into its stage (a file read the
    // kernel finishes later): the stage goes when that send settles (#releaseStage), not now,
    // or the read lands in memory a later allocation owns.
    if (this.#zone?.valid) this.#zone.deregister();
    if (this.#sending === 0) this.#releaseStage();
    for (const r of this.#retired.splice(0)) this.#dropStage(r);
  }
}

function frame(sub: number, body?: Uint8Array): Uint8Array {
  const out = new Uint8Array(2 + (body?.length ?? 0));
  out[0] = DEDUP_MARK;
  out[1] = sub;
  if (body) out.set(body, 2);
  return out;
}
