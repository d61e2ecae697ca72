// ChunkMap: the TypeScript face of a hash-tracked landing zone (assembly/chunkhash.ts). It lays
// out the map record (src/wire/spec.ts "Dedup (M4)": dedupMapHdr, dedupChunk, done list) in the
// memory's arena, arms it for a list of expected chunks, and reads back what the kernel did.
//
// Who advances it: placement. Once the engine's place() is hooked (docs/dedup.md, "Hooking into
// place()"), every segment placed into the zone advances the map inside the same WASM call; until
// then, and on data-plane workers, hashSegments() runs chunkHashBatch over {to, len} records, one
// JS→WASM call per batch. Either way, takeDone() returns the chunks that became final since the
// last call, in completion order, with no scan over the map.
import {
  DEDUP_CHUNK, DEDUP_HASH_DESC, DEDUP_MAP_HDR, DEDUP_MAP_MAGIC, DedupArmStatus, DedupChunkFlag, DedupChunkStatus,
} from '../wire/dedup-spec.js';
import { setDedupHashDescLen, setDedupHashDescMap, setDedupHashDescRsvd, setDedupHashDescTo } from '../wire/dedup-fields.gen.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { DedupMemory } from './types.js';

const H = DEDUP_MAP_HDR.fields;
const C = DEDUP_CHUNK.fields;
const HDR = DEDUP_MAP_HDR.size;
const REC = DEDUP_CHUNK.size;
const DESC = DEDUP_HASH_DESC.size;
/** Segments one hashSegments() call hands the kernel at a time. */
const DESC_BATCH = 256;
const U64 = (1n << 64n) - 1n;

export interface ExpectedChunk {
  len: number;
  /** XXH3-128 as the kernels return it: high64 << 64 | low64. */
  hash: bigint;
}

export interface ChunkMapStats {
  chunks: number;
  done: number;
  ok: number;
  mismatch: number;
  /** Intervals dropped because a chunk's out-of-order record was full (finish() completes those chunks). */
  overflow: number;
  /** Segments that wrote bytes already hashed (their chunks end as mismatches). */
  rewrites: number;
  bytesHashed: number;
  segments: number;
  outside: number;
}

export const ChunkStatus = DedupChunkStatus;

/** Bytes a map for `capacity` chunks takes. */
export const chunkMapBytes = (capacity: number): number => HDR + capacity * REC + capacity * 4;
/**
 * Bytes of a block a caller gives a map for `capacity` chunks (the map and its segment
 * descriptors, 64-aligned): a receiver takes one block for all its slots' maps, one allocation
 * (a blocking call to a NIC thread) instead of two per slot.
 */
export const chunkMapBlockBytes = (capacity: number): number => ((chunkMapBytes(capacity) + 63) & ~63) + DESC_BATCH * DESC;

export class ChunkMap {
  readonly mem: DedupMemory;
  /** Address of the map (dedupMapHdr) in the memory. */
  readonly addr: number;
  readonly capacity: number;
  readonly #desc: number;
  #doneSeen = 0;
  #count = 0;
  #freed = false;
  /** The memory is the caller's (`block`): free() leaves it allocated. */
  readonly #borrowed: boolean;

  /**
   * A map with room for `capacity` chunks, for a zone of `zoneLen` bytes at `zoneAddr`; in
   * `block` (64-aligned, chunkMapBlockBytes(capacity) bytes the caller owns and frees) when
   * given, else in memory of its own.
   */
  constructor(mem: DedupMemory, zoneAddr: number, zoneLen: number, capacity: number, seed: bigint = 0n, block?: number) {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > 1 << 22) throw new SabreError(ErrorCode.InvalidArgument, 'chunk map capacity must be 1..2^22');
    if (!Number.isInteger(zoneAddr) || zoneAddr < 0 || !Number.isInteger(zoneLen) || zoneLen < 0 || zoneAddr + zoneLen > 2 ** 32) {
      throw new SabreError(ErrorCode.InvalidArgument, 'chunk map zone must lie in the 32-bit memory');
    }
    this.mem = mem;
    this.capacity = capacity;
    this.#borrowed = block !== undefined;
    this.addr = block ?? mem.alloc(chunkMapBytes(capacity), 64);
    this.#desc = block !== undefined ? block + ((chunkMapBytes(capacity) + 63) & ~63) : mem.alloc(DESC_BATCH * DESC, 64);
    const dv = mem.dataView();
    for (let i = 0; i < HDR; i += 4) dv.setUint32(this.addr + i, 0, true);
    dv.setUint32(this.addr + H.magic.offset, DEDUP_MAP_MAGIC, true);
    dv.setUint32(this.addr + H.zoneBase.offset, zoneAddr, true);
    dv.setUint32(this.addr + H.zoneLen.offset, zoneLen, true);
    dv.setBigUint64(this.addr + H.seed.offset, seed & U64, true);
  }

  /** Expect these chunks, packed from the zone's start; every stream restarts. */
  arm(chunks: readonly ExpectedChunk[]): void {
    // The hash as the record field holds it (low64 then high64, little-endian), one scratch.
    const rec = new Uint8Array(16);
    const dv = new DataView(rec.buffer);
    this.armRecords(chunks.length, (k) => chunks[k]!.len, (k) => {
      dv.setBigUint64(0, chunks[k]!.hash & U64, true);
      dv.setBigUint64(8, (chunks[k]!.hash >> 64n) & U64, true);
      return [rec, 0];
    });
  }

  /**
   * arm() from 32-byte hash records (dedupEntry.hash: the XXH3-128 value's low64 then high64,
   * little-endian, is exactly the map's expected field): chunk k is `lens[k]` bytes, its record at
   * `rec(k)`. No value is decoded per chunk.
   */
  armRecords(count: number, len: (k: number) => number, rec: (k: number) => readonly [Uint8Array, number]): void {
    this.#live();
    if (count > this.capacity) throw new SabreError(ErrorCode.LimitExceeded, `chunk map holds ${this.capacity} chunks, ${count} given`);
    const dv = this.mem.dataView();
    const u8 = this.mem.u8();
    dv.setUint32(this.addr + H.chunkCount.offset, count, true);
    let at = 0;
    for (let k = 0; k < count; k++) {
      const r = this.#rec(k);
      const l = len(k);
      const [h, o] = rec(k);
      dv.setUint32(r + C.start.offset, at, true);
      dv.setUint32(r + C.len.offset, l, true);
      u8.set(h.subarray(o, o + 16), r + C.expected.offset);
      at += l;
    }
    const st = this.mem.kernels.chunkMapArm(this.addr);
    if (st !== DedupArmStatus.Ok) throw new SabreError(ErrorCode.InvalidArgument, `chunk map rejected the chunk list (status ${st}: lengths must be > 0 and fit the zone)`);
    this.#count = count;
    this.#doneSeen = 0;
  }

  get count(): number {
    return this.#count;
  }

  /** One placed segment [to, to + len) (absolute addresses). Returns chunks that became final. */
  hashSegment(to: number, len: number): number {
    this.#live();
    return this.mem.kernels.chunkHashSegment(this.addr, to, len) >>> 0;
  }

  /** A batch of placed segments, as [to, len] pairs: chunkHashBatch, DESC_BATCH per call. */
  hashSegments(segs: ReadonlyArray<readonly [number, number]>): number {
    this.#live();
    const dv = this.mem.dataView();
    let done = 0;
    for (let i = 0; i < segs.length; i += DESC_BATCH) {
      const n = Math.min(DESC_BATCH, segs.length - i);
      for (let j = 0; j < n; j++) {
        const d = this.#desc + j * DESC;
        setDedupHashDescMap(dv, d, this.addr);
        setDedupHashDescTo(dv, d, segs[i + j]![0]);
        setDedupHashDescLen(dv, d, segs[i + j]![1]);
        setDedupHashDescRsvd(dv, d, 0);
      }
      done += this.mem.kernels.chunkHashBatch(this.#desc, n) >>> 0;
    }
    return done;
  }

  /** Every byte of the chunks has landed: finish the chunks the watermark has not reached. */
  finish(): number {
    this.#live();
    return this.mem.kernels.chunkMapFinish(this.addr) >>> 0;
  }

  /** Chunk indices that became final since the last call, in completion order. */
  takeDone(): number[] {
    this.#live();
    const dv = this.mem.dataView();
    const done = dv.getUint32(this.addr + H.doneCount.offset, true);
    const list = this.addr + HDR + this.#count * REC;
    const out: number[] = [];
    for (let k = this.#doneSeen; k < done; k++) out.push(dv.getUint32(list + 4 * k, true));
    this.#doneSeen = done;
    return out;
  }

  status(i: number): number {
    return this.mem.dataView().getUint32(this.#rec(this.#index(i)) + C.status.offset, true);
  }

  /** Bytes of chunk i's contiguous prefix already hashed (its watermark). */
  mark(i: number): number {
    return this.mem.dataView().getUint32(this.#rec(this.#index(i)) + C.mark.offset, true);
  }

  /** Bytes of chunk i recorded as landed beyond the watermark. */
  pending(i: number): number {
    return this.mem.dataView().getUint32(this.#rec(this.#index(i)) + C.landed.offset, true);
  }

  flags(i: number): { overflow: boolean; tainted: boolean } {
    const f = this.mem.dataView().getUint32(this.#rec(this.#index(i)) + C.flags.offset, true);
    return { overflow: (f & DedupChunkFlag.Overflow) !== 0, tainted: (f & DedupChunkFlag.Tainted) !== 0 };
  }

  /** Chunk i's digest (valid once its status is not Pending). */
  digest(i: number): bigint {
    const dv = this.mem.dataView();
    const r = this.#rec(this.#index(i));
    return (dv.getBigUint64(r + C.digest.offset + 8, true) << 64n) | dv.getBigUint64(r + C.digest.offset, true);
  }

  /** Offset of chunk i in the zone. */
  start(i: number): number {
    return this.mem.dataView().getUint32(this.#rec(this.#index(i)) + C.start.offset, true);
  }

  stats(): ChunkMapStats {
    const dv = this.mem.dataView();
    const u = (f: { offset: number }): number => dv.getUint32(this.addr + f.offset, true);
    return {
      chunks: u(H.chunkCount), done: u(H.doneCount), ok: u(H.okCount), mismatch: u(H.mismatchCount),
      overflow: u(H.overflowCount), rewrites: u(H.rewriteCount),
      bytesHashed: Number(dv.getBigUint64(this.addr + H.bytesHashed.offset, true)),
      segments: u(H.segments), outside: u(H.outside),
    };
  }

  free(): void {
    if (this.#freed) return;
    this.#freed = true;
    this.mem.dataView().setUint32(this.addr + H.magic.offset, 0, true); // a stale hookup finds no map
    if (this.#borrowed) return;
    this.mem.free(this.addr);
    this.mem.free(this.#desc);
  }

  #rec(i: number): number {
    return this.addr + HDR + i * REC;
  }

  #index(i: number): number {
    if (!Number.isInteger(i) || i < 0 || i >= this.#count) throw new SabreError(ErrorCode.InvalidArgument, `no chunk ${i} in this map`);
    return i;
  }

  #live(): void {
    if (this.#freed) throw new SabreError(ErrorCode.Closed, 'chunk map was freed');
  }
}
