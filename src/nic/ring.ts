// RecordRing: a single-producer / single-consumer ring of variable-length records in its own
// SharedArrayBuffer — the WQE ring (application → NIC thread) and the CQE ring (NIC thread →
// application) of DESIGN §8. Unlike src/dataplane/ring.ts (fixed slots inside WASM memory), a
// record here is as long as its work request: a send with two SGEs and 40 inline bytes takes
// what it needs, not the largest slot.
//
// Layout of the SharedArrayBuffer (header words are Int32; head and tail on their own 64-byte
// lines so the two threads do not bounce one cache line):
//   word 0   head       bytes the producer has published (free-running, wraps mod 2^32)
//   word 1   headSleep  1 while the consumer is (about to be) asleep waiting for records
//   word 16  tail       bytes the consumer has released (free-running)
//   word 17  tailSleep  1 while the producer is (about to be) asleep waiting for room
//   word 32  capacity   bytes in the data area (a power of two), word 33 magic
//   byte 192 the data area (`u8` / `dv` cover exactly it; offsets below are into it)
// Occupancy is (head - tail) | 0, at most `capacity`; byte position of counter c is c & mask.
//
// A record is 8-byte aligned: an 8-byte prefix (u32 body length, u32 reserved) then the body,
// padded to a multiple of 8. Records are always contiguous: when one does not fit before the
// end of the data area, the producer writes a wrap marker (length 0xffffffff) in the prefix
// slot there and the record starts at offset 0; the consumer skips the marker. A record may
// take at most half the data area (prefix included), so that one always fits in an empty ring
// whatever the wrap position (rest-before-the-end + record ≤ capacity); larger throws
// LimitExceeded at reserve(). Bodies start 8-byte aligned, so u64 fields of a body are aligned.
//
// Memory order. The producer writes bodies with plain stores and publishes them with one
// Atomics.store of head (commit); the consumer reads head with Atomics.load before it reads a
// body. Atomics are sequentially consistent, so the store/load pair orders the plain accesses
// around it: a body is complete when the consumer sees the head that covers it. Tail is the
// mirror image (the consumer's plain reads happen before the store that frees the bytes).
//
// Wake-up protocol (no lost wake-ups). Head is the sequence word the consumer sleeps on: every
// commit that publishes a record changes it, and it cannot come back to a value a sleeper saw
// (the producer can move at most `capacity` bytes past an empty ring's tail).
//   consumer: store(headSleep, 1); h = load(head); if h != tail → store(headSleep, 0), consume;
//             else waitAsync(head, h) … store(headSleep, 0)
//   producer: commit() = store(head); ringDoorbell() = if something was committed since the
//             last notify and load(headSleep) → notify(head)
// Either the producer's load sees the flag (and notifies), or the consumer's load sees the new
// head (and does not sleep); a notify between the consumer's check and its wait is not lost,
// since the wait compares head with h inside the futex. A consumer with no wait pending leaves
// the flag 0, so the doorbell costs one atomic load and no system call. Commit does not ring: a
// producer posts a batch, commits (per record or once) and rings once after the last commit;
// a commit never followed by ringDoorbell() may sit unseen by a sleeping consumer.
// The flag stays raised while an async wait is pending, busy or not; a consumer that polls
// (pollRecords) lowers it while it looks, so posts made meanwhile ring nobody.
// The full-ring direction is the same on tail / tailSleep: advance() notifies when the
// producer flagged it waits for room (waitForSpace).
//
// Node: a pending Atomics.waitAsync does not keep a thread's event loop alive. A thread whose
// only work is a ring wait must hold a ref'd handle of its own (its sockets, a timer).
import { ErrorCode, SabreError } from '../core/errors.js';

export const RECORD_RING_HEADER_BYTES = 192;
/** Bytes before each record body (u32 length, u32 reserved). */
export const RECORD_PREFIX_BYTES = 8;
const HEAD = 0;
const HEAD_SLEEP = 1;
const TAIL = 16;
const TAIL_SLEEP = 17;
const CAPACITY = 32;
const MAGIC = 33;
const MAGIC_VALUE = 0x52524e47; // 'RRNG'
const WRAP = 0xffffffff;
const MIN_CAPACITY = 64;
const MAX_CAPACITY = 1 << 30;

type WaitAsyncResult = { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number, t?: number): WaitAsyncResult }).waitAsync;

/** Bytes a record of `len` body bytes takes in the data area (prefix and padding included). */
export function recordBytes(len: number): number {
  return RECORD_PREFIX_BYTES + ((len + 7) & ~7);
}

export class RecordRing {
  readonly sab: SharedArrayBuffer;
  /** The data area as bytes; reserve() and peek() return offsets into it. */
  readonly u8: Uint8Array;
  /** The data area (same memory, same offsets); records are little-endian by convention. */
  readonly dv: DataView;
  /** Bytes in the data area (a power of two). */
  readonly capacity: number;
  /** Largest body reserve() accepts. */
  readonly maxRecord: number;
  readonly #hdr: Int32Array;
  readonly #mask: number;
  // Producer: #head runs ahead of #committed while records are reserved but not committed;
  // #tailSeen caches the consumer's tail and is reloaded only when the ring looks full.
  #head: number;
  #committed: number;
  /** The head the doorbell last announced. */
  #rung = 0;
  #tailSeen: number;
  // Consumer: #tail is released to the producer at every advance(); #headSeen caches head.
  #tail: number;
  #headSeen: number;
  /** Body length of the record at the last peek(), -1 when none is peeked. */
  #peekLen = -1;
  // Several async waits of one thread may sleep on the same word; the flag may only drop when
  // the last of them wakes, or the other side would stop notifying while one still sleeps.
  #recordWaiters = 0;
  #spaceWaiters = 0;

  private constructor(sab: SharedArrayBuffer) {
    this.sab = sab;
    this.#hdr = new Int32Array(sab, 0, RECORD_RING_HEADER_BYTES / 4);
    if (Atomics.load(this.#hdr, MAGIC) !== MAGIC_VALUE) throw new SabreError(ErrorCode.InvalidArgument, 'not a RecordRing buffer');
    const cap = Atomics.load(this.#hdr, CAPACITY);
    if (sab.byteLength < RECORD_RING_HEADER_BYTES + cap) throw new SabreError(ErrorCode.InvalidArgument, 'RecordRing buffer shorter than its capacity');
    this.capacity = cap;
    this.#mask = cap - 1;
    this.maxRecord = cap / 2 - RECORD_PREFIX_BYTES;
    this.u8 = new Uint8Array(sab, RECORD_RING_HEADER_BYTES, cap);
    this.dv = new DataView(sab, RECORD_RING_HEADER_BYTES, cap);
    this.#head = this.#committed = Atomics.load(this.#hdr, HEAD);
    this.#tail = this.#tailSeen = Atomics.load(this.#hdr, TAIL);
    this.#headSeen = this.#head;
  }

  /** A new ring with a data area of at least dataBytes (rounded up to a power of two, ≥ 64). */
  static create(dataBytes: number): RecordRing {
    if (!Number.isInteger(dataBytes) || dataBytes < 1 || dataBytes > MAX_CAPACITY) {
      throw new SabreError(ErrorCode.InvalidArgument, `RecordRing size must be an integer in [1, ${MAX_CAPACITY}], got ${dataBytes}`);
    }
    let cap = MIN_CAPACITY;
    while (cap < dataBytes) cap *= 2;
    const sab = new SharedArrayBuffer(RECORD_RING_HEADER_BYTES + cap);
    const hdr = new Int32Array(sab, 0, RECORD_RING_HEADER_BYTES / 4);
    hdr[CAPACITY] = cap;
    Atomics.store(hdr, MAGIC, MAGIC_VALUE);
    return new RecordRing(sab);
  }

  /** Attach to a ring created elsewhere (the SharedArrayBuffer posted to this thread). */
  static attach(sab: SharedArrayBuffer): RecordRing {
    return new RecordRing(sab);
  }

  /** Bytes published and not yet released (prefixes, padding and wrap markers included). */
  used(): number {
    return (Atomics.load(this.#hdr, HEAD) - Atomics.load(this.#hdr, TAIL)) | 0;
  }

  /** capacity - used() (records reserved and not yet committed still count as free here). */
  free(): number {
    return this.capacity - this.used();
  }

  // ---- producer side ----

  /**
   * Room for a body of len bytes: returns the offset (into u8 / dv) where exactly len bytes may
   * be written, or -1 when the ring has no room now (nothing reserved). The record becomes
   * visible to the consumer at the next commit(); records reserved before it are committed in
   * the same order. Write the body before committing.
   */
  reserve(len: number): number {
    if (!Number.isInteger(len) || len < 0) throw new SabreError(ErrorCode.InvalidArgument, `a ring record length must be a non-negative integer, got ${len}`);
    if (len > this.maxRecord) {
      throw new SabreError(ErrorCode.LimitExceeded, `a ring record of ${len} bytes exceeds the ring's largest (${this.maxRecord} of a ${this.capacity}-byte ring)`);
    }
    const need = RECORD_PREFIX_BYTES + ((len + 7) & ~7);
    let pos = this.#head & this.#mask;
    const rest = this.capacity - pos;
    const required = rest >= need ? need : rest + need;
    if (this.capacity - ((this.#head - this.#tailSeen) | 0) < required) {
      this.#tailSeen = Atomics.load(this.#hdr, TAIL);
      if (this.capacity - ((this.#head - this.#tailSeen) | 0) < required) return -1;
    }
    if (rest < need) {
      this.dv.setUint32(pos, WRAP, true);
      this.#head = (this.#head + rest) | 0;
      pos = 0;
    }
    this.dv.setUint32(pos, len, true);
    this.dv.setUint32(pos + 4, 0, true);
    this.#head = (this.#head + need) | 0;
    return pos + RECORD_PREFIX_BYTES;
  }

  /** The producer's published position (free-running): it moved iff records were committed since. */
  get committedHead(): number {
    return this.#committed;
  }

  /** Publish every record reserved since the last commit (one atomic store; wakes nobody). */
  commit(): void {
    if (this.#head === this.#committed) return;
    this.#committed = this.#head;
    Atomics.store(this.#hdr, HEAD, this.#head);
  }

  /**
   * Wake the consumer if it said it sleeps (true when it notified). Costs one atomic load while
   * the consumer is busy. Call after the last commit of a batch.
   */
  ringDoorbell(): boolean {
    // Nothing published since the last ring: a sleeper has nothing new to see (a driver that
    // rings after every step would otherwise wake an idle consumer for nothing).
    if (this.#committed === this.#rung) return false;
    if (Atomics.load(this.#hdr, HEAD_SLEEP) === 0) return false;
    this.#rung = this.#committed;
    Atomics.notify(this.#hdr, HEAD);
    return true;
  }

  /**
   * undefined when a body of len bytes (default: the smallest record) can be reserved now;
   * otherwise a promise that resolves when the consumer has released bytes since (or after
   * timeoutMs): re-check with reserve() and wait again if it is still too little. Commit what
   * you reserved before waiting: the consumer cannot free what it cannot see.
   */
  waitForSpace(len = 0, timeoutMs?: number): Promise<void> | undefined {
    if (this.#fits(len)) return undefined;
    Atomics.store(this.#hdr, TAIL_SLEEP, 1);
    const t = Atomics.load(this.#hdr, TAIL);
    this.#tailSeen = t;
    if (this.#fits(len)) {
      if (this.#spaceWaiters === 0) Atomics.store(this.#hdr, TAIL_SLEEP, 0);
      return undefined;
    }
    const w = waitAsync(this.#hdr, TAIL, t, timeoutMs);
    if (!w.async) {
      if (this.#spaceWaiters === 0) Atomics.store(this.#hdr, TAIL_SLEEP, 0);
      return undefined;
    }
    this.#spaceWaiters++;
    return w.value.then(() => {
      if (--this.#spaceWaiters === 0) Atomics.store(this.#hdr, TAIL_SLEEP, 0);
    });
  }

  #fits(len: number): boolean {
    const need = recordBytes(Math.min(Math.max(len, 0), this.maxRecord));
    const rest = this.capacity - (this.#head & this.#mask);
    const required = rest >= need ? need : rest + need;
    if (this.capacity - ((this.#head - this.#tailSeen) | 0) >= required) return true;
    this.#tailSeen = Atomics.load(this.#hdr, TAIL);
    return this.capacity - ((this.#head - this.#tailSeen) | 0) >= required;
  }

  // ---- consumer side ----

  /** Offset (into u8 / dv) of the next record's body, or -1 when none is published. Idempotent until advance(). */
  peek(): number {
    for (;;) {
      if (this.#tail === this.#headSeen) {
        this.#headSeen = Atomics.load(this.#hdr, HEAD);
        if (this.#tail === this.#headSeen) return -1;
      }
      const pos = this.#tail & this.#mask;
      const len = this.dv.getUint32(pos, true);
      // What was published from tail on (#headSeen is a commit: records end at or before it).
      const avail = (this.#headSeen - this.#tail) | 0;
      if (len === WRAP) {
        // A marker is always committed together with the record after it, so the loop runs
        // at most twice.
        if (this.capacity - pos >= avail) return this.#lost();
        this.#tail = (this.#tail + (this.capacity - pos)) | 0;
        continue;
      }
      if (len > this.maxRecord || recordBytes(len) > avail || pos + recordBytes(len) > this.capacity) return this.#lost();
      this.#peekLen = len;
      return pos + RECORD_PREFIX_BYTES;
    }
  }

  /**
   * Records the consumer gave up on (see #lost): a prefix that does not describe a record of
   * what was published. The ring is shared memory other code of the producer's thread can
   * write; the length is checked before it moves the tail, or a wrong one would leave the
   * tail past the head and the consumer reading garbage for good.
   */
  lost = 0;

  /** There is no telling where the next record starts: everything published so far goes (released to the producer). */
  #lost(): number {
    this.lost++;
    this.#headSeen = Atomics.load(this.#hdr, HEAD);
    this.#tail = this.#headSeen;
    this.#peekLen = -1;
    Atomics.store(this.#hdr, TAIL, this.#tail);
    if (Atomics.load(this.#hdr, TAIL_SLEEP) !== 0) Atomics.notify(this.#hdr, TAIL);
    return -1;
  }

  /** Body length of the record the last peek() returned (-1 when none). */
  peekLength(): number {
    return this.#peekLen;
  }

  /** Release the peeked record to the producer (one atomic store; wakes a producer waiting for room). */
  advance(): void {
    if (this.#peekLen < 0) throw new SabreError(ErrorCode.InvalidState, 'RecordRing.advance() without a peeked record');
    this.#tail = (this.#tail + recordBytes(this.#peekLen)) | 0;
    this.#peekLen = -1;
    Atomics.store(this.#hdr, TAIL, this.#tail);
    if (Atomics.load(this.#hdr, TAIL_SLEEP) !== 0) Atomics.notify(this.#hdr, TAIL);
  }

  /**
   * undefined when a record is there to peek; otherwise a promise that resolves when the
   * producer has committed and rung the doorbell (or after timeoutMs, or at wakeAll()). It may
   * resolve with nothing to read: peek() again and wait again.
   */
  waitForRecords(timeoutMs?: number): Promise<void> | undefined {
    if (this.#tail !== Atomics.load(this.#hdr, HEAD)) return undefined;
    Atomics.store(this.#hdr, HEAD_SLEEP, 1);
    const h = Atomics.load(this.#hdr, HEAD);
    if (h !== this.#tail) {
      if (this.#recordWaiters === 0) Atomics.store(this.#hdr, HEAD_SLEEP, 0);
      return undefined;
    }
    const w = waitAsync(this.#hdr, HEAD, h, timeoutMs);
    if (!w.async) {
      if (this.#recordWaiters === 0) Atomics.store(this.#hdr, HEAD_SLEEP, 0);
      return undefined;
    }
    this.#recordWaiters++;
    return w.value.then(() => {
      if (--this.#recordWaiters === 0) Atomics.store(this.#hdr, HEAD_SLEEP, 0);
    });
  }

  /**
   * Busy-poll for a record until `deadline` (by `now()`) or `maxChecks` looks, whichever comes
   * first; true when one is there to peek. Meanwhile the consumer says it is awake, so a
   * producer's doorbell is one atomic load and no wake-up, even with an async wait of this
   * thread still pending; the flag is raised again before returning (a record committed while
   * it was down is then seen by the caller, who peeks before sleeping: nothing is lost).
   */
  pollRecords(deadline: number, now: () => number, maxChecks: number): boolean {
    if (this.#tail !== Atomics.load(this.#hdr, HEAD)) return true;
    Atomics.store(this.#hdr, HEAD_SLEEP, 0);
    let found = false;
    for (let i = 0; i < maxChecks; i++) {
      if (this.#tail !== Atomics.load(this.#hdr, HEAD)) {
        found = true;
        break;
      }
      // The clock every 16 looks: cheaper than the load, but not free.
      if ((i & 15) === 15 && now() >= deadline) break;
    }
    if (this.#recordWaiters > 0) Atomics.store(this.#hdr, HEAD_SLEEP, 1);
    return found || this.#tail !== Atomics.load(this.#hdr, HEAD);
  }

  /**
   * Block this thread (Atomics.wait: no CPU, no event loop) until a record is committed and the
   * doorbell rung, or for timeoutMs; true when one is there to peek. For a worker thread that
   * expects a post soon: the producer's notify wakes it directly (a futex), not through its
   * event loop. An async wait of this thread still pending is woken by the same notify.
   */
  waitRecordsSync(timeoutMs: number): boolean {
    if (this.#tail !== Atomics.load(this.#hdr, HEAD)) return true;
    Atomics.store(this.#hdr, HEAD_SLEEP, 1);
    const h = Atomics.load(this.#hdr, HEAD);
    if (h === this.#tail) Atomics.wait(this.#hdr, HEAD, h, timeoutMs);
    if (this.#recordWaiters === 0) Atomics.store(this.#hdr, HEAD_SLEEP, 0);
    return this.#tail !== Atomics.load(this.#hdr, HEAD);
  }

  /** Wake the consumer wherever it waits for records (a poll in Atomics.wait included): it re-checks. */
  wakeConsumer(): void {
    Atomics.notify(this.#hdr, HEAD);
  }

  /** Wake every waiter on this ring, in any thread (shutdown: they re-check their own state). */
  wakeAll(): void {
    Atomics.notify(this.#hdr, HEAD);
    Atomics.notify(this.#hdr, TAIL);
  }
}
