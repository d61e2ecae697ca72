// DedupReceiver: the receiving shell around the transfer's receive core (./recv-core.ts), over
// any reliable ordered message pipe; the landing zone is the caller's registered memory the
// sender RDMA-WRITEs into (./endpoint.ts has the sending half and the overview).
import { peerDeadline } from '../core/deadline.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { untilClosed } from '../core/lifecycle.js';
import { DeviceMemory } from '../dataplane/device-memory.js';
import type { DedupMemory } from './types.js';
import { dedupTotals, type DedupTotals } from './stats.js';
import { DedupRecvCore, type DedupRecvOptions, type LandingZone, type RecvStats } from './transfer.js';
import { offerSpan } from './messages.js';
import { type MessagePipe, pipeClosed } from './pipes.js';

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
/**
 * How far past an OFFER page's last byte (object offsets) the basis must be chunked before the
 * page is answered while the rest of the basis is still being chunked: a chunk the object shares
 * with its basis is mostly near the same offset (an edit shifts what follows it by its size), so
 * the page's chunks that are in the basis are mostly in the table by then. One that is not yet
 * costs its bytes on the wire, nothing else.
 */
const PASSED_MARGIN = 1 << 20;

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
      this.#closed = pipeClosed(e);
      this.#held = [];
      this.#holding?.clear();
      this.#unwatch?.();
      this.#core.handleFailure(this.#closed as SabreError, performance.now());
      this.#run();
      for (const w of this.#waiters.splice(0)) w.reject(this.#closed);
    });
    this.#core.start();
    this.#run();
  }

  readonly #store: DedupReceiverInit['store'];
  readonly #scope: string;
  /**
   * Messages held, in order, while the scope's basis is still being filled (store.fill); `end`:
   * an OFFER page's last byte + 1 in its object, -1 for any other message.
   */
  #held: Array<{ b: Uint8Array; end: number }> = [];
  #gaveUp: Promise<void> | undefined;
  /** The fill whose steps release held pages (watched once per fill). */
  #watched: Promise<void> | undefined;
  #unwatch: (() => void) | undefined;
  #shut = false;
  /** The object offsets the OFFER pages seen so far reach, per transfer (pages come in order). */
  #spanXfer = -1;
  #spanEnd = 0;

  /**
   * While the store is still filling this scope (a basis being read and ingested as the transfer
   * starts), hold the peer's messages: an OFFER answered now would ask for chunks the basis
   * holds. A page is let through, in order, once the basis is all read and chunked PASSED_MARGIN
   * past the page's end, so the transfer runs alongside the rest of the fill. At most MAX_HELD:
   * past that they are handled at once, in order (a NEED may then ask for more than it had to;
   * nothing else changes).
   */
  #onMessage(b: Uint8Array): void {
    // The pipe is the caller's and may outlive close(): what it still brings is dropped (the
    // core's memory is freed; it would not be answered either).
    if (this.#shut) return;
    const end = this.#offerEnd(b);
    if (this.#held.length === 0) {
      const filling = this.#store.filling(this.#scope);
      if (!filling || filling === this.#gaveUp || this.#passed(end)) return this.#handle(b);
      if (this.#watched !== filling) {
        this.#watched = filling;
        void filling.then(() => this.#release());
        this.#unwatch = this.#store.fillProgress(this.#scope)?.watch(() => this.#releasePassed());
      }
      if (this.#holdMs !== undefined) this.#holding = peerDeadline(this.#holdMs, () => this.#giveUp(filling));
    }
    this.#held.push({ b, end });
    if (this.#held.length > MAX_HELD) this.#giveUp(this.#store.filling(this.#scope));
  }

  #offerEnd(b: Uint8Array): number {
    const span = offerSpan(b);
    if (!span) return -1;
    if (span.xfer !== this.#spanXfer) {
      this.#spanXfer = span.xfer;
      this.#spanEnd = 0;
    }
    return (this.#spanEnd += span.bytes);
  }

  /** Whether a message may be answered while the fill runs (any but an OFFER the fill has not passed). */
  #passed(end: number): boolean {
    if (end < 0) return true;
    const p = this.#store.fillProgress(this.#scope);
    return !p || (p.readDone && end + PASSED_MARGIN <= p.chunked);
  }

  /** After a fill step: the held messages at the front that it let through. */
  #releasePassed(): void {
    while (!this.#shut && this.#held.length > 0 && this.#passed(this.#held[0]!.end)) this.#handle(this.#held.shift()!.b);
    if (this.#held.length === 0) {
      this.#holding?.clear();
      this.#holding = undefined;
    }
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
    this.#unwatch?.();
    this.#unwatch = undefined;
    if (this.#shut) return;
    const held = this.#held;
    this.#held = [];
    for (const m of held) this.#handle(m.b);
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
    this.#unwatch?.();
    const h = this.#hooked;
    this.#hooked = undefined;
    if (h && h.regions.read(h.idx).stag === h.stag) h.regions.setHashDir(h.idx, 0);
    this.#core.close();
  }
}
