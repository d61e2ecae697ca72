// The chunk store (M4): chunks a device has received or ingested, kept in its device memory so
// assembly is a WASM copy, under a memory budget with least-recently-used eviction.
//
// Scoping: every entry belongs to a scope (by default one per peer: the receiver names it, e.g.
// from the peer's address or an authenticated identity). A lookup only sees its own scope, so a
// peer can never make another peer's transfer resolve to bytes it supplied — with a
// non-cryptographic 128-bit hash, a peer that chooses bytes could build a colliding chunk, but
// only ever against itself. A store shared across scopes (`shared: true`) must key by SHA-256.
//
// Entries are only ever inserted with a hash the store computed itself over the bytes (a verified
// chunk's digest, or ingest()), never with a hash a peer announced.
//
// Bounds (a peer grows this table): `budgetBytes` of chunk bytes and `maxEntries` entries; past
// either, the least recently used unpinned entries go. Entries a transfer in progress relies on
// are pinned (the receiver told its peer it holds them) and are never evicted; when only pinned
// entries are left, an insert is refused and counted.
import { randomBytes } from 'node:crypto';
import { dedupTotals } from './stats.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { type CdcOptions } from '../kernels/cdc.js';
import { DEDUP_COPY_DESC } from '../wire/spec.js';
import { DeviceChunker } from './chunker.js';
import { ChunkHasher, DEDUP_HASH_BYTES, type HashAlgName, hashKey } from './hash.js';
import type { ChunkStoreStats, DedupMemory } from './types.js';

export type { ChunkStoreStats } from './types.js';

export interface ChunkStoreOptions {
  /** Bytes of chunk data the store may hold (device memory). Default 64 MiB. */
  budgetBytes?: number;
  /** Entries the store may hold, whatever their size. Default 1 Mi. */
  maxEntries?: number;
  /** Chunk identity: 'xxh3-128' (default; per-peer scopes) or 'sha256' (required when shared). */
  hash?: HashAlgName;
  /** One scope for every peer. Needs hash 'sha256'. */
  shared?: boolean;
  /** XXH3-128 seed of chunk identities (a secret per store makes identities unpredictable). Default 0. */
  seed?: bigint;
}

/** A store's configuration when nothing is said: the one place these defaults are written. */
export const STORE_DEFAULTS = { hash: 'xxh3-128', shared: false, budgetBytes: 64 << 20, maxEntries: 1 << 20 } as const;

interface Entry {
  readonly scope: string;
  readonly key: string;
  readonly addr: number;
  readonly len: number;
  pins: number;
}

export interface ChunkRef {
  readonly addr: number;
  readonly len: number;
}

const COPY = DEDUP_COPY_DESC.size;
const COPY_BATCH = 512;

export class ChunkStore {
  readonly mem: DedupMemory;
  readonly hash: HashAlgName;
  readonly shared: boolean;
  readonly budgetBytes: number;
  readonly maxEntries: number;
  readonly hasher: ChunkHasher;
  /** Insertion order is recency order: a touched entry is deleted and set again. */
  readonly #lru = new Map<string, Entry>();
  readonly #scopes = new Map<string, number>();
  #bytes = 0;
  #pinned = 0;
  #copyDesc = 0;
  readonly #s = { hits: 0, misses: 0, inserts: 0, duplicates: 0, evictions: 0, evictedBytes: 0, refused: 0 };

  constructor(mem: DedupMemory, o: ChunkStoreOptions = {}) {
    const budget = o.budgetBytes ?? STORE_DEFAULTS.budgetBytes;
    const maxEntries = o.maxEntries ?? STORE_DEFAULTS.maxEntries;
    if (!Number.isSafeInteger(budget) || budget < 0) throw new SabreError(ErrorCode.InvalidArgument, 'budgetBytes must be a non-negative integer');
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 0) throw new SabreError(ErrorCode.InvalidArgument, 'maxEntries must be a non-negative integer');
    const hash = o.hash ?? STORE_DEFAULTS.hash;
    if (o.shared && hash !== 'sha256') {
      throw new SabreError(ErrorCode.InvalidArgument, 'a store shared between peers must key chunks by sha256 (xxh3-128 is not collision-resistant against chosen bytes)');
    }
    this.mem = mem;
    this.hash = hash;
    this.shared = o.shared ?? STORE_DEFAULTS.shared;
    this.budgetBytes = budget;
    this.maxEntries = maxEntries;
    this.hasher = new ChunkHasher(mem, hash, o.seed ?? 0n);
    dedupTotals(mem).stores.add(this); // dev.stats().dedup.store sums the open stores
  }

  /**
   * The content-defined chunking key of a shared store: one scope for everyone, so every
   * sender chunks with one key (per-sender keys would make no two peers' chunks match). Made
   * on first use, random: still secret from outsiders. A per-peer store has none (each scope
   * chunks with its own key).
   */
  get sharedChunkKey(): Uint8Array {
    if (!this.shared) throw new SabreError(ErrorCode.InvalidState, 'only a shared store has one chunking key');
    return (this.#sharedKey ??= new Uint8Array(randomBytes(32)));
  }

  #sharedKey: Uint8Array | undefined;

  #scope(scope: string): string {
    if (typeof scope !== 'string') throw new SabreError(ErrorCode.InvalidArgument, 'scope must be a string');
    return this.shared ? '' : scope;
  }

  #id(scope: string, hash: Uint8Array, at: number): string {
    return `${this.#scope(scope)}\u0000${hashKey(hash, at)}`;
  }

  /** Does `scope` hold the chunk with this 32-byte hash record (at `at` in `hash`)? Counts a hit or miss. */
  has(scope: string, hash: Uint8Array, at = 0): boolean {
    const ok = this.#lru.has(this.#id(scope, hash, at));
    if (ok) this.#s.hits++;
    else this.#s.misses++;
    return ok;
  }

  /** The chunk's place in device memory, made most recently used; undefined if absent. Counts a hit or miss. */
  get(scope: string, hash: Uint8Array, at = 0): ChunkRef | undefined {
    const id = this.#id(scope, hash, at);
    const e = this.#lru.get(id);
    if (!e) {
      this.#s.misses++;
      return undefined;
    }
    this.#s.hits++;
    this.#lru.delete(id);
    this.#lru.set(id, e);
    return e;
  }

  /** Keep the chunk until unpin (a transfer told its peer it holds it). False if absent. */
  pin(scope: string, hash: Uint8Array, at = 0): boolean {
    const e = this.#lru.get(this.#id(scope, hash, at));
    if (!e) return false;
    if (e.pins++ === 0) this.#pinned++;
    return true;
  }

  unpin(scope: string, hash: Uint8Array, at = 0): void {
    const e = this.#lru.get(this.#id(scope, hash, at));
    if (e && e.pins > 0 && --e.pins === 0) this.#pinned--;
  }

  /**
   * Insert `len` bytes at `addr` (device memory) under the hash record `hash` — which the caller
   * computed over exactly these bytes (a verified digest). Copies them into the store (WASM).
   * Returns false when refused (too large for the budget, or only pinned entries to evict).
   */
  put(scope: string, hash: Uint8Array, addr: number, len: number, at = 0): boolean {
    const ok = this.putMany(scope, hash, [{ addr, len }], at);
    return ok === 1;
  }

  /**
   * Insert several chunks (hash records at `at + 32 * i` in `hashes`), copied in one batch.
   * Returns how many the scope now holds of them (inserted or already there).
   */
  putMany(scope: string, hashes: Uint8Array, chunks: readonly ChunkRef[], at = 0): number {
    const copies: Array<[number, number, number]> = [];
    let held = 0;
    for (let i = 0; i < chunks.length; i++) {
      const { addr, len } = chunks[i]!;
      const id = this.#id(scope, hashes, at + i * DEDUP_HASH_BYTES);
      if (this.#lru.has(id)) {
        this.#s.duplicates++;
        held++;
        continue;
      }
      if (!this.#makeRoom(len)) {
        this.#s.refused++;
        continue;
      }
      let dst: number;
      try {
        dst = this.mem.alloc(Math.max(len, 1));
      } catch {
        this.#s.refused++;
        continue;
      }
      const e: Entry = { scope: this.#scope(scope), key: id, addr: dst, len, pins: 0 };
      this.#lru.set(id, e);
      this.#scopes.set(e.scope, (this.#scopes.get(e.scope) ?? 0) + 1);
      this.#bytes += len;
      this.#s.inserts++;
      held++;
      copies.push([dst, addr, len]);
    }
    this.copy(copies);
    return held;
  }

  /**
   * Chunk and insert bytes this side already trusts (an earlier version of a file: the chunk
   * source for rsync-style transfers). Uses the chunker the peer will use, so the boundaries
   * match. Returns the number of chunks the scope holds from it.
   */
  ingest(scope: string, bytes: Uint8Array, cdc: CdcOptions): number {
    if (!(bytes instanceof Uint8Array)) throw new SabreError(ErrorCode.InvalidArgument, 'ingest needs a Uint8Array');
    if (bytes.length === 0) return 0;
    const buf = this.mem.alloc(bytes.length);
    const chunker = new DeviceChunker(this.mem, cdc);
    try {
      this.mem.u8().set(bytes, buf);
      const lens = chunker.chunkAll(buf, bytes.length);
      const hashes = this.hasher.hashRun(buf, lens);
      const refs: ChunkRef[] = [];
      let at = buf;
      for (const len of lens) {
        refs.push({ addr: at, len });
        at += len;
      }
      return this.putMany(scope, hashes, refs);
    } finally {
      chunker.free();
      this.mem.free(buf);
    }
  }

  /** Run [dst, src, len] copies in device memory, batched through copyBatch. */
  copy(copies: ReadonlyArray<readonly [number, number, number]>): void {
    if (copies.length === 0) return;
    if (this.#copyDesc === 0) this.#copyDesc = this.mem.alloc(COPY_BATCH * COPY);
    for (let i = 0; i < copies.length; i += COPY_BATCH) {
      const n = Math.min(COPY_BATCH, copies.length - i);
      const dv = this.mem.dataView();
      for (let j = 0; j < n; j++) {
        const [dst, src, len] = copies[i + j]!;
        const d = this.#copyDesc + j * COPY;
        dv.setUint32(d, dst, true);
        dv.setUint32(d + 4, src, true);
        dv.setUint32(d + 8, len, true);
        dv.setUint32(d + 12, 0, true);
      }
      const done = this.mem.kernels.copyBatch(this.#copyDesc, n) >>> 0;
      if (done !== n) throw new SabreError(ErrorCode.InvalidArgument, 'dedup copy outside device memory');
    }
  }

  /** Drop every entry of a scope (a peer went away); pinned entries stay. */
  dropScope(scope: string): number {
    const s = this.#scope(scope);
    let n = 0;
    for (const e of [...this.#lru.values()]) {
      if (e.scope === s && e.pins === 0) {
        this.#evict(e);
        n++;
      }
    }
    return n;
  }

  stats(): ChunkStoreStats {
    return {
      entries: this.#lru.size, bytes: this.#bytes, budgetBytes: this.budgetBytes, maxEntries: this.maxEntries,
      scopes: this.#scopes.size, pinned: this.#pinned, ...this.#s,
    };
  }

  /** Free every unpinned entry and the store's scratch. */
  close(): void {
    for (const e of [...this.#lru.values()]) this.#evict(e, false);
    if (this.#copyDesc) this.mem.free(this.#copyDesc);
    this.#copyDesc = 0;
    this.hasher.free();
    dedupTotals(this.mem).stores.delete(this);
  }

  #makeRoom(len: number): boolean {
    if (len > this.budgetBytes || this.maxEntries === 0) return false;
    for (const e of this.#lru.values()) {
      if (this.#bytes + len <= this.budgetBytes && this.#lru.size < this.maxEntries) return true;
      if (e.pins === 0) this.#evict(e);
    }
    return this.#bytes + len <= this.budgetBytes && this.#lru.size < this.maxEntries;
  }

  #evict(e: Entry, count = true): void {
    this.#lru.delete(e.key);
    const left = (this.#scopes.get(e.scope) ?? 1) - 1;
    if (left === 0) this.#scopes.delete(e.scope);
    else this.#scopes.set(e.scope, left);
    this.#bytes -= e.len;
    if (e.pins > 0) this.#pinned--;
    this.mem.free(e.addr);
    if (count) {
      this.#s.evictions++;
      this.#s.evictedBytes += e.len;
    }
  }
}
