// The sender's core of the dedup transfer (M4; the protocol is described in ./transfer.ts): fed
// the receiver's messages and its own write completions, it queues the OFFER pages, RDMA writes
// and ROUNDs to carry out. It packs needed chunks into slots by the rule the receiver mirrors
// (needed chunks in manifest order, a slot filled until the next chunk does not fit, a partial
// slot only once the last NEED is out), and trusts nothing the receiver says about pages or
// slots it does not hold out.
import { ErrorCode, SabreError } from '../core/errors.js';
import { DEDUP_ENTRY, DEDUP_HASH_BYTES, DEDUP_MSG, DEDUP_OFFER, DedupEndStatus, DedupKind } from '../wire/dedup-spec.js';
import { HASH_ALG } from './hash.js';
import { cdcParamsUsable } from '../kernels/cdc-params.js';
import type { SendResult } from './types.js';
import { decode, type DedupMessage, encode, type Hello } from './messages.js';
import { type HasTimeout, Outbox, type PollsActions } from '../core/sans-io.js';

/** One contiguous run of the object to write: object offset `off`, `len` bytes, to `remoteAddr` (zone rkey). */
export interface WritePiece {
  off: number;
  len: number;
  remoteAddr: number;
}

/** What the sender's shell carries out, in the order the core made them (pollAction). */
export type SendAction =
  | { kind: 'send'; bytes: Uint8Array }
  /** `seq` names this write among all of the core's: pass it back with its posting and completion. */
  | { kind: 'write'; slot: number; rkey: number; pieces: WritePiece[]; seq: number }
  | { kind: 'done'; result: SendResult }
  | { kind: 'failed'; error: SabreError };

const endError = (status: number, detail: number): SabreError =>
  new SabreError(
    status === DedupEndStatus.Mismatch ? ErrorCode.Malformed : status === DedupEndStatus.TooLarge ? ErrorCode.LimitExceeded : ErrorCode.Malformed,
    status === DedupEndStatus.Mismatch
      ? `dedup: chunk ${detail} did not match its hash (the transfer is rejected, nothing was delivered)`
      : `dedup: transfer ended with status ${status}`,
  );

export interface DedupSendOptions {
  /** OFFER pages in flight before their NEED (flow control of the receiver's receive buffers). Default 4. */
  window?: number;
  /**
   * The most bytes one message of the pipe may have (a channel: what the peer takes). OFFER
   * pages are cut to fit, whatever entries the HELLO allows: a page over it would be refused by
   * the pipe. Default: no bound but the HELLO's maxEntries.
   */
  maxMessage?: number;
}

/**
 * The sender's core, in the sans-I/O shape of src/core/sans-io.ts. After the peer's HELLO
 * (hello tells the chunking parameters and key the shell must chunk with), a transfer is
 * begin(total), then addChunks(...) as the shell chunks and hashes the object, then endChunks();
 * handleMessage for each message of the receiver, handleWriteDone(slot) when a write action has
 * completed (and handleWritePosted(slot) as soon as its writes are posted, where the path places
 * later messages after them), handleFailure when the pipe or a write failed. After each, the shell polls
 * pollAction() until undefined. No deadlines of its own: the pipe's are the transfer's.
 */
export class DedupSendCore implements PollsActions<SendAction>, HasTimeout {
  readonly #actions = new Outbox<SendAction>();
  readonly #window: number;
  readonly #maxMessage: number;
  /** Entries per OFFER page: the HELLO's maxEntries, within maxMessage. */
  #pageMax = 0;
  #hello: Hello | undefined;
  /** Why the receiver's HELLO was refused: the pipe has no usable parameters, now or later. */
  #helloRefused: SabreError | undefined;
  #xferNext = 1;
  // current transfer
  #xfer = 0;
  #total = 0;
  #lens: number[] = [];
  #offs: number[] = [];
  #hashes = new Uint8Array(0);
  #ended = false;
  #pagesSent = 0;
  #pagesAnswered = 0;
  #offered = 0; // entries sent in OFFER pages
  readonly #pageFirst: number[] = [];
  #queue: number[] = []; // needed chunk indices, manifest order
  #cursor = 0;
  #freeSlots: number[] = [];
  /**
   * Slots out: `written` once their ROUND is sent, `completed` once their writes have completed,
   * `granted` once the receiver gave them back. A slot is written again only when it is both
   * granted and completed (writes the path still owns, a retransmission, never land after newer
   * ones into the same slot), and slots come free in the order they were granted (the receiver
   * arms them in that order). Kept past the end of a transfer: an END can come before the last
   * completions.
   */
  readonly #inflight = new Map<number, { first: number; count: number; bytes: number; written: boolean; completed: boolean; granted: boolean; seq: number }>();
  #writeSeq = 0;
  #stats = { chunksSent: 0, bytesSent: 0, rounds: 0 };
  #active = false;

  constructor(o: DedupSendOptions = {}) {
    this.#window = o.window ?? 4;
    this.#maxMessage = o.maxMessage ?? Infinity;
  }

  /** The receiver's HELLO, once it has arrived. */
  get hello(): Hello | undefined {
    return this.#hello;
  }

  /** Set once the receiver's HELLO was refused: no transfer can run on this pipe. */
  get helloRefused(): SabreError | undefined {
    return this.#helloRefused;
  }

  get active(): boolean {
    return this.#active;
  }

  /** The next action to carry out; undefined when there is none. */
  pollAction(): SendAction | undefined {
    return this.#actions.poll();
  }

  pollTimeout(): number | undefined {
    return undefined;
  }

  handleTimeout(_now: number): void {}

  #enqueue(as: SendAction[]): void {
    for (const a of as) this.#actions.push(a);
  }

  /** A message of the receiver. */
  handleMessage(bytes: Uint8Array, _now: number): void {
    this.#enqueue(this.#onMessage(bytes));
  }

  #onMessage(bytes: Uint8Array): SendAction[] {
    let m: DedupMessage;
    try {
      m = decode(bytes);
    } catch (e) {
      return this.#fail(new SabreError(ErrorCode.Malformed, (e as Error).message));
    }
    if (this.#aborted !== 0 && m.kind !== DedupKind.Hello && m.xfer === this.#aborted) return [];
    switch (m.kind) {
      case DedupKind.Hello: {
        if (this.#hello || this.#helloRefused) return this.#fail(new SabreError(ErrorCode.Malformed, 'dedup: second HELLO'));
        const h = m;
        // A refused HELLO is told to the receiver (ABORT, xfer 0, HelloRefused): else it would
        // wait for an OFFER that never comes, its landing zone held, with no deadline armed (its
        // watchdog starts on a message of ours).
        const refuse = (e: SabreError): SendAction[] => [
          { kind: 'send', bytes: encode({ kind: DedupKind.Abort, xfer: 0, status: DedupEndStatus.HelloRefused }) },
          ...this.#fail((this.#helloRefused = e)),
        ];
        if (h.slots < 1 || h.slots > 64 || h.slotLen < h.max || h.max < h.avg || h.min > h.avg || h.maxEntries < 1 || HASH_ALG['xxh3-128'] !== h.hashAlg && HASH_ALG.sha256 !== h.hashAlg
          // Parameters the chunker refuses are the peer's fault, found here, not a caller's invalid argument at the first send.
          || !cdcParamsUsable(h)) {
          return refuse(new SabreError(ErrorCode.Malformed, 'dedup: HELLO with unusable parameters'));
        }
        this.#pageMax = Math.min(h.maxEntries, Math.floor((this.#maxMessage - DEDUP_MSG.size - DEDUP_OFFER.size) / DEDUP_ENTRY.size));
        if (this.#pageMax < 1) return refuse(new SabreError(ErrorCode.LimitExceeded, `dedup: the pipe's messages (${this.#maxMessage} bytes) cannot hold an OFFER page`));
        this.#hello = h;
        this.#freeSlots = Array.from({ length: h.slots }, (_, i) => i);
        return [];
      }
      case DedupKind.Need:
        return this.#onNeed(m.xfer, m.first, m.count, m.bitmap);
      case DedupKind.Grant: {
        const r = this.#inflight.get(m.slot);
        if (!this.#active || m.xfer !== this.#xfer || !r || !r.written || r.granted) return this.#fail(new SabreError(ErrorCode.Malformed, `dedup: GRANT of slot ${m.slot} not in the receiver's hands`));
        r.granted = true;
        this.#grantOrder.push(m.slot);
        return this.#release();
      }
      case DedupKind.End: {
        if (!this.#active || m.xfer !== this.#xfer) return this.#fail(new SabreError(ErrorCode.Malformed, 'dedup: END for no transfer'));
        if (m.status !== DedupEndStatus.Ok) return this.#fail(endError(m.status, m.detail));
        const result: SendResult = { xfer: this.#xfer, total: this.#total, chunks: this.#lens.length, pages: this.#pagesSent, ...this.#stats };
        this.#reset();
        return [{ kind: 'done', result }];
      }
      case DedupKind.Abort:
        return this.#fail(endError(m.status, 0));
      default:
        return this.#fail(new SabreError(ErrorCode.Malformed, `dedup: unexpected message kind ${m.kind} at the sender`));
    }
  }

  /** Start a transfer of `total` bytes. */
  begin(total: number): void {
    if (!this.#hello) throw new SabreError(ErrorCode.InvalidState, 'dedup: no HELLO from the receiver yet');
    if (this.#active) throw new SabreError(ErrorCode.InvalidState, 'dedup: a transfer is already running on this pipe');
    if (!Number.isSafeInteger(total) || total < 0) throw new SabreError(ErrorCode.InvalidArgument, 'dedup: total must be a byte count');
    this.#active = true;
    this.#xfer = this.#xferNext++ >>> 0 || this.#xferNext++;
    this.#total = total;
  }

  /** The next chunks of the object (lengths, and their 32-byte hash records end to end). */
  addChunks(lens: ArrayLike<number>, hashes: Uint8Array): void {
    if (!this.#active || this.#ended) throw new SabreError(ErrorCode.InvalidState, 'dedup: addChunks outside a transfer');
    const n0 = this.#lens.length;
    const bad = this.#badLength(lens, n0);
    if (bad) {
      // The receiver would refuse the page anyway; failing here says the length came from this
      // end's chunker (its state changed under it), not from the wire.
      this.abort(bad, 0);
      return;
    }
    const need = (n0 + lens.length) * DEDUP_HASH_BYTES;
    if (need > this.#hashes.length) {
      const grown = new Uint8Array(Math.max(need, this.#hashes.length * 2)); // doubling: linear in all
      grown.set(this.#hashes);
      this.#hashes = grown;
    }
    this.#hashes.set(hashes.subarray(0, lens.length * DEDUP_HASH_BYTES), n0 * DEDUP_HASH_BYTES);
    let off = n0 ? this.#offs[n0 - 1]! + this.#lens[n0 - 1]! : 0;
    for (let i = 0; i < lens.length; i++) {
      this.#lens.push(lens[i]!);
      this.#offs.push(off);
      off += lens[i]!;
    }
    this.#enqueue(this.#offer());
  }

  /**
   * A length no chunker of the receiver's parameters cuts: outside 1..max, or below min for a
   * chunk that is not the object's last (only the final one of all may be short: each batch's
   * last is checked once the next batch shows it was not).
   */
  #badLength(lens: ArrayLike<number>, n0: number): SabreError | undefined {
    const h = this.#hello!;
    const check = (len: number, idx: number, last: boolean): SabreError | undefined =>
      Number.isInteger(len) && len >= 1 && len <= h.max && (len >= h.min || last)
        ? undefined
        : new SabreError(ErrorCode.InvalidState, `dedup: the sender's chunker gave chunk ${idx} a length of ${len} bytes, outside ${h.min}..${h.max} before the object's end (its state changed under it): the transfer is aborted`);
    if (lens.length > 0 && n0 > 0) {
      const e = check(this.#lens[n0 - 1]!, n0 - 1, false);
      if (e) return e;
    }
    for (let i = 0; i < lens.length; i++) {
      const e = check(lens[i]!, n0 + i, i === lens.length - 1);
      if (e) return e;
    }
    return undefined;
  }

  endChunks(): void {
    if (!this.#active) throw new SabreError(ErrorCode.InvalidState, 'dedup: endChunks outside a transfer');
    const n = this.#lens.length;
    const sum = n ? this.#offs[n - 1]! + this.#lens[n - 1]! : 0;
    if (sum !== this.#total) throw new SabreError(ErrorCode.InvalidArgument, `dedup: chunks sum to ${sum}, the transfer said ${this.#total}`);
    this.#ended = true;
    this.#enqueue(this.#offer());
  }

  /**
   * The RDMA writes of a write action are all posted, on a path whose later messages are placed
   * after them (rc order on one QP): announce the round now, right behind them, instead of
   * after their completions.
   */
  handleWritePosted(slot: number, _now: number, seq?: number): void {
    const r = this.#inflight.get(slot);
    // Not this write's any more: its transfer failed meanwhile (the slot may be another's now).
    if (!this.#active || !r || (seq !== undefined && r.seq !== seq)) return;
    if (r.written) throw new SabreError(ErrorCode.InvalidState, `dedup: no write outstanding for slot ${slot}`);
    this.#round(slot, r);
  }

  /** The RDMA writes of a write action have completed (placed at the receiver): announce the round if not yet done. */
  handleWriteDone(slot: number, _now: number, seq?: number): void {
    const r = this.#inflight.get(slot);
    // Not ours any more: the transfer failed while the write was out (both ends freed every slot).
    if (!r || r.completed || (seq !== undefined && r.seq !== seq)) return;
    if (!r.written && this.#active) this.#round(slot, r);
    r.completed = true;
    this.#enqueue(this.#release());
  }

  #round(slot: number, r: { first: number; count: number; bytes: number; written: boolean }): void {
    r.written = true;
    this.#stats.rounds++;
    this.#actions.push({ kind: 'send', bytes: encode({ kind: DedupKind.Round, xfer: this.#xfer, slot, first: r.first, count: r.count, bytes: r.bytes }) });
  }

  /** Free the slots granted back whose writes have completed, in grant order; then fill them. */
  #release(): SendAction[] {
    let freed = false;
    while (this.#grantOrder.length > 0 && this.#inflight.get(this.#grantOrder[0]!)?.completed) {
      const slot = this.#grantOrder.shift()!;
      this.#inflight.delete(slot);
      this.#freeSlots.push(slot);
      freed = true;
    }
    return freed && this.#active ? this.#fill() : [];
  }

  #grantOrder: number[] = [];
  /** The transfer this sender last aborted (0: none). */
  #aborted = 0;

  /**
   * The sender itself gave up on the transfer (its object could not be read): the receiver is
   * told (ABORT) and the transfer is over.
   */
  abort(error: SabreError, _now: number): void {
    if (!this.#active) return;
    this.#actions.push({ kind: 'send', bytes: encode({ kind: DedupKind.Abort, xfer: this.#xfer, status: DedupEndStatus.Aborted }) });
    // The receiver's answers already on their way (NEEDs, GRANTs of this transfer) are dropped
    // when they come, not taken for the next transfer's.
    this.#aborted = this.#xfer;
    this.#enqueue(this.#fail(error));
  }

  /** A write action failed: its transfer is over (nothing, when the write is of one already over). */
  handleWriteFailed(slot: number, error: SabreError, now: number, seq?: number): void {
    const r = this.#inflight.get(slot);
    if (seq !== undefined && (!r || r.seq !== seq)) return;
    this.handleFailure(error, now);
  }

  /** The pipe or a write failed: the transfer is over. */
  handleFailure(error: SabreError, _now: number): void {
    if (this.#active) this.#enqueue(this.#fail(error));
  }

  /**
   * Offer the chunks added so far even if they do not fill a page (the shell calls it after each
   * chunking step, so the receiver answers and writes start while the rest is still being chunked).
   */
  flush(): void {
    // Only when the receiver has nothing to answer: a partial page then starts its NEED (and the
    // writes) early; otherwise chunks accumulate into full pages. Every page is a message queued
    // behind the RDMA WRITEs already posted on the same QP (rc order), so many small pages would
    // make the manifest trail the data.
    if (!this.#active || this.#pagesSent !== this.#pagesAnswered) return;
    this.#enqueue(this.#offer(true));
  }

  #offer(partial = false): SendAction[] {
    const out: SendAction[] = [];
    while (!this.#lastSent && this.#pagesSent - this.#pagesAnswered < this.#window) {
      // The newest chunk waits for the next batch (or the end): only then is it known whether it
      // may be short (#badLength), and nothing unchecked is offered.
      const avail = (this.#ended ? this.#lens.length : this.#lens.length - 1) - this.#offered;
      const lastPage = this.#ended && avail <= this.#pageMax;
      if (!lastPage && avail < this.#pageMax && !(partial && avail > 0)) break;
      const count = Math.min(avail, this.#pageMax);
      const first = this.#offered;
      out.push({
        kind: 'send',
        bytes: encode({
          kind: DedupKind.Offer, xfer: this.#xfer, total: this.#total, last: lastPage, chunks: lastPage ? first + count : 0, first, count,
          lens: Uint32Array.from(this.#lens.slice(first, first + count)),
          hashes: this.#hashes.subarray(first * DEDUP_HASH_BYTES, (first + count) * DEDUP_HASH_BYTES),
        }),
      });
      this.#pageFirst.push(first);
      this.#offered += count;
      this.#pagesSent++;
      if (lastPage) this.#lastSent = true;
    }
    return out;
  }

  #lastSent = false;

  #onNeed(xfer: number, first: number, count: number, bitmap: Uint8Array): SendAction[] {
    const want = this.#pageFirst[this.#pagesAnswered];
    if (!this.#active || xfer !== this.#xfer || want === undefined || first !== want) {
      return this.#fail(new SabreError(ErrorCode.Malformed, `dedup: NEED for entries ${first}+${count} answers no outstanding page`));
    }
    const pageCount = (this.#pageFirst[this.#pagesAnswered + 1] ?? this.#offered) - want;
    if (count !== pageCount) return this.#fail(new SabreError(ErrorCode.Malformed, 'dedup: NEED count differs from its page'));
    for (let i = 0; i < count; i++) if (bitmap[i >> 3]! & (1 << (i & 7))) this.#queue.push(first + i);
    this.#pagesAnswered++;
    return [...this.#offer(), ...this.#fill()];
  }

  /** Every NEED is in: the queue of needed chunks is final. */
  get #needComplete(): boolean {
    return this.#lastSent && this.#pagesAnswered === this.#pagesSent;
  }

  #fill(): SendAction[] {
    const out: SendAction[] = [];
    const h = this.#hello!;
    while (this.#freeSlots.length > 0 && this.#cursor < this.#queue.length) {
      let bytes = 0;
      let j = this.#cursor;
      while (j < this.#queue.length && bytes + this.#lens[this.#queue[j]!]! <= h.slotLen) bytes += this.#lens[this.#queue[j++]!]!;
      const full = j < this.#queue.length; // the next needed chunk does not fit
      if (!full && !this.#needComplete) break; // the run is not determined yet
      const slot = this.#freeSlots.shift()!;
      const base = h.zoneAddr + slot * h.slotLen;
      const pieces: WritePiece[] = [];
      let at = 0;
      for (let k = this.#cursor; k < j; k++) {
        const i = this.#queue[k]!;
        const last = pieces[pieces.length - 1];
        if (last && last.off + last.len === this.#offs[i]) last.len += this.#lens[i]!;
        else pieces.push({ off: this.#offs[i]!, len: this.#lens[i]!, remoteAddr: base + at });
        at += this.#lens[i]!;
      }
      const seq = ++this.#writeSeq;
      this.#inflight.set(slot, { first: this.#queue[this.#cursor]!, count: j - this.#cursor, bytes, written: false, completed: false, granted: false, seq });
      this.#stats.chunksSent += j - this.#cursor;
      this.#stats.bytesSent += bytes;
      this.#cursor = j;
      out.push({ kind: 'write', slot, rkey: h.zoneRkey, pieces, seq });
    }
    return out;
  }

  #fail(error: SabreError): SendAction[] {
    // What the receiver still sends of a transfer that failed (a second END, answers already
    // on their way) is not the next transfer's.
    if (this.#active) this.#aborted = this.#xfer;
    this.#reset();
    // After a failure both ends start the slot order afresh (the receiver does the same).
    this.#inflight.clear();
    this.#grantOrder = [];
    if (this.#hello) this.#freeSlots = Array.from({ length: this.#hello.slots }, (_, i) => i);
    return [{ kind: 'failed', error }];
  }

  #reset(): void {
    this.#active = false;
    this.#lens = [];
    this.#offs = [];
    this.#hashes = new Uint8Array(0);
    this.#ended = false;
    this.#pagesSent = 0;
    this.#pagesAnswered = 0;
    this.#offered = 0;
    this.#pageFirst.length = 0;
    this.#queue = [];
    this.#cursor = 0;
    this.#lastSent = false;
    this.#stats = { chunksSent: 0, bytesSent: 0, rounds: 0 };
  }
}
