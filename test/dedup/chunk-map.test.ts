// In-band chunk hashing (assembly/chunkhash.ts through src/dedup/chunk-map.ts). Segments are
// placed into a zone of device memory one at a time, as the engine's place() would, and the map
// is advanced with each: the chunk's hash state has moved before its last segment lands (no
// second pass), the final digest equals XXH3-128 of the chunk from two independent references
// (@node-rs/xxhash and sabre's one-shot xxh128 kernel), and the digest is the same for every
// arrival order (fast-check permutations), including orders that overflow the bounded
// out-of-order record (then finish() completes the chunk, counted).
import { xxh3 } from '@node-rs/xxhash';
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { PLACE_DESC_BYTES, PLACE_OUT_BYTES, PlaceStatus, writePlaceDesc } from '../../src/dataplane/descriptors.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { ChunkMap, ChunkStatus } from '../../src/dedup/chunk-map.js';
import { xxh128 } from '../../src/kernels/xxh128.js';

let dm: DeviceMemory;
let zone: number;
const ZONE = 1 << 20;

beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 16 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
  zone = dm.alloc(ZONE);
});

/** Chunk lengths summing to n, each in [lo, hi] except maybe the last. */
function lengths(n: number, lo: number, hi: number, seed: number): number[] {
  const out: number[] = [];
  let x = seed | 1;
  let left = n;
  while (left > 0) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    const l = Math.min(left, lo + (x % (hi - lo + 1)));
    out.push(l);
    left -= l;
  }
  return out;
}

function expectedChunks(src: Uint8Array, lens: number[]): Array<{ len: number; hash: bigint }> {
  let at = 0;
  return lens.map((len) => {
    const hash = xxh3.xxh128(src.subarray(at, at + len));
    at += len;
    return { len, hash };
  });
}

/** Segments [off, len] of n bytes cut at `mtu`. */
function segments(n: number, mtu: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let off = 0; off < n; off += mtu) out.push([off, Math.min(mtu, n - off)]);
  return out;
}

/** Place one segment the way the engine does (the payload copied into the zone), then hash it. */
function land(map: ChunkMap, src: Uint8Array, off: number, len: number): number {
  dm.u8().set(src.subarray(off, off + len), zone + off);
  return map.hashSegment(zone + off, len);
}

describe('in-band chunk hashing', () => {
  it('advances a chunk as its segments land, and its hash is ready at the last one', () => {
    const src = new Uint8Array(randomBytes(100_000));
    const lens = [30_000, 45_000, 25_000];
    const map = new ChunkMap(dm, zone, ZONE, 16);
    map.arm(expectedChunks(src, lens));
    dm.u8().fill(0, zone, zone + 100_000); // nothing has landed yet
    const segs = segments(100_000, 1400);
    let readyAt = -1;
    for (let s = 0; s < segs.length; s++) {
      const [off, len] = segs[s]!;
      const done = land(map, src, off, len);
      const end = off + len;
      if (end < 30_000) {
        // Chunk 0 is mid-way: its state holds exactly the bytes landed so far, not yet final.
        expect(map.mark(0)).toBe(end);
        expect(map.status(0)).toBe(ChunkStatus.Pending);
        expect(done).toBe(0);
      }
      if (end >= 30_000 && readyAt < 0) {
        readyAt = s;
        expect(map.status(0)).toBe(ChunkStatus.Ok); // the moment its last byte landed
        expect(map.takeDone()).toEqual([0]);
      }
    }
    expect(map.takeDone()).toEqual([1, 2]);
    for (let i = 0; i < 3; i++) {
      const at = lens.slice(0, i).reduce((a, b) => a + b, 0);
      const want = xxh3.xxh128(src.subarray(at, at + lens[i]!));
      expect(map.digest(i)).toBe(want);
      expect(xxh128(src.subarray(at, at + lens[i]!))).toBe(want);
    }
    // One pass: every byte was hashed exactly once.
    expect(map.stats()).toMatchObject({ chunks: 3, done: 3, ok: 3, mismatch: 0, bytesHashed: 100_000, overflow: 0, rewrites: 0 });
    map.free();
  });

  it('gives the same hash for every arrival order (permutations), out-of-order bytes hashed once the prefix reaches them', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200_000 }),
        fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        fc.constantFrom(64, 1000, 1400, 8972),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 300 }),
        (n, seed, mtu, keys) => {
          const src = new Uint8Array(randomBytes(n));
          const lens = lengths(n, 1, 40_000, seed);
          const chunks = expectedChunks(src, lens);
          const map = new ChunkMap(dm, zone, ZONE, lens.length);
          map.arm(chunks);
          const segs = segments(n, mtu);
          const order = segs.map((s, i) => [keys[i % keys.length]! + i * 1e-9, s] as const).sort((a, b) => a[0] - b[0]).map((x) => x[1]);
          let done = 0;
          for (const [off, len] of order) done += land(map, src, off, len);
          const st = map.stats();
          // Only an overflowed out-of-order record leaves chunks for finish(); never a wrong hash.
          if (st.overflow === 0) expect(done).toBe(lens.length);
          done += map.finish();
          expect(done).toBe(lens.length);
          expect(new Set(map.takeDone()).size).toBe(lens.length);
          for (let i = 0; i < lens.length; i++) {
            expect(map.status(i)).toBe(ChunkStatus.Ok);
            expect(map.digest(i)).toBe(chunks[i]!.hash);
          }
          expect(map.stats()).toMatchObject({ ok: lens.length, mismatch: 0, bytesHashed: n, rewrites: 0 });
          map.free();
        },
      ),
      { numRuns: 60 },
    );
  });

  it('holds out-of-order bytes beyond the watermark and hashes them when the gap fills', () => {
    const src = new Uint8Array(randomBytes(10_000));
    const map = new ChunkMap(dm, zone, ZONE, 1);
    map.arm(expectedChunks(src, [10_000]));
    expect(land(map, src, 2000, 1000)).toBe(0);
    expect(land(map, src, 6000, 4000)).toBe(0);
    expect(map.mark(0)).toBe(0);
    expect(map.pending(0)).toBe(5000);
    expect(land(map, src, 0, 2000)).toBe(0); // reaches [2000, 3000) too
    expect(map.mark(0)).toBe(3000);
    expect(map.pending(0)).toBe(4000);
    expect(land(map, src, 3000, 3000)).toBe(1); // fills the gap: everything hashed, final
    expect(map.digest(0)).toBe(xxh3.xxh128(src));
    expect(map.stats().bytesHashed).toBe(10_000);
    map.free();
  });

  it('a corrupted segment makes only its chunk a mismatch; a rewrite after hashing taints the chunk', () => {
    const src = new Uint8Array(randomBytes(50_000));
    const lens = [20_000, 20_000, 10_000];
    const map = new ChunkMap(dm, zone, ZONE, 4);
    map.arm(expectedChunks(src, lens));
    const bad = src.slice();
    bad[25_000] ^= 0x40;
    for (const [off, len] of segments(50_000, 1400)) land(map, bad, off, len);
    expect([map.status(0), map.status(1), map.status(2)]).toEqual([ChunkStatus.Ok, ChunkStatus.Mismatch, ChunkStatus.Ok]);
    // The peer writes chunk 0 again after it was verified: it must not stay "ok".
    land(map, bad.fill(7, 100, 200), 0, 1400);
    expect(map.status(0)).toBe(ChunkStatus.Mismatch);
    expect(map.flags(0).tainted).toBe(true);
    expect(map.stats()).toMatchObject({ ok: 1, mismatch: 2, rewrites: 1 });
    map.free();
  });

  it('ignores bytes outside the zone and clips segments that straddle its ends', () => {
    const src = new Uint8Array(randomBytes(4096));
    const map = new ChunkMap(dm, zone + 1024, 4096, 2);
    map.arm(expectedChunks(src, [2048, 2048]));
    dm.u8().set(src, zone + 1024);
    expect(map.hashSegment(zone, 512)).toBe(0); // wholly before
    expect(map.hashSegment(zone + 1024 + 4096, 100)).toBe(0); // wholly after
    expect(map.hashSegment(zone, 1024 + 3000)).toBe(1); // straddles the start: chunk 0 done, chunk 1 partly
    expect(map.hashSegment(zone + 1024 + 3000, 100_000)).toBe(1); // straddles the end
    expect(map.stats()).toMatchObject({ ok: 2, outside: 2, segments: 4 });
    map.free();
  });

  it('runs in the same batch as the place() kernel: placed segments then chunkHashBatch over the same {to, len}', () => {
    // One region in the region table, payloads staged, one place() call for the batch, then one
    // chunkHashBatch call over the batch's descriptors — what the engine's hookup does.
    const idx = dm.regions.allocIndex();
    const stag = dm.regions.nextStag(idx);
    dm.regions.write(idx, { base: zone, length: ZONE, stag, pd: 3, access: 2 });
    const src = new Uint8Array(randomBytes(64_000));
    const lens = lengths(64_000, 4000, 20_000, 99);
    const map = new ChunkMap(dm, zone, ZONE, lens.length);
    map.arm(expectedChunks(src, lens));
    const segs = segments(64_000, 1400).reverse(); // worst case for the watermark
    const stage = dm.alloc(64_000);
    const descs = dm.alloc(segs.length * PLACE_DESC_BYTES);
    const outs = dm.alloc(segs.length * PLACE_OUT_BYTES);
    dm.u8().set(src, stage);
    segs.forEach(([off, len], i) => writePlaceDesc(dm.dataView(), descs + i * PLACE_DESC_BYTES, { src: stage + off, len, stag, pd: 3, to: zone + off, access: 2, tag: i }));
    dm.u8().fill(0, zone, zone + 64_000);
    const placed = dm.kernels.place(descs, segs.length, dm.regions.base, dm.regions.capacity, outs);
    expect(placed).toBe(segs.length);
    const ok = segs.filter((_, i) => dm.dataView().getUint32(outs + i * PLACE_OUT_BYTES + 4, true) === PlaceStatus.Placed);
    map.hashSegments(ok.map(([off, len]) => [zone + off, len] as const));
    map.finish(); // reversed order overflows the 8-interval record of the larger chunks
    for (let i = 0; i < lens.length; i++) expect(map.status(i)).toBe(ChunkStatus.Ok);
    expect(dm.u8().subarray(zone, zone + 64_000)).toEqual(src);
    map.free();
    dm.regions.freeIndex(idx);
  });

  it('rejects a chunk list that does not fit its zone, and a freed map', () => {
    const map = new ChunkMap(dm, zone, 1000, 4);
    expect(() => map.arm([{ len: 600, hash: 0n }, { len: 600, hash: 0n }])).toThrow(/fit the zone/);
    expect(() => map.arm([{ len: 0, hash: 0n }])).toThrow(/lengths must be > 0/);
    expect(() => map.arm(Array.from({ length: 5 }, () => ({ len: 1, hash: 0n })))).toThrow(/holds 4 chunks/);
    map.free();
    expect(() => map.hashSegment(zone, 10)).toThrow(/freed/);
  });
});
