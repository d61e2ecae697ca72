// Chunk identities: the hash algorithms a chunk store can key by, and the one encoding every
// dedup record uses (dedupEntry.hash, 32 bytes): XXH3-128 as its low64 then high64, little-endian
// (the kernel's digest bytes), then 16 zero bytes; or the 32 bytes of SHA-256.
//
// XXH3-128 runs in WASM over device memory (xxh128Chunks: a whole run of chunks per call) and is
// the default: a store scoped to one peer only ever resolves that peer's own transfers, and 128
// bits put an accidental collision out of reach (docs/dedup.md, "Collisions"). SHA-256 (node:
// crypto, native) is for stores shared between peers that do not trust each other: XXH3 is not
// collision-resistant against someone who chooses the bytes.
import { createHash } from 'node:crypto';
import { DEDUP_HASH_BYTES, DedupHashAlg } from '../wire/dedup-spec.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { DedupMemory } from './types.js';

export type HashAlgName = 'xxh3-128' | 'sha256';
export const HASH_ALG: Record<HashAlgName, number> = { 'xxh3-128': DedupHashAlg.Xxh3_128, sha256: DedupHashAlg.Sha256 };
export const hashAlgName = (code: number): HashAlgName | undefined =>
  code === DedupHashAlg.Xxh3_128 ? 'xxh3-128' : code === DedupHashAlg.Sha256 ? 'sha256' : undefined;

export { DEDUP_HASH_BYTES };

const U64 = (1n << 64n) - 1n;
/** Chunks per xxh128Chunks call. */
const BATCH = 4096;

/** The 32-byte record form of an XXH3-128 value (high64 << 64 | low64, as the kernels return it). */
export function xxhBytes(h: bigint, out = new Uint8Array(DEDUP_HASH_BYTES), at = 0): Uint8Array {
  const dv = new DataView(out.buffer, out.byteOffset + at, DEDUP_HASH_BYTES);
  dv.setBigUint64(0, h & U64, true);
  dv.setBigUint64(8, (h >> 64n) & U64, true);
  dv.setBigUint64(16, 0n);
  dv.setBigUint64(24, 0n);
  return out;
}

/** The XXH3-128 value of a 32-byte record. */
export function xxhValue(b: Uint8Array, at = 0): bigint {
  const dv = new DataView(b.buffer, b.byteOffset + at, 16);
  return (dv.getBigUint64(8, true) << 64n) | dv.getBigUint64(0, true);
}

/**
 * Map key of a 32-byte hash record: its sixteen 16-bit words as one string of 16 code units.
 * Every lookup and insert of a chunk makes one, so it is built from the bytes directly (a hex
 * string costs a Buffer, twice the characters and twice the garbage).
 */
export function hashKey(b: Uint8Array, at = 0): string {
  const o = at;
  return String.fromCharCode(
    b[o]! | (b[o + 1]! << 8), b[o + 2]! | (b[o + 3]! << 8), b[o + 4]! | (b[o + 5]! << 8), b[o + 6]! | (b[o + 7]! << 8),
    b[o + 8]! | (b[o + 9]! << 8), b[o + 10]! | (b[o + 11]! << 8), b[o + 12]! | (b[o + 13]! << 8), b[o + 14]! | (b[o + 15]! << 8),
    b[o + 16]! | (b[o + 17]! << 8), b[o + 18]! | (b[o + 19]! << 8), b[o + 20]! | (b[o + 21]! << 8), b[o + 22]! | (b[o + 23]! << 8),
    b[o + 24]! | (b[o + 25]! << 8), b[o + 26]! | (b[o + 27]! << 8), b[o + 28]! | (b[o + 29]! << 8), b[o + 30]! | (b[o + 31]! << 8),
  );
}

/** Scratch in the memory for xxh128Chunks' lengths and digests, grown on demand. */
export class ChunkHasher {
  readonly mem: DedupMemory;
  readonly alg: HashAlgName;
  readonly seed: bigint;
  #cap = 0;
  #lens = 0;
  #out = 0;

  constructor(mem: DedupMemory, alg: HashAlgName = 'xxh3-128', seed: bigint = 0n) {
    if (alg !== 'xxh3-128' && alg !== 'sha256') throw new SabreError(ErrorCode.InvalidArgument, `unknown chunk hash ${String(alg)}`);
    this.mem = mem;
    this.alg = alg;
    this.seed = seed & U64;
  }

  /**
   * Hash `lens.length` chunks laid end to end from `addr` (device memory): one 32-byte record per
   * chunk into `out` at 32 * i (a fresh array when not given).
   */
  hashRun(addr: number, lens: ArrayLike<number>, out = new Uint8Array(lens.length * DEDUP_HASH_BYTES)): Uint8Array {
    const n = lens.length;
    if (this.alg === 'sha256') {
      const u8 = this.mem.u8();
      let at = addr;
      for (let i = 0; i < n; i++) {
        const len = lens[i]!;
        out.set(createHash('sha256').update(u8.subarray(at, at + len)).digest(), i * DEDUP_HASH_BYTES);
        at += len;
      }
      return out;
    }
    let at = addr;
    for (let i = 0; i < n; i += BATCH) {
      const m = this.#stage(lens, i);
      at += Number(this.mem.kernels.xxh128Chunks(at, this.#lens, m, this.seed, this.#out));
      this.#collect(out, i, m);
    }
    return out;
  }

  /** hashRun with the XXH3 batches on a pool thread (SHA-256 runs here). */
  async hashRunOn(pool: { run(fn: string, args: Array<number | bigint>): Promise<unknown> }, addr: number, lens: ArrayLike<number>): Promise<Uint8Array> {
    const n = lens.length;
    const out = new Uint8Array(n * DEDUP_HASH_BYTES);
    if (this.alg === 'sha256') return this.hashRun(addr, lens, out);
    let at = addr;
    for (let i = 0; i < n; i += BATCH) {
      const m = this.#stage(lens, i);
      at += Number(await pool.run('xxh128Chunks', [at, this.#lens, m, this.seed, this.#out]));
      this.#collect(out, i, m);
    }
    return out;
  }

  /** Lengths i.. of one batch into the kernel's length array; returns the batch size. */
  #stage(lens: ArrayLike<number>, i: number): number {
    const m = Math.min(BATCH, lens.length - i);
    this.#reserve(m);
    const dv = this.mem.dataView();
    for (let j = 0; j < m; j++) dv.setUint32(this.#lens + 4 * j, lens[i + j]!, true);
    return m;
  }

  /** The batch's 16-byte digests into 32-byte records (the upper 16 bytes stay zero). */
  #collect(out: Uint8Array, i: number, m: number): void {
    const u8 = this.mem.u8();
    for (let j = 0; j < m; j++) {
      const o = (i + j) * DEDUP_HASH_BYTES;
      out.set(u8.subarray(this.#out + 16 * j, this.#out + 16 * j + 16), o);
      out.fill(0, o + 16, o + DEDUP_HASH_BYTES);
    }
  }

  /** One chunk's 32-byte record. */
  hashOne(addr: number, len: number): Uint8Array {
    return this.hashRun(addr, [len]);
  }

  free(): void {
    if (this.#cap) {
      this.mem.free(this.#lens);
      this.mem.free(this.#out);
      this.#cap = 0;
    }
  }

  #reserve(n: number): void {
    if (n <= this.#cap) return;
    this.free();
    const cap = Math.max(n, 256);
    this.#lens = this.mem.alloc(cap * 4);
    this.#out = this.mem.alloc(cap * 16);
    this.#cap = cap;
  }
}
