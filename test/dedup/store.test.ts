// The chunk store: per-peer scopes (a peer's chunks never answer another peer's lookups), the
// byte budget and the entry bound pushed past (LRU eviction, counted), pins that survive
// eviction and make inserts refuse when nothing else is left, shared stores (sha256 only;
// per-scope answers over bytes kept once, evicting as if unshared), and ingest() agreeing with an
// independent chunk + hash of the same bytes.
import { xxh3 } from '@node-rs/xxhash';
import { createHash, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { ChunkHasher, xxhBytes } from '../../src/dedup/hash.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { ErrorCode } from '../../src/core/errors.js';
import { chunkLengths } from '../../src/kernels/cdc.js';

let dm: DeviceMemory;
let src: number;
const SRC = 1 << 20;

beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 32 << 20, maximumBytes: 128 << 20, workerSlots: 0 });
  src = dm.alloc(SRC);
  dm.u8().set(randomBytes(SRC), src);
});

const rec = (addr: number, len: number): Uint8Array => xxhBytes(xxh3.xxh128(dm.u8().subarray(addr, addr + len)));

describe('chunk store', () => {
  it('scopes chunks per peer and copies them into its own memory', () => {
    const store = new ChunkStore(dm);
    const h = rec(src, 5000);
    expect(store.put('peer-a', h, src, 5000)).toBe(true);
    expect(store.has('peer-a', h)).toBe(true);
    expect(store.has('peer-b', h)).toBe(false); // another peer's transfer cannot resolve to it
    const ref = store.get('peer-a', h)!;
    expect(ref.addr).not.toBe(src);
    expect(dm.u8().subarray(ref.addr, ref.addr + 5000)).toEqual(dm.u8().subarray(src, src + 5000));
    expect(store.put('peer-a', h, src, 5000)).toBe(true);
    expect(store.stats()).toMatchObject({ entries: 1, bytes: 5000, scopes: 1, inserts: 1, duplicates: 1, hits: 2, misses: 1 }); // has() and get() both count
    store.close();
  });

  it('stays within its byte budget and entry bound, evicting least recently used (pushed past both)', () => {
    const store = new ChunkStore(dm, { budgetBytes: 40_000, maxEntries: 6 });
    const hs: Uint8Array[] = [];
    for (let i = 0; i < 10; i++) {
      const h = rec(src + i * 10_000, 10_000);
      hs.push(h);
      expect(store.put('p', h, src + i * 10_000, 10_000)).toBe(true);
      if (i === 2) store.get('p', hs[0]!); // chunk 0 becomes most recent
      expect(store.stats().bytes).toBeLessThanOrEqual(40_000);
    }
    // Budget: 4 chunks of 10 000. The last four inserted remain; chunk 0 was touched but long ago.
    expect(hs.map((h) => store.has('p', h))).toEqual([false, false, false, false, false, false, true, true, true, true]);
    expect(store.stats()).toMatchObject({ entries: 4, evictions: 6, evictedBytes: 60_000 });
    const small = new ChunkStore(dm, { maxEntries: 3 });
    for (let i = 0; i < 8; i++) small.put('p', rec(src + i * 100, 100), src + i * 100, 100);
    expect(small.stats()).toMatchObject({ entries: 3, evictions: 5 });
    // The touched entry survives eviction while an untouched older one goes.
    const t = new ChunkStore(dm, { budgetBytes: 30_000 });
    for (let i = 0; i < 3; i++) t.put('p', hs[i]!, src + i * 10_000, 10_000);
    t.get('p', hs[0]!);
    t.put('p', hs[3]!, src + 30_000, 10_000);
    expect([0, 1, 2, 3].map((i) => t.has('p', hs[i]!))).toEqual([true, false, true, true]);
    for (const s of [store, small, t]) s.close();
  });

  it('never evicts a pinned chunk; refuses an insert when only pinned ones are left', () => {
    const store = new ChunkStore(dm, { budgetBytes: 20_000 });
    const a = rec(src, 10_000), b = rec(src + 10_000, 10_000), c = rec(src + 20_000, 10_000);
    store.put('p', a, src, 10_000);
    store.put('p', b, src + 10_000, 10_000);
    expect(store.pin('p', a)).toBe(true);
    expect(store.pin('p', b)).toBe(true);
    expect(store.put('p', c, src + 20_000, 10_000)).toBe(false);
    expect(store.stats()).toMatchObject({ refused: 1, pinned: 2, entries: 2 });
    store.unpin('p', a);
    expect(store.put('p', c, src + 20_000, 10_000)).toBe(true);
    expect([store.has('p', a), store.has('p', b), store.has('p', c)]).toEqual([false, true, true]);
    expect(store.put('p', rec(src, 30_000), src, 30_000)).toBe(false); // larger than the budget
    store.close();
  });

  it('a shared store must key by sha256, answers each scope only about its own chunks, and stores their bytes once', () => {
    expect(() => new ChunkStore(dm, { shared: true })).toThrow(expect.objectContaining({ code: ErrorCode.InvalidArgument }));
    const store = new ChunkStore(dm, { shared: true, hash: 'sha256' });
    const h = store.hasher.hashOne(src, 4000);
    expect(Buffer.from(h)).toEqual(createHash('sha256').update(dm.u8().subarray(src, src + 4000)).digest());
    store.put('a', h, src, 4000);
    expect(store.has('b', h)).toBe(false); // b never sent it: b cannot learn that a did
    expect(store.put('b', h, src, 4000)).toBe(true);
    expect(store.has('b', h)).toBe(true);
    expect(store.get('a', h)!.addr).toBe(store.get('b', h)!.addr); // one copy
    expect(store.stats()).toMatchObject({ entries: 2, bytes: 8000, copies: 1, storedBytes: 4000, sharedInserts: 1, scopes: 2 });
    // The copy lives while any scope holds it.
    store.dropScope('a');
    expect(store.get('b', h)).toBeDefined();
    expect(store.stats()).toMatchObject({ entries: 1, copies: 1, storedBytes: 4000 });
    store.dropScope('b');
    expect(store.stats()).toMatchObject({ entries: 0, copies: 0, storedBytes: 0, bytes: 0 });
    store.close();
  });

  it('a shared store evicts as if unshared: what a scope keeps never depends on what another scope stored', () => {
    const c = (i: number) => [src + i * 10_000, 10_000] as const;
    const seen = [3, 4].map((aliceChunk) => {
      const store = new ChunkStore(dm, { shared: true, hash: 'sha256', budgetBytes: 30_000, maxEntries: 100 });
      const h = (i: number) => store.hasher.hashOne(...c(i));
      store.put('alice', h(aliceChunk), ...c(aliceChunk));
      for (const i of [0, 1, 3]) store.put('bob', h(i), ...c(i)); // bob's third chunk is alice's in the first run
      const kept = [0, 1, 3].map((i) => store.has('bob', h(i)));
      const st = store.stats();
      store.close();
      return { kept, bytes: st.bytes, evictions: st.evictions, storedBytes: st.storedBytes };
    });
    expect(seen[0]!.kept).toEqual(seen[1]!.kept);
    expect(seen[0]!.evictions).toBe(seen[1]!.evictions);
    expect(seen[0]!.bytes).toBe(30_000);
    expect(seen[0]!.storedBytes).toBeLessThanOrEqual(30_000);
  });

  it('a shared store stays within maxEntries and its budget pushed past both by two scopes of the same chunks', () => {
    const store = new ChunkStore(dm, { shared: true, hash: 'sha256', budgetBytes: 50_000, maxEntries: 8 });
    for (const scope of ['a', 'b', 'c'])
      for (let i = 0; i < 6; i++) store.put(scope, store.hasher.hashOne(src + i * 5000, 5000), src + i * 5000, 5000);
    const st = store.stats();
    expect(st.entries).toBeLessThanOrEqual(8);
    expect(st.bytes).toBeLessThanOrEqual(50_000);
    expect(st.storedBytes).toBeLessThanOrEqual(st.bytes);
    expect(st.copies).toBeLessThanOrEqual(st.entries);
    expect(st.evictions).toBe(18 - st.entries);
    store.close();
    expect(store.stats()).toMatchObject({ entries: 0, copies: 0, storedBytes: 0 });
  });

  it('ingest chunks and hashes as an independent chunk + xxh3 of the same bytes', () => {
    const store = new ChunkStore(dm);
    const bytes = new Uint8Array(randomBytes(600_000));
    const cdc = { avg: 8192, key: new Uint8Array(32).fill(9) };
    const n = store.ingest('p', bytes, cdc);
    const lens = chunkLengths(bytes, cdc);
    expect(n).toBe(lens.length);
    let at = 0;
    for (const len of lens) {
      expect(store.has('p', xxhBytes(xxh3.xxh128(bytes.subarray(at, at + len))))).toBe(true);
      at += len;
    }
    // The batch hasher agrees with one-at-a-time XXH3-128 (xxh128Chunks over a run).
    const hasher = new ChunkHasher(dm);
    const run = hasher.hashRun(src, [1, 100, 5000, 70_000]);
    let off = src;
    [1, 100, 5000, 70_000].forEach((len, i) => {
      expect(run.subarray(32 * i, 32 * i + 32)).toEqual(rec(off, len));
      off += len;
    });
    hasher.free();
    store.close();
  });

  it('ingest by reference: entries point into the caller\'s bytes, cost no device memory or budget, and are bounded by maxEntries', () => {
    // Larger than one ingest step (4 MiB), so chunks straddle the steps' seams.
    const bytes = new Uint8Array(randomBytes(9 << 20));
    const cdc = { avg: 8192, key: new Uint8Array(32).fill(3) };
    const lens = chunkLengths(bytes, cdc);
    const store = new ChunkStore(dm, { budgetBytes: 12_000 });
    const used = dm.stats().used;
    expect(store.ingest('p', bytes, cdc, { reference: true })).toBe(lens.length);
    let at = 0;
    for (const len of lens) {
      const ref = store.get('p', xxhBytes(xxh3.xxh128(bytes.subarray(at, at + len))))!;
      expect(ref.view?.buffer).toBe(bytes.buffer); // the caller's buffer, not a copy
      expect(ref.view!.byteOffset - bytes.byteOffset).toBe(at);
      expect(ref.view!.length).toBe(len);
      at += len;
    }
    expect(store.stats()).toMatchObject({ entries: lens.length, referenced: lens.length, referencedBytes: bytes.length, bytes: 0, copies: 0, storedBytes: 0 });
    // Only the hasher's small lengths/digests scratch stays (the store's, until close): the 9 MiB
    // never entered device memory and the step buffer is freed again.
    expect(dm.stats().used - used).toBeLessThan(64 << 10);
    // Copies obey the budget; making room for them never drops a reference (it frees no memory).
    for (let i = 0; i < 3; i++) expect(store.put('p', rec(src + i * 5000, 5000), src + i * 5000, 5000)).toBe(true);
    expect(store.stats()).toMatchObject({ referenced: lens.length, copies: 2, bytes: 10_000, evictions: 1 });
    expect(store.dropScope('p')).toBe(lens.length + 2);
    expect(store.stats()).toMatchObject({ entries: 0, referenced: 0, referencedBytes: 0 });
    // References count as entries: maxEntries bounds them (least recently used go first).
    const small = new ChunkStore(dm, { maxEntries: 100 });
    small.ingest('p', bytes, cdc, { reference: true });
    expect(small.stats()).toMatchObject({ entries: 100, referenced: 100, evictions: lens.length - 100 });
    // The same chunks through the copying ingest (same steps): same boundaries and hashes.
    const copying = new ChunkStore(dm, { budgetBytes: 16 << 20 });
    expect(copying.ingest('q', bytes, cdc)).toBe(lens.length);
    at = 0;
    for (const len of lens) {
      const ref = copying.get('q', xxhBytes(xxh3.xxh128(bytes.subarray(at, at + len))))!;
      expect(ref.view).toBeUndefined();
      expect(Buffer.compare(dm.u8().subarray(ref.addr, ref.addr + len), bytes.subarray(at, at + len))).toBe(0);
      at += len;
    }
    for (const s of [store, small, copying]) s.close();
  });
});
