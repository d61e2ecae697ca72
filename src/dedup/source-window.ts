// A DedupSource chunked through a bounded window of device memory instead of staged whole.
//
// Why: a sender that read its whole object into device memory touched object-sized fresh memory
// in every process that sends once (the CLI's `put --dedup`): 64 MiB is ~16 k page faults, and the
// kernel's zeroing of those pages cost that process about as much CPU as chunking them — work a
// plain put never does (it reads through small buffers it reuses). Chunking and hashing need the
// bytes once, in order; the RDMA WRITEs need only the chunks the receiver asks for, and those are
// read again from the source into a slot-sized staging area when their NEED comes (the sender's
// shell, ./endpoint.ts). So device memory holds two steps of the stream and the landing zone's
// worth of staging, whatever the object's size.
//
// The window is two buffers of `carry + step` bytes. Step k is read into buffer k % 2 at offset
// `carry`, while step k - 1 is chunked; before the read of step k + 1 reuses the other buffer,
// the chunk still open at the end of step k - 1 (fewer than `carry` bytes: the chunker's maximum)
// is copied right in front of step k's bytes, so every chunk lies whole in one buffer when it is
// hashed. The source's bytes are read once here; what the receiver lacks is read a second time.
import { ErrorCode, SabreError } from '../core/errors.js';
import type { DedupSource } from './pipes.js';
import type { DedupMemory } from './types.js';

/** A step of the stream in device memory: its new bytes at [at, at + len); the open chunk begins at `open` (≤ at). */
export interface WindowStep {
  at: number;
  len: number;
  open: number;
}

export class SourceWindow {
  readonly #mem: DedupMemory;
  readonly #src: DedupSource;
  readonly #step: number;
  readonly #carry: number;
  readonly #base: number;
  /** Bytes of the source read so far (asked for), and the next step's read if started. */
  #readTo = 0;
  #reading: Promise<number> | undefined;
  #k = 0;
  #prevEnd = 0;
  #freed = false;

  /** `carry`: the longest chunk (an open chunk is shorter); `step`: bytes read and chunked at a time. */
  constructor(mem: DedupMemory, src: DedupSource, step: number, carry: number) {
    this.#mem = mem;
    this.#src = src;
    this.#step = step;
    this.#carry = carry;
    this.#base = mem.alloc(2 * (carry + step));
    this.#reading = this.#read(0);
    this.#reading.catch(() => undefined); // awaited by next(); a send that fails first never does
  }

  #buf(k: number): number {
    return this.#base + (k % 2) * (this.#carry + this.#step);
  }

  /** Read the next step into buffer k % 2 (whole, unless the object ends first); its length. */
  async #read(k: number): Promise<number> {
    const total = this.#src.length;
    const from = this.#readTo;
    const len = Math.min(this.#step, total - from);
    this.#readTo += len;
    const at = this.#buf(k) + this.#carry;
    let got = 0;
    while (got < len) {
      // A fresh view per read: the memory may have grown (a new buffer) since the last one.
      const n = await this.#src.read(this.#mem.u8().subarray(at + got, at + len), from + got);
      if (!Number.isSafeInteger(n) || n <= 0 || n > len - got) throw new SabreError(ErrorCode.InvalidState, `dedup: the object's source ended at ${from + got} of its ${total} bytes`);
      got += n;
    }
    return len;
  }

  /**
   * The next step, once read (undefined at the end of the object). `open`: where the chunk still
   * open after the previous step begins in its buffer (the first address not yet chunked into a
   * completed chunk); it is moved in front of this step's bytes.
   */
  async next(open: number): Promise<WindowStep | undefined> {
    if (!this.#reading) return undefined;
    const len = await this.#reading;
    this.#reading = undefined;
    const k = this.#k++;
    const at = this.#buf(k) + this.#carry;
    const tail = k === 0 ? 0 : this.#prevEnd - open;
    if (tail < 0 || tail > this.#carry) throw new SabreError(ErrorCode.InvalidState, `dedup: an open chunk of ${tail} bytes does not fit the window's ${this.#carry}`);
    if (tail > 0) this.#mem.u8().copyWithin(at - tail, open, this.#prevEnd);
    this.#prevEnd = at + len;
    // The other buffer's open chunk is out of it now: the read after this one may fill it.
    if (this.#readTo < this.#src.length) {
      this.#reading = this.#read(k + 1);
      this.#reading.catch(() => undefined);
    }
    return { at, len, open: at - tail };
  }

  /** No read of it is in flight any more (then free() may run). */
  async settle(): Promise<void> {
    await this.#reading?.catch(() => undefined);
    this.#reading = undefined;
  }

  free(): void {
    if (this.#freed) return;
    this.#freed = true;
    this.#mem.free(this.#base);
  }
}

/**
 * Read the object's runs `pieces` (offset, length) from the source into `view`, end to end from
 * its start; false when the source gave fewer bytes than asked (it shrank: the transfer aborts).
 */
export async function readRuns(src: DedupSource, view: () => Uint8Array, at: number, pieces: ReadonlyArray<{ off: number; len: number }>): Promise<void> {
  let to = at;
  for (const p of pieces) {
    let got = 0;
    while (got < p.len) {
      const n = await src.read(view().subarray(to + got, to + p.len), p.off + got);
      if (!Number.isSafeInteger(n) || n <= 0 || n > p.len - got) throw new SabreError(ErrorCode.InvalidState, `dedup: the object's source ended at ${p.off + got} of its ${src.length} bytes when it was read again`);
      got += n;
    }
    to += p.len;
  }
}
