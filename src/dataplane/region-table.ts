// The region table: the placement kernel's only source of truth about who may write where.
// Little-endian entries in device memory (layout REGION_ENTRY in src/wire/spec.ts, which the
// kernels read through assembly/wire.gen.ts), entry index = STag >>> 8. Index 0 is never
// handed out, so STags 0..255 never name a region.
//
// Publication order matters because worker threads read entries while the control plane
// writes them: `write` first kills the old STag, then fills the fields, then publishes the new
// STag with one Atomics.store; a reader that sees the new STag therefore sees the new bounds.
// `clear` is one Atomics.store of 0, so a deregistered key stops matching at once.
import { randomBytes } from 'node:crypto';
import { ErrorCode, SabreError } from '../core/errors.js';
import { REGION_ENTRY } from '../wire/spec.js';

export const ENTRY_BYTES = REGION_ENTRY.size;
export const FLAG_EXTERNAL = REGION_ENTRY.fields.flags.bits!.External.mask;

export interface RegionEntry {
  base: number;
  length: number;
  stag: number;
  pd: number;
  access: number;
  external?: boolean;
}

// Entry fields as Int32Array word indices (every field is a 4-byte-aligned u32).
const F = REGION_ENTRY.fields;
const W_BASE = F.base.offset / 4;
const W_LENGTH = F.length.offset / 4;
const W_STAG = F.stag.offset / 4;
const W_PD = F.pd.offset / 4;
const W_ACCESS = F.access.offset / 4;
const W_FLAGS = F.flags.offset / 4;
const W_IOVA = F.iova.offset / 4;
const W_HASH_DIR = F.hashDir.offset / 4;

const isU32 = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= 0xffff_ffff;

export class RegionTable {
  /** Address of entry 0. */
  readonly base: number;
  /** Number of entries (index 0 included, never used). */
  readonly capacity: number;
  readonly #w: Int32Array;
  readonly #keys: Uint8Array;
  /** Indices freed since, reused first (most recently freed on top). */
  readonly #freeList: number[] = [];
  /** Lowest index never handed out: indices above it cost nothing until the table reaches them. */
  #fresh = 1;
  readonly #inUse: Uint8Array;

  /**
   * `buffer` must cover the table (it sits below the arena, so the initial buffer does) and the
   * table's bytes must be zero or live entries: a device memory's are zero when it is made, and
   * a thread attaching to it must not wipe the entries the owner wrote. Not clearing them here
   * also leaves the pages of entries never used untouched, so a large table costs address
   * space, not resident memory.
   */
  constructor(buffer: SharedArrayBuffer, base: number, capacity: number) {
    this.base = base;
    this.capacity = capacity;
    this.#w = new Int32Array(buffer, base, capacity * (ENTRY_BYTES / 4));
    // Random starting key bytes: a peer cannot predict the STag of a fresh registration.
    this.#keys = new Uint8Array(randomBytes(capacity));
    this.#inUse = new Uint8Array(capacity);
  }

  /** A free index (≥ 1): a freed one, else the lowest never used (keeps the hot part of the table small). Throws NoMemory when the table is full. */
  allocIndex(): number {
    let i = this.#freeList.pop();
    if (i === undefined) {
      if (this.#fresh >= this.capacity) throw new SabreError(ErrorCode.NoMemory, `region table full (${this.capacity - 1} regions)`);
      i = this.#fresh++;
    }
    this.#inUse[i] = 1;
    return i;
  }

  /** A fresh STag for index: index<<8 | key byte, the key byte rotating on every call. */
  nextStag(index: number): number {
    this.#check(index);
    const k = (this.#keys[index]! + 1) & 0xff;
    this.#keys[index] = k;
    return ((index << 8) | k) >>> 0;
  }

  write(index: number, e: RegionEntry): void {
    this.#check(index);
    if (!isU32(e.base) || !isU32(e.length) || e.base + e.length > 2 ** 32) {
      throw new SabreError(ErrorCode.InvalidArgument, `region [${e.base}, +${e.length}) is not inside the 32-bit address space`);
    }
    if (!isU32(e.stag) || e.stag === 0 || e.stag >>> 8 !== index) {
      throw new SabreError(ErrorCode.InvalidArgument, `stag 0x${e.stag.toString(16)} does not name index ${index}`);
    }
    if (!isU32(e.pd) || e.pd === 0) throw new SabreError(ErrorCode.InvalidArgument, 'pd must be a nonzero u32');
    if (!isU32(e.access)) throw new SabreError(ErrorCode.InvalidArgument, 'access must be a u32 bit set');
    const o = index * (ENTRY_BYTES / 4);
    const w = this.#w;
    Atomics.store(w, o + W_STAG, 0);
    w[o + W_BASE] = e.base | 0;
    w[o + W_LENGTH] = e.length | 0;
    w[o + W_PD] = e.pd | 0;
    w[o + W_ACCESS] = e.access | 0;
    w[o + W_FLAGS] = e.external ? FLAG_EXTERNAL : 0;
    w[o + W_IOVA] = 0;
    w[o + W_HASH_DIR] = 0; // a new registration is never hash-tracked until setHashDir says so
    Atomics.store(w, o + W_STAG, e.stag | 0);
  }

  /**
   * Mark entry `index` as a hash-tracked landing zone: `dir` is its dedup zone directory
   * (dedupZoneDir), 0 = none. One Atomics.store, so a worker's next place() sees it; only the
   * region's owner calls it (the dedup receiver, for the zone it registered), never a peer.
   */
  setHashDir(index: number, dir: number): void {
    this.#check(index);
    if (!isU32(dir)) throw new SabreError(ErrorCode.InvalidArgument, 'hash directory must be a u32 address');
    Atomics.store(this.#w, index * (ENTRY_BYTES / 4) + W_HASH_DIR, dir | 0);
  }

  /** The entry's hash directory (0 = not hash-tracked). */
  hashDir(index: number): number {
    this.#check(index);
    return Atomics.load(this.#w, index * (ENTRY_BYTES / 4) + W_HASH_DIR) >>> 0;
  }

  /** Invalidate the entry's STag at once (the index stays allocated). */
  clear(index: number): void {
    this.#check(index);
    Atomics.store(this.#w, index * (ENTRY_BYTES / 4) + W_STAG, 0);
  }

  /** Clear and return the index to the free pool. Freeing a free index throws InvalidArgument. */
  freeIndex(index: number): void {
    this.#check(index);
    if (!this.#inUse[index]) throw new SabreError(ErrorCode.InvalidArgument, `region index ${index} is not allocated`);
    this.clear(index);
    this.#inUse[index] = 0;
    this.#freeList.push(index);
  }

  /** The entry as stored (stag 0 = free/invalidated). */
  read(index: number): RegionEntry {
    this.#check(index);
    const o = index * (ENTRY_BYTES / 4);
    const w = this.#w;
    return {
      base: w[o + W_BASE]! >>> 0,
      length: w[o + W_LENGTH]! >>> 0,
      stag: Atomics.load(w, o + W_STAG) >>> 0,
      pd: w[o + W_PD]! >>> 0,
      access: w[o + W_ACCESS]! >>> 0,
      external: (w[o + W_FLAGS]! & FLAG_EXTERNAL) !== 0,
    };
  }

  /** Address of entry `index`. */
  entryAddr(index: number): number {
    return this.base + index * ENTRY_BYTES;
  }

  #check(index: number): void {
    if (!Number.isInteger(index) || index < 1 || index >= this.capacity) {
      throw new SabreError(ErrorCode.InvalidArgument, `region index ${index} out of range 1..${this.capacity - 1}`);
    }
  }
}
