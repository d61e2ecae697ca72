// The work request ids of one queue of a NIC-thread QP, by token (./thread-qp.ts). Tokens are
// the queue's post count, handed out in order, so the ids live in a ring indexed by token from
// the oldest one still held: two words per slot where a Map held a dozen entries in a hash
// table several times that size (an idle channel keeps a few receives posted, on each of
// thousands of QPs). Receive completions may come out of order (srd): a completed slot is a
// hole until the ones before it complete too.
import type { WrId } from '../core/work.js';

/** The ring of a window that never held an id: shared, never written (#grow replaces it). */
const NO_SLOTS: (WrId | undefined)[] = [];

export class WrIdWindow {
  /** Slots from #head: the ids of tokens #base, #base + 1, …; undefined once taken. */
  #ids = NO_SLOTS;
  #mask = -1;
  #head = 0;
  /** The token in slot #head (a uint32 that wraps). */
  #base = 0;
  /** Tokens from #base to the next one posted, holes included. */
  #span = 0;

  /** Tokens from the oldest held to the newest posted (what the ring must cover). */
  get span(): number {
    return this.#span;
  }

  /** `token` is the queue's next one: the one after every token put since the last clear(). */
  put(token: number, id: WrId): void {
    if (this.#span === 0) {
      this.#base = token >>> 0;
      this.#head = 0;
    }
    if (this.#span > this.#mask) this.#grow();
    this.#ids[(this.#head + this.#span) & this.#mask] = id;
    this.#span++;
  }

  /** The id of `token`, no longer held (undefined: not held — taken already, or dropped). */
  take(token: number): WrId | undefined {
    const d = (token - this.#base) | 0;
    if (d < 0 || d >= this.#span) return undefined;
    const i = (this.#head + d) & this.#mask;
    const id = this.#ids[i];
    this.#ids[i] = undefined;
    if (d === 0) this.#skipHoles();
    return id;
  }

  /**
   * The id of `token`, and every older one dropped: a send completion retires its send and each
   * before it (the send queue completes in order; unsignaled successes have no completion).
   */
  takeThrough(token: number): WrId | undefined {
    const d = (token - this.#base) | 0;
    if (d < 0 || d >= this.#span) return undefined;
    const id = this.#ids[(this.#head + d) & this.#mask];
    this.#drop(d + 1);
    return id;
  }

  /** Drop every token older than `token` (tokens the NIC retired without a completion). */
  dropBefore(token: number): void {
    const d = (token - this.#base) | 0;
    if (d > 0) this.#drop(Math.min(d, this.#span));
  }

  /** Every id still held, oldest token first, and none held after (a queue flushed at once). */
  takeAll(): WrId[] {
    const out: WrId[] = [];
    for (let k = 0; k < this.#span; k++) {
      const id = this.#ids[(this.#head + k) & this.#mask];
      if (id !== undefined) out.push(id);
    }
    this.clear();
    return out;
  }

  clear(): void {
    this.#ids = NO_SLOTS;
    this.#mask = -1;
    this.#head = 0;
    this.#span = 0;
  }

  #drop(n: number): void {
    for (let k = 0; k < n; k++) this.#ids[(this.#head + k) & this.#mask] = undefined;
    this.#head = (this.#head + n) & this.#mask;
    this.#base = (this.#base + n) >>> 0;
    this.#span -= n;
    this.#skipHoles();
  }

  #skipHoles(): void {
    while (this.#span > 0 && this.#ids[this.#head] === undefined) {
      this.#head = (this.#head + 1) & this.#mask;
      this.#base = (this.#base + 1) >>> 0;
      this.#span--;
    }
  }

  #grow(): void {
    const n = this.#mask < 0 ? 4 : (this.#mask + 1) * 2;
    const b: (WrId | undefined)[] = new Array(n);
    for (let k = 0; k < this.#span; k++) b[k] = this.#ids[(this.#head + k) & this.#mask];
    this.#ids = b;
    this.#mask = n - 1;
    this.#head = 0;
  }
}
