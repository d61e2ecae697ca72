// The chunk store (M4): chunks a device has received or ingested, kept in its device memory so
// assembly is a WASM copy, under a memory budget with least-recently-used eviction.
//
// Scoping: every entry belongs to a scope — a trust domain, by default one per peer (the receiver
// names it, e.g. from the peer's address or an authenticated identity). A lookup only sees its
// own scope's entries, and a scope only gets entries for chunks it sent itself (verified) or
// named as its basis (ingest). So a peer can never make another peer's transfer resolve to bytes
// it supplied, nor learn from the answers whether another peer holds a chunk.
//
// `shared: true` shares the *bytes*, not the answers: identical chunks (same SHA-256, same
// length) of different scopes are kept once in device memory, each scope holding its own entry
// that points at the one copy. Everything a peer can observe behaves as if the store were not
// shared: the budget counts every scope's entries at their full size (so evictions, and therefore
// later hits, never depend on what another scope holds), and an insert does the same work (an
// allocation and a copy) whether or not the bytes were already there. Only `storedBytes` and
// `sharedInserts`, local counters, show the saving. Keying the copy by a hash a peer can collide
// would let one peer's bytes stand for another's: shared stores key by SHA-256.
//
// Chunking keys: chunkKey(scope) is a per-scope key derived from a secret of the store, so each
// trust domain cuts at its own boundaries and no peer learns the key another peer's chunks were
// cut with (chunk lengths would otherwise fingerprint that peer's content).
//
// Entries are only ever inserted with a hash the store computed itself over the bytes (a verified
// chunk's digest, or ingest()), never with a hash a peer announced.
//
// Bounds (a peer grows these tables): `budgetBytes` of chunk bytes (counted per entry) and
// `maxEntries` entries; past either, the least recently used unpinned entries go. An ingest by
// reference (only ever of this side's own bytes) adds entries that point into the caller's
// buffer: they count in maxEntries, not in the budget, which bounds device memory. Stored copies
// are at most one per entry, and never more bytes than the entries count. Entries a transfer in
// progress relies on are pinned and never evicted; when only pinned entries are left, an insert
// is refused and counted.
import { createHmac, randomBytes } from 'node:crypto';
import { dedupTotals } from './stats.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { type CdcOptions } from '../kernels/cdc.js';
import { DEDUP_COPY_DESC } from '../wire/dedup-spec.js';
import { setDedupCopyDescDst, setDedupCopyDescLen, setDedupCopyDescRsvd, setDedupCopyDescSrc } from '../wire/dedup-fields.gen.js';
import { DeviceChunker } from './chunker.js';
import { ChunkHasher, DEDUP_HASH_BYTES, type HashAlgName, hashKey } from './hash.js';
import type { ChunkRef, ChunkStoreStats, DedupMemory, FillSource, IngestOptions } from './types.js';

export type { ChunkRef, ChunkStoreStats, FillSource, IngestOptions } from './types.js';

export interface ChunkStoreOptions {
  /** Bytes of chunk data the store may hold (device memory). Default 64 MiB. */
  budgetBytes?: number;
  /** Entries the store may hold, whatever their size. Default 1 Mi. */
  maxEntries?: number;
  /** Chunk identity: 'xxh3-128' (default; per-peer scopes) or 'sha256' (required when shared). */
  hash?: HashAlgName;
  /**
   * Keep identical chunks of different scopes once in device memory (each scope still sees only
   * its own entries). Needs hash 'sha256'.
   */
  shared?: boolean;
  /** XXH3-128 seed of chunk identities (a secret per store makes identities unpredictable). Default 0. */
  seed?: bigint;
}

/** A store's configuration when nothing is said: the one place these defaults are written. */
export const STORE_DEFAULTS = { hash: 'xxh3-128', shared: false, budgetBytes: 64 << 20, maxEntries: 1 << 20 } as const;

/** One copy of a chunk's bytes in device memory; on a shared store, several scopes' entries may point at it. */
interface Copy {
  readonly key: string;
  readonly addr: number;
  readonly len: number;
  refs: number;
}

interface Entry {
  readonly scope: string;
  readonly key: string;
  /** The stored copy; none for an entry that refers to the caller's bytes (ingest by reference). */
  readonly copy: Copy | undefined;
  readonly addr: number;
  readonly len: number;
  readonly view?: Uint8Array;
  readonly src?: Uint8Array;
  readonly off?: number;
  pins: number;
}

/**
 * An entry of an ingest by reference: the caller's bytes and where the chunk lies in them. Its
 * view is made only when asked for (a basis has thousands of entries, most never looked at).
 */
class RefEntry implements Entry {
  readonly copy = undefined;
  readonly addr = -1;
  pins = 0;
  constructor(readonly scope: string, readonly key: string, readonly len: number, readonly src: Uint8Array, readonly off: number) {}
  get view(): Uint8Array {
    return this.src.subarray(this.off, this.off + this.len);
  }
}

/** Bytes of the basis chunked and hashed per step of an ingest (device scratch: this plus one maximum chunk). */
const INGEST_STEP = 4 << 20;
/**
 * A fill's step: smaller, since the event loop waits for each (a peer's HELLO, the placement of
 * its writes) while the basis goes in.
 */
const FILL_STEP = 1 << 20;

const COPY = DEDUP_COPY_DESC.size;
const COPY_BATCH = 512;

const KEY_LABEL = 'sabre dedup chunking key\u0000';

/** A fill under way (ChunkStore.fill): how far it is, and who wants to hear of each step. */
interface Fill {
  done: Promise<void>;
  stopped: boolean;
  /** Bytes from the basis's start whose chunks are all in the table. */
  chunked: number;
  /** Every byte of the basis is read: no read lands in it any more. */
  readDone: () => boolean;
  watchers: Set<() => void>;
}

export class ChunkStore {
  readonly mem: DedupMemory;
  readonly hash: HashAlgName;
  readonly shared: boolean;
  readonly budgetBytes: number;
  readonly maxEntries: number;
  readonly hasher: ChunkHasher;
  /** Insertion order is recency order: a touched entry is deleted and added again. */
  readonly #lru = new Set<Entry>();
  /** The stored copies by content (shared store only: an unshared entry owns its copy). */
  readonly #copies = new Map<string, Copy>();
  /** Each scope's entries by hashKey of their record (a lookup builds no scope-prefixed string). */
  readonly #scopes = new Map<string, Map<string, Entry>>();
  /** Bases a receiver may assemble in (fill's inPlace), by scope; forgotten with the scope. */
  readonly #inPlace = new Map<string, Uint8Array>();
  /** Fills in progress by scope (local work only: a peer cannot start one). */
  readonly #filling = new Map<string, Fill>();
  /** The secret chunking keys are derived from (chunkKey). */
  readonly #secret = randomBytes(32);
  #bytes = 0;
  #stored = 0;
  #copyCount = 0;
  #pinned = 0;
  #referenced = 0;
  #referencedBytes = 0;
  #copyDesc = 0;
  readonly #s = { hits: 0, misses: 0, inserts: 0, duplicates: 0, sharedInserts: 0, sharedMismatches: 0, evictions: 0, evictedBytes: 0, refused: 0 };

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
   * The content-defined chunking key of `scope` (32 bytes, for the receiver's HELLO): derived
   * from a secret of this store, so the same scope (trust domain) always cuts the same way —
   * its chunks match its earlier ones — while other scopes cut at unrelated boundaries and
   * outsiders cannot compute any of them. Nothing is kept per scope.
   */
  chunkKey(scope: string): Uint8Array {
    if (typeof scope !== 'string') throw new SabreError(ErrorCode.InvalidArgument, 'scope must be a string');
    return new Uint8Array(createHmac('sha256', this.#secret).update(KEY_LABEL).update(scope).digest());
  }

  #table(scope: string): Map<string, Entry> | undefined {
    if (typeof scope !== 'string') throw new SabreError(ErrorCode.InvalidArgument, 'scope must be a string');
    return this.#scopes.get(scope);
  }

  #entry(scope: string, hash: Uint8Array, at: number): Entry | undefined {
    return this.#table(scope)?.get(hashKey(hash, at));
  }

  #add(e: Entry): void {
    let t = this.#scopes.get(e.scope);
    if (!t) this.#scopes.set(e.scope, (t = new Map()));
    t.set(e.key, e);
    this.#lru.add(e);
  }

  /** Does `scope` hold the chunk with this 32-byte hash record (at `at` in `hash`)? Counts a hit or miss. */
  has(scope: string, hash: Uint8Array, at = 0): boolean {
    const ok = this.#entry(scope, hash, at) !== undefined;
    if (ok) this.#s.hits++;
    else this.#s.misses++;
    return ok;
  }

  /** The chunk's place in device memory, made most recently used; undefined if absent. Counts a hit or miss. */
  get(scope: string, hash: Uint8Array, at = 0): ChunkRef | undefined {
    return this.getByKey(scope, hashKey(hash, at));
  }

  /** get() by the hashKey of the record (a caller that needs the key itself makes it once). */
  getByKey(scope: string, key: string): ChunkRef | undefined {
    const e = this.#table(scope)?.get(key);
    if (!e) {
      this.#s.misses++;
      return undefined;
    }
    this.#s.hits++;
    this.#lru.delete(e);
    this.#lru.add(e);
    return e;
  }

  /** Keep the chunk until unpin (a transfer told its peer it holds it). False if absent. */
  pin(scope: string, hash: Uint8Array, at = 0): boolean {
    const e = this.#entry(scope, hash, at);
    if (!e) return false;
    if (e.pins++ === 0) this.#pinned++;
    return true;
  }

  unpin(scope: string, hash: Uint8Array, at = 0): void {
    const e = this.#entry(scope, hash, at);
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
    const spare: number[] = [];
    let held = 0;
    for (let i = 0; i < chunks.length; i++) {
      const { addr, len } = chunks[i]!;
      const rec = at + i * DEDUP_HASH_BYTES;
      const key = hashKey(hashes, rec);
      if (this.#table(scope)?.has(key)) {
        this.#s.duplicates++;
        held++;
        continue;
      }
      if (!this.#makeRoom(len)) {
        this.#s.refused++;
        continue;
      }
      // Allocated and copied even when a shared copy exists (then freed below): the insert
      // succeeds or is refused, and takes its time, the same whether or not another scope
      // stored these bytes.
      let dst: number;
      try {
        dst = this.mem.alloc(Math.max(len, 1));
      } catch {
        this.#s.refused++;
        continue;
      }
      const ckey = `${key}:${len}`;
      let copy = this.shared ? this.#copies.get(ckey) : undefined;
      // Backstop: a shared copy stands for these bytes only if it holds them. The hash says so
      // when every insert is of bytes hashed where they lie; compared all the same (a chunk's
      // memcmp, only when another scope has the copy), so a copy that ever came to differ from
      // its hash serves no other scope: this entry keeps a copy of its own, counted.
      if (copy) {
        this.copy([[dst, addr, len]]);
        const u8 = this.mem.u8();
        if (Buffer.compare(u8.subarray(dst, dst + len), u8.subarray(copy.addr, copy.addr + len)) !== 0) {
          this.#s.sharedMismatches++;
          copy = undefined;
        }
      } else copies.push([dst, addr, len]);
      if (copy) {
        spare.push(dst);
        this.#s.sharedInserts++;
      } else {
        copy = { key: ckey, addr: dst, len, refs: 0 };
        if (this.shared) this.#copies.set(ckey, this.#copies.get(ckey) ?? copy); // a mismatch's own copy stays private
        this.#stored += len;
        this.#copyCount++;
      }
      copy.refs++;
      this.#add({ scope, key, copy, addr: copy.addr, len, pins: 0 });
      this.#bytes += len;
      this.#s.inserts++;
      held++;
    }
    this.copy(copies);
    for (const a of spare) this.mem.free(a);
    return held;
  }
  /**
   * Chunk and insert bytes this side already trusts (an earlier version of a file: the chunk
   * source for rsync-style transfers). Uses the chunker the peer will use, so the boundaries
   * match. Returns the number of chunks the scope holds from it.
   *
   * The bytes pass through a scratch of INGEST_STEP (+ one maximum chunk) in device memory, a
   * step at a time, chunked and hashed there: device memory never holds the whole basis. With
   * `reference`, each entry points into `bytes` (nothing is copied or allocated per chunk);
   * otherwise each chunk is copied into the store.
   */
  ingest(scope: string, bytes: Uint8Array, cdc: CdcOptions, o: IngestOptions = {}): number {
    let held = 0;
    for (const n of this.#ingestSteps(scope, bytes, { avail: bytes.length, done: true }, cdc, o, INGEST_STEP)) held += n;
    return held;
  }

  /**
   * ingest() a step at a time, giving the event loop a turn between steps, for a basis that
   * arrives while a transfer is starting: until it settles, filling(scope) is a promise a
   * receiver of this scope waits on before it answers an OFFER (so the peer can chunk and hash
   * meanwhile, and nothing is sent that the basis holds). `source` may still be being read: a
   * promise of the whole (undefined or a failure: no basis), or a FillSource whose bytes are
   * ingested as they are read. dropScope(scope) stops it. Resolves with the chunks the scope
   * holds from it.
   */
  fill(scope: string, source: Uint8Array | undefined | Promise<Uint8Array | undefined> | FillSource, cdc: CdcOptions, o: IngestOptions = {}): Promise<number> {
    if (typeof scope !== 'string') return Promise.reject(new SabreError(ErrorCode.InvalidArgument, 'scope must be a string'));
    const f: Fill = { done: Promise.resolve(), stopped: false, chunked: 0, readDone: () => false, watchers: new Set() };
    const run = (async (): Promise<number> => {
      const src = await source;
      if (!src || f.stopped) return 0;
      const whole = src instanceof Uint8Array;
      const bytes = whole ? src : src.bytes;
      f.readDone = whole ? () => true : (src.readDone ?? (() => false));
      if (o.reference && o.inPlace) this.#inPlace.set(scope, bytes);
      const limit = { avail: whole ? bytes.length : 0, done: whole };
      const progress = whole ? undefined : src.progress[Symbol.asyncIterator]();
      // The steps move f.chunked as they go (fillProgress reads it).
      const steps = this.#ingestSteps(scope, bytes, limit, cdc, o, FILL_STEP, whole ? undefined : src.addr, f);
      let held = 0;
      try {
        for (let r = steps.next(); !r.done; r = steps.next()) {
          if (r.value >= 0) {
            held += r.value;
            for (const w of f.watchers) w();
            await new Promise<void>((resolve) => setImmediate(resolve));
          } else {
            // The steps caught up with the read: wait for more of it.
            const p = await progress!.next();
            if (p.done) limit.done = true;
            else limit.avail = Math.min(Math.max(limit.avail, p.value), bytes.length);
          }
          if (f.stopped) break;
        }
      } finally {
        steps.return(0); // frees the scratch and chunker when stopped early
        if (!limit.done) await progress?.return?.(); // the reader closes its file
      }
      return held;
    })().finally(() => {
      if (this.#filling.get(scope) === f) this.#filling.delete(scope);
    });
    f.done = run.then(() => undefined, () => undefined);
    this.#filling.set(scope, f);
    return run;
  }

  /** The fill of `scope` in progress, if any (settles when its entries are all in). */
  filling(scope: string): Promise<void> | undefined {
    return this.#filling.get(scope)?.done;
  }

  /**
   * How far the fill of `scope` in progress is (undefined: none is): `chunked`, the bytes from
   * the basis's start whose chunks are all in; `readDone`, every byte of it is read (no read
   * lands in it any more). `watch(cb)` calls cb after each step, until the function it returns.
   * A receiver answers an OFFER page the fill has passed while the rest is still being chunked.
   */
  fillProgress(scope: string): { readonly chunked: number; readonly readDone: boolean; watch(cb: () => void): () => void } | undefined {
    const f = this.#filling.get(scope);
    if (!f) return undefined;
    return {
      get chunked() { return f.chunked; },
      get readDone() { return f.readDone(); },
      watch: (cb) => (f.watchers.add(cb), () => void f.watchers.delete(cb)),
    };
  }

  /**
   * The bytes a fill of `scope` (by reference, `inPlace`) ingests — the very array its entries'
   * `src` is —, taken by the scope's receiver to overwrite with its object; undefined while the
   * fill still reads them (a read could land on what the receiver wrote) or when there is none.
   * A fill that only chunks what it has read may go on: an entry it makes over bytes the
   * receiver has written is one the receiver never uses (./written.ts). One transfer
   * takes it: once it has written there, the entries no longer name what those bytes hold (the
   * receiver drops the scope when that transfer ends).
   */
  takeInPlaceBasis(scope: string): Uint8Array | undefined {
    const f = this.#filling.get(scope);
    if (f && !f.readDone()) return undefined;
    const b = this.#inPlace.get(scope);
    this.#inPlace.delete(scope);
    return b;
  }

  /**
   * The ingest's steps over bytes[0, limit.avail): each copies up to `stepBytes` into the
   * scratch (bytes that are device memory from `addr`: none, they are chunked where they lie),
   * chunks and hashes them there and inserts the chunks that ended in it, then yields
   * how many the scope holds of them; -1 when it has caught up with limit.avail and limit.done
   * is not yet set (the caller raises avail or sets done, then goes on). The stream of chunks is
   * the same whatever the steps' sizes.
   */
  *#ingestSteps(scope: string, bytes: Uint8Array, limit: { avail: number; done: boolean }, cdc: CdcOptions, o: IngestOptions, stepBytes: number, addr?: number, pos?: { chunked: number }): Generator<number, number, undefined> {
    if (!(bytes instanceof Uint8Array)) throw new SabreError(ErrorCode.InvalidArgument, 'ingest needs a Uint8Array');
    if (typeof scope !== 'string') throw new SabreError(ErrorCode.InvalidArgument, 'scope must be a string');
    if (bytes.length === 0) return 0;
    // In place (bytes is device memory from addr): the stream is chunked where it lies. Else
    // through the scratch: each step's bytes are copied in behind the open chunk's.
    const inPlace = addr !== undefined;
    const chunker = new DeviceChunker(this.mem, cdc);
    const step = inPlace ? stepBytes : Math.min(stepBytes, bytes.length);
    const buf = inPlace ? 0 : this.mem.alloc(step + chunker.params.max);
    try {
      let carry = 0; // bytes of the open chunk
      let base = 0; // offset in `bytes` of the open chunk
      let at = 0;
      for (;;) {
        if (at >= limit.avail && !limit.done) {
          yield -1;
          continue;
        }
        const n = Math.min(step, limit.avail - at);
        const last = limit.done && at + n >= limit.avail;
        if (n === 0 && carry === 0) return 0;
        const start = inPlace ? addr + base : buf; // where the open chunk's bytes are
        if (n > 0 && !inPlace) this.mem.u8().set(bytes.subarray(at, at + n), buf + carry);
        const lens = n > 0 ? chunker.push(start + carry, n) : [];
        if (last) chunker.finish(lens);
        at += n;
        const hashes = this.hasher.hashRun(start, lens);
        let used = 0;
        let held: number;
        if (o.reference) {
          held = this.#refer(scope, hashes, lens, bytes, base);
          for (const len of lens) used += len;
        } else {
          const refs: ChunkRef[] = [];
          for (const len of lens) {
            refs.push({ addr: start + used, len });
            used += len;
          }
          held = this.putMany(scope, hashes, refs);
        }
        carry += n - used;
        base += used;
        if (pos) pos.chunked = base;
        if (!inPlace && carry > 0 && used > 0) this.mem.u8().copyWithin(buf, buf + used, buf + used + carry);
        yield held;
        if (last) return 0;
      }
    } finally {
      chunker.free();
      if (!inPlace) this.mem.free(buf);
    }
  }

  /** Entries for chunks of `bytes` laid end to end from `from`, referring to those bytes. */
  #refer(scope: string, hashes: Uint8Array, lens: readonly number[], bytes: Uint8Array, from: number): number {
    let held = 0;
    let off = from;
    for (let i = 0; i < lens.length; i++) {
      const len = lens[i]!;
      const key = hashKey(hashes, i * DEDUP_HASH_BYTES);
      const at = off;
      off += len;
      if (this.#table(scope)?.has(key)) {
        this.#s.duplicates++;
        held++;
        continue;
      }
      if (!this.#makeRoom(0)) {
        this.#s.refused++;
        continue;
      }
      this.#add(new RefEntry(scope, key, len, bytes, at));
      this.#referenced++;
      this.#referencedBytes += len;
      this.#s.inserts++;
      held++;
    }
    return held;
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
        setDedupCopyDescDst(dv, d, dst);
        setDedupCopyDescSrc(dv, d, src);
        setDedupCopyDescLen(dv, d, len);
        setDedupCopyDescRsvd(dv, d, 0);
      }
      const done = this.mem.kernels.copyBatch(this.#copyDesc, n) >>> 0;
      if (done !== n) throw new SabreError(ErrorCode.InvalidArgument, 'dedup copy outside device memory');
    }
  }

  /** Drop every entry of a scope (a peer went away); pinned entries stay. */
  dropScope(scope: string): number {
    if (typeof scope !== 'string') throw new SabreError(ErrorCode.InvalidArgument, 'scope must be a string');
    const s = scope;
    const f = this.#filling.get(s);
    if (f) f.stopped = true; // its next step would bring entries back
    this.#inPlace.delete(s);
    let n = 0;
    for (const e of [...(this.#scopes.get(s)?.values() ?? [])]) {
      if (e.pins === 0) {
        this.#evict(e);
        n++;
      }
    }
    return n;
  }

  stats(): ChunkStoreStats {
    return {
      entries: this.#lru.size, bytes: this.#bytes, copies: this.#copyCount, storedBytes: this.#stored,
      referenced: this.#referenced, referencedBytes: this.#referencedBytes,
      budgetBytes: this.budgetBytes, maxEntries: this.maxEntries, scopes: this.#scopes.size, pinned: this.#pinned, ...this.#s,
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

  /** Room for one more entry of `len` stored bytes (0: a reference), evicting least recently used first. */
  #makeRoom(len: number): boolean {
    if (len > this.budgetBytes || this.maxEntries === 0) return false;
    const fits = (): boolean => this.#bytes + len <= this.budgetBytes && this.#lru.size < this.maxEntries;
    if (fits()) return true; // the common case, before an iterator is made (an insert per chunk)
    for (const e of this.#lru.values()) {
      if (fits()) return true;
      // A reference frees no device memory: it goes only when the entries are what is full.
      if (e.pins === 0 && (e.copy || this.#lru.size >= this.maxEntries)) this.#evict(e);
    }
    return fits();
  }

  #evict(e: Entry, count = true): void {
    this.#lru.delete(e);
    const t = this.#scopes.get(e.scope);
    t?.delete(e.key);
    if (t?.size === 0) this.#scopes.delete(e.scope);
    if (e.pins > 0) this.#pinned--;
    if (!e.copy) {
      this.#referenced--;
      this.#referencedBytes -= e.len;
    } else if ((this.#bytes -= e.len), --e.copy.refs === 0) {
      if (this.shared && this.#copies.get(e.copy.key) === e.copy) this.#copies.delete(e.copy.key);
      this.#stored -= e.copy.len;
      this.#copyCount--;
      this.mem.free(e.copy.addr);
    }
    if (count) {
      this.#s.evictions++;
      this.#s.evictedBytes += e.len;
    }
  }
}
