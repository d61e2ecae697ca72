// Single-producer / single-consumer descriptor ring in shared memory.
//
// Layout (addr 64-byte aligned; head and tail on their own cache lines so the two threads
// do not bounce one line between cores):
//   +0   head  i32   next slot the producer will publish (free-running, wraps mod 2^32)
//   +4   headWaiter i32  1 while the consumer is (about to be) asleep on head
//   +64  tail  i32   next slot the consumer will read (free-running)
//   +68  tailWaiter i32  1 while the producer is (about to be) asleep on tail (ring full)
//   +128 slots u32, +132 slotBytes u32  (so the other thread can attach by address)
//   +192 slot[0] … slot[slots-1], slotBytes each
// Occupancy is (head - tail) | 0, never more than `slots`; slot of index i is i & (slots-1).
//
// Batching: the producer reserves up to n slots (one look at tail), writes them with plain
// stores and publishes them with ONE Atomics.store of head; the consumer sees all of them
// with one Atomics.load and frees them with one store of tail. The Atomics store/load pair
// orders the slot contents (release/acquire), so slots need no atomics of their own.
//
// Wake-up protocol (no lost wake-ups). Sleeping consumer:
//   1. Atomics.store(headWaiter, 1)
//   2. h = Atomics.load(head); if h != tail: store(headWaiter, 0) and consume (no sleep)
//   3. Atomics.wait(head, h)  — or Atomics.waitAsync on the event-loop side
//   4. Atomics.store(headWaiter, 0)
// Producer, after its Atomics.store(head, h + n): if Atomics.load(headWaiter) == 1, notify(head).
// All four are sequentially consistent, so either the producer's load sees the flag (and
// notifies), or the consumer's load in step 2 sees the new head (and does not sleep). A
// notify that lands between step 2 and step 3 is not lost either: wait(head, h) compares head
// with h atomically inside the futex and returns 'not-equal'. The full-ring direction is the
// mirror image on tail / tailWaiter.

export const RING_HEADER_BYTES = 192;
const HEAD = 0;
const HEAD_WAITER = 1;
const TAIL = 16;
const TAIL_WAITER = 17;
const SLOTS = 32;
const SLOT_BYTES = 33;

type WaitAsyncResult = { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number, t?: number): WaitAsyncResult }).waitAsync;

export class Ring {
  readonly addr: number;
  readonly slots: number;
  readonly slotBytes: number;
  readonly mask: number;
  /** Address of slot 0. */
  readonly slotBase: number;
  /** The slot area as u32 words; slot k starts at word `wordOf(k)`. */
  readonly u32: Uint32Array;
  /** The slot area as bytes (same memory). */
  readonly u8: Uint8Array;
  readonly #hdr: Int32Array;
  readonly #wordsPerSlot: number;
  // Each side caches the other side's index and reloads it only when it looks full/empty.
  #head = 0;
  #tail = 0;
  // Several async waiters of one thread may sleep on the same index (e.g. many submitters
  // waiting for room); the waiter flag may only drop when the last of them wakes, or the
  // other side would stop notifying while one still sleeps.
  #asyncHeadWaiters = 0;
  #asyncTailWaiters = 0;

  private constructor(buffer: SharedArrayBuffer, addr: number, slots: number, slotBytes: number) {
    if (addr % 64 !== 0) throw new RangeError('ring address must be 64-byte aligned');
    this.addr = addr;
    this.slots = slots;
    this.slotBytes = slotBytes;
    this.mask = slots - 1;
    this.slotBase = addr + RING_HEADER_BYTES;
    this.#hdr = new Int32Array(buffer, addr, RING_HEADER_BYTES / 4);
    this.u32 = new Uint32Array(buffer, this.slotBase, (slots * slotBytes) / 4);
    this.u8 = new Uint8Array(buffer, this.slotBase, slots * slotBytes);
    this.#wordsPerSlot = slotBytes >>> 2;
    this.#head = Atomics.load(this.#hdr, HEAD);
    this.#tail = Atomics.load(this.#hdr, TAIL);
  }

  static bytesFor(slots: number, slotBytes: number): number {
    return RING_HEADER_BYTES + slots * slotBytes;
  }

  /** Format a ring at addr (indices zeroed). Only before either side uses it. */
  static init(buffer: SharedArrayBuffer, addr: number, slots: number, slotBytes: number): Ring {
    if (!Number.isInteger(slots) || slots < 2 || (slots & (slots - 1)) !== 0 || slots > 1 << 24) throw new RangeError('ring slots must be a power of two');
    if (!Number.isInteger(slotBytes) || slotBytes < 8 || (slotBytes & (slotBytes - 1)) !== 0) throw new RangeError('ring slotBytes must be a power of two ≥ 8');
    const hdr = new Int32Array(buffer, addr, RING_HEADER_BYTES / 4);
    hdr.fill(0);
    hdr[SLOTS] = slots;
    hdr[SLOT_BYTES] = slotBytes;
    Atomics.store(hdr, HEAD, 0);
    return new Ring(buffer, addr, slots, slotBytes);
  }

  /** Attach to a ring another thread formatted. */
  static attach(buffer: SharedArrayBuffer, addr: number): Ring {
    const hdr = new Int32Array(buffer, addr, RING_HEADER_BYTES / 4);
    return new Ring(buffer, addr, Atomics.load(hdr, SLOTS), Atomics.load(hdr, SLOT_BYTES));
  }

  // ---- producer side ----

  /** How many of n slots can be written now (0..n). Write slot k (k < result) at wordOf(k)/addrOf(k), then publish. */
  reserve(n: number): number {
    let free = this.slots - ((this.#head - this.#tail) | 0);
    if (free < n) {
      this.#tail = Atomics.load(this.#hdr, TAIL);
      free = this.slots - ((this.#head - this.#tail) | 0);
    }
    return free < n ? free : n;
  }

  /** Word index (into u32) of the k-th slot past the producer's head. */
  wordOf(k: number): number {
    return ((this.#head + k) & this.mask) * this.#wordsPerSlot;
  }

  /** Absolute address of the k-th slot past the producer's head (for WASM writers). */
  addrOf(k: number): number {
    return this.slotBase + ((this.#head + k) & this.mask) * this.slotBytes;
  }

  /** Make n written slots visible to the consumer, waking it if it sleeps. */
  publish(n: number): void {
    this.#head = (this.#head + n) | 0;
    Atomics.store(this.#hdr, HEAD, this.#head);
    if (Atomics.load(this.#hdr, HEAD_WAITER) !== 0) Atomics.notify(this.#hdr, HEAD);
  }

  /** Push one slot from u32 words; false when full. */
  tryPush(words: ArrayLike<number>): boolean {
    if (this.reserve(1) === 0) return false;
    this.u32.set(words as ArrayLike<number>, this.wordOf(0));
    this.publish(1);
    return true;
  }

  // ---- consumer side ----

  /** Slots ready to read now. */
  available(): number {
    let n = (this.#head - this.#tail) | 0;
    if (n === 0) {
      this.#head = Atomics.load(this.#hdr, HEAD);
      n = (this.#head - this.#tail) | 0;
    }
    return n;
  }

  /** Word index (into u32) of the k-th readable slot. */
  peekWord(k: number): number {
    return ((this.#tail + k) & this.mask) * this.#wordsPerSlot;
  }

  /** Absolute address of the k-th readable slot. */
  peekAddr(k: number): number {
    return this.slotBase + ((this.#tail + k) & this.mask) * this.slotBytes;
  }

  /** Hand n read slots back to the producer, waking it if it waits for room. */
  release(n: number): void {
    this.#tail = (this.#tail + n) | 0;
    Atomics.store(this.#hdr, TAIL, this.#tail);
    if (Atomics.load(this.#hdr, TAIL_WAITER) !== 0) Atomics.notify(this.#hdr, TAIL);
  }

  // ---- sleeping (see the protocol above) ----

  // Each wait sleeps at most once: false means woken (timeout, wakeAll at shutdown, or a
  // spurious notify) with nothing to do, and the caller re-checks its own state and loops.

  /** Consumer, worker thread: block until a slot is readable. False on timeout. */
  waitReadable(timeoutMs = Infinity): boolean {
    for (;;) {
      if (this.available() > 0) return true;
      Atomics.store(this.#hdr, HEAD_WAITER, 1);
      const h = Atomics.load(this.#hdr, HEAD);
      if (h !== this.#tail) {
        Atomics.store(this.#hdr, HEAD_WAITER, 0);
        continue;
      }
      Atomics.wait(this.#hdr, HEAD, h, timeoutMs);
      Atomics.store(this.#hdr, HEAD_WAITER, 0);
      return this.available() > 0;
    }
  }

  /** Consumer, event-loop thread: resolves when a slot is readable (false on timeout). */
  async waitReadableAsync(timeoutMs = Infinity): Promise<boolean> {
    for (;;) {
      if (this.available() > 0) return true;
      Atomics.store(this.#hdr, HEAD_WAITER, 1);
      const h = Atomics.load(this.#hdr, HEAD);
      if (h !== this.#tail) {
        if (this.#asyncHeadWaiters === 0) Atomics.store(this.#hdr, HEAD_WAITER, 0);
        continue;
      }
      this.#asyncHeadWaiters++;
      const w = waitAsync(this.#hdr, HEAD, h, timeoutMs);
      if (w.async) await w.value;
      if (--this.#asyncHeadWaiters === 0) Atomics.store(this.#hdr, HEAD_WAITER, 0);
      return this.available() > 0;
    }
  }

  /** Producer, worker thread: block until n slots are free. False on timeout. */
  waitWritable(n = 1, timeoutMs = Infinity): boolean {
    for (;;) {
      if (this.reserve(n) >= n) return true;
      Atomics.store(this.#hdr, TAIL_WAITER, 1);
      const t = Atomics.load(this.#hdr, TAIL);
      if (t !== this.#tail) {
        Atomics.store(this.#hdr, TAIL_WAITER, 0);
        continue;
      }
      Atomics.wait(this.#hdr, TAIL, t, timeoutMs);
      Atomics.store(this.#hdr, TAIL_WAITER, 0);
      return this.reserve(n) >= n;
    }
  }

  /** Producer, event-loop thread: resolves when n slots are free (false on timeout). */
  async waitWritableAsync(n = 1, timeoutMs = Infinity): Promise<boolean> {
    for (;;) {
      if (this.reserve(n) >= n) return true;
      Atomics.store(this.#hdr, TAIL_WAITER, 1);
      const t = Atomics.load(this.#hdr, TAIL);
      if (t !== this.#tail) {
        if (this.#asyncTailWaiters === 0) Atomics.store(this.#hdr, TAIL_WAITER, 0);
        continue;
      }
      this.#asyncTailWaiters++;
      const w = waitAsync(this.#hdr, TAIL, t, timeoutMs);
      if (w.async) await w.value;
      if (--this.#asyncTailWaiters === 0) Atomics.store(this.#hdr, TAIL_WAITER, 0);
      return this.reserve(n) >= n;
    }
  }

  /** Wake whoever sleeps on this ring (shutdown: the sleeper then re-checks its own stop flag). */
  wakeAll(): void {
    Atomics.notify(this.#hdr, HEAD);
    Atomics.notify(this.#hdr, TAIL);
  }
}
