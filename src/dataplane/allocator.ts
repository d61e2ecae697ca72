// The region arena allocator.
//
// Policy: best fit over an address-ordered free list, with immediate coalescing.
// - Every block starts and ends on a 64-byte boundary (sizes round up to 64), so the default
//   alignment is free and any larger power-of-two alignment only costs front padding, which
//   goes straight back to the free list as its own block.
// - Best fit (smallest leftover, lowest address on ties) keeps large free blocks whole for
//   large requests; coalescing on every free means no two free blocks are ever adjacent, so
//   freeing everything always leaves one block spanning the arena.
// - The arena grows (through the callback) only when no free block can hold the request:
//   growth extends the block at the top, so fragmentation never forces growth while a fitting
//   hole exists. With random workloads best fit keeps the arena close to peak live bytes
//   (test/dataplane/allocator.test.ts checks the invariants against a model).
// The free list is two parallel sorted arrays (start, size): registration is control-plane
// work, and thousands of holes cost microseconds to scan.
import { ErrorCode, SabreError } from '../core/errors.js';

export const MIN_ALIGN = 64;

export interface AllocatorStats {
  used: number;
  free: number;
  capacity: number;
  largestFree: number;
  grows: number;
}

/** Asked to extend the arena end to at least `minEnd`; returns the new end, or undefined when it cannot. */
export type GrowFn = (minEnd: number) => number | undefined;

interface Live {
  start: number;
  size: number;
}

const up = (n: number, a: number): number => Math.ceil(n / a) * a;

export class Allocator {
  readonly base: number;
  #end: number;
  #starts: number[] = [];
  #sizes: number[] = [];
  #live = new Map<number, Live>();
  #used = 0;
  #grows = 0;
  readonly #grow: GrowFn | undefined;

  constructor(base: number, end: number, grow?: GrowFn) {
    if (base % MIN_ALIGN !== 0 || end < base) throw new RangeError('arena must be 64-byte aligned and non-empty');
    this.base = base;
    this.#end = end - ((end - base) % MIN_ALIGN);
    this.#grow = grow;
    if (this.#end > base) this.#insertFree(base, this.#end - base);
  }

  get end(): number {
    return this.#end;
  }

  /** Address of `length` bytes aligned to `align` (a power of two; below 64 means 64). */
  alloc(length: number, align = MIN_ALIGN): number {
    if (!Number.isInteger(length) || length < 0) throw new SabreError(ErrorCode.InvalidArgument, `alloc length must be a non-negative integer, got ${length}`);
    if (!Number.isInteger(align) || align <= 0 || (align & (align - 1)) !== 0 || align > 2 ** 30) {
      throw new SabreError(ErrorCode.InvalidArgument, `alloc alignment must be a power of two, got ${align}`);
    }
    const a = Math.max(align, MIN_ALIGN);
    const size = up(Math.max(length, 1), MIN_ALIGN);
    let i = this.#bestFit(size, a);
    if (i < 0) {
      this.#extend(size, a);
      i = this.#bestFit(size, a);
      if (i < 0) throw new SabreError(ErrorCode.NoMemory, `device memory exhausted: no room for ${length} bytes`);
    }
    const start = this.#starts[i]!;
    const blockSize = this.#sizes[i]!;
    const addr = up(start, a);
    this.#removeFreeAt(i);
    if (addr > start) this.#insertFree(start, addr - start);
    const tail = start + blockSize - (addr + size);
    if (tail > 0) this.#insertFree(addr + size, tail);
    this.#live.set(addr, { start: addr, size });
    this.#used += size;
    return addr;
  }

  free(addr: number): void {
    const l = this.#live.get(addr);
    if (!l) throw new SabreError(ErrorCode.InvalidArgument, `free of ${addr}: not an allocated address (double free?)`);
    this.#live.delete(addr);
    this.#used -= l.size;
    this.#insertFree(l.start, l.size);
  }

  /** Usable bytes of a live allocation (its length rounded up to 64). */
  sizeOf(addr: number): number | undefined {
    return this.#live.get(addr)?.size;
  }

  stats(): AllocatorStats {
    let free = 0;
    let largestFree = 0;
    for (const s of this.#sizes) {
      free += s;
      if (s > largestFree) largestFree = s;
    }
    return { used: this.#used, free, capacity: this.#end - this.base, largestFree, grows: this.#grows };
  }

  /** The free blocks as [start, size] pairs, address order (tests and diagnostics). */
  freeBlocks(): Array<[number, number]> {
    return this.#starts.map((s, i) => [s, this.#sizes[i]!]);
  }

  #bestFit(size: number, align: number): number {
    let best = -1;
    let bestLeft = Infinity;
    for (let i = 0; i < this.#starts.length; i++) {
      const s = this.#starts[i]!;
      const left = s + this.#sizes[i]! - (up(s, align) + size);
      if (left >= 0 && left < bestLeft) {
        best = i;
        bestLeft = left;
        if (left === 0) break;
      }
    }
    return best;
  }

  #extend(size: number, align: number): void {
    if (!this.#grow) return;
    const n = this.#starts.length;
    const lastEnd = n > 0 ? this.#starts[n - 1]! + this.#sizes[n - 1]! : -1;
    const from = lastEnd === this.#end ? this.#starts[n - 1]! : this.#end;
    const minEnd = up(from, align) + size;
    const newEnd = this.#grow(minEnd);
    if (newEnd === undefined || newEnd < minEnd) return;
    const end = newEnd - ((newEnd - this.base) % MIN_ALIGN);
    const old = this.#end;
    this.#end = end;
    this.#grows++;
    this.#insertFree(old, end - old);
  }

  /** Insert a free block, merging with its neighbours. */
  #insertFree(start: number, size: number): void {
    const st = this.#starts;
    let lo = 0;
    let hi = st.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (st[mid]! < start) lo = mid + 1;
      else hi = mid;
    }
    const prev = lo - 1;
    const mergePrev = prev >= 0 && st[prev]! + this.#sizes[prev]! === start;
    const mergeNext = lo < st.length && start + size === st[lo]!;
    if (mergePrev && mergeNext) {
      this.#sizes[prev]! += size + this.#sizes[lo]!;
      this.#removeFreeAt(lo);
    } else if (mergePrev) {
      this.#sizes[prev]! += size;
    } else if (mergeNext) {
      st[lo] = start;
      this.#sizes[lo]! += size;
    } else {
      st.splice(lo, 0, start);
      this.#sizes.splice(lo, 0, size);
    }
  }

  #removeFreeAt(i: number): void {
    this.#starts.splice(i, 1);
    this.#sizes.splice(i, 1);
  }
}
