// The shapes the dedup files share, declared below all of them so none imports another for a
// type: the memory the data path works in (memory.ts finds a device's), and the results a
// transfer and a chunk store report, which the per-device totals (stats.ts) add up.
import type { Kernels } from '../dataplane/wasm.js';

/**
 * What the dedup data path needs of a device's memory: the kernels instance over it, views, and
 * the arena allocator (TypeScript owns the memory map: chunk maps, chunker tables, the chunk
 * store's slab all come from the arena). A DeviceMemory is one; tests may pass their own.
 */
export interface DedupMemory {
  readonly kernels: Kernels;
  u8(): Uint8Array;
  dataView(): DataView;
  alloc(length: number, align?: number): number;
  free(addr: number): void;
}

/** What a sender's transfer reports when it is done (DedupSendCore). */
export interface SendResult {
  xfer: number;
  total: number;
  chunks: number;
  /** Chunks the receiver lacked, written into its landing zone. */
  chunksSent: number;
  /** Chunk payload bytes written (RDMA). */
  bytesSent: number;
  rounds: number;
  pages: number;
}

/** What a receiver's transfer reports with the object it delivers (DedupRecvCore). */
export interface RecvStats {
  xfer: number;
  total: number;
  chunks: number;
  /** Chunks found in the store (copied, never sent). */
  chunksFromStore: number;
  bytesFromStore: number;
  /** Later occurrences of a chunk already requested in this transfer (copied from the first, never sent twice). */
  chunksRepeated: number;
  /** Chunks that arrived over RDMA, each verified against its hash. */
  chunksReceived: number;
  bytesReceived: number;
  rounds: number;
  /** Received chunks whose hash was already final when their ROUND arrived (hashed in-band by placement). */
  hashedInBand: number;
  /** Rounds hashed a second time at ROUND because a segment rewrote bytes already hashed (retransmits). */
  rehashedRounds: number;
  /** 1 when the object, assembled in its basis, left it for a buffer of its own (a chunk moved; no memory is copied before). */
  leftBasis: number;
  /** Of those, 1 when it left because the ranges written in the basis reached their bound (1024, written apart). */
  leftBasisRanges: number;
}

/** A chunk store's counters (ChunkStore.stats()). */
export interface ChunkStoreStats {
  /** Chunks held, one per scope that holds it (what lookups answer from; bounded by maxEntries). */
  entries: number;
  /** Bytes of the entries, each at its full size (what budgetBytes bounds). */
  bytes: number;
  /** Copies of chunk bytes in device memory (a shared store keeps identical chunks of several scopes once). */
  copies: number;
  /** Device memory those copies hold (at most `bytes`). */
  storedBytes: number;
  /** Entries that refer to a caller's bytes (ingest by reference): in `entries`, not in `bytes`. */
  referenced: number;
  referencedBytes: number;
  budgetBytes: number;
  maxEntries: number;
  scopes: number;
  hits: number;
  misses: number;
  inserts: number;
  /** Inserts of a chunk the scope already held (not stored twice). */
  duplicates: number;
  /** Inserts whose bytes another scope had already stored (a shared store kept them once). */
  sharedInserts: number;
  /**
   * Inserts (shared store) whose bytes differed from the stored copy of the same hash and length:
   * kept in a copy of their own instead (a copy that no longer holds what its hash names serves
   * no other scope).
   */
  sharedMismatches: number;
  evictions: number;
  evictedBytes: number;
  /** Inserts refused: larger than the budget, or nothing unpinned left to evict. */
  refused: number;
  pinned: number;
}

// ---- the chunk store's arguments and results (./store.ts) ----

export interface ChunkRef {
  /** Device address of the chunk's bytes; -1 when they are `view` (outside device memory). */
  readonly addr: number;
  readonly len: number;
  /** The chunk's bytes where an ingest by reference left them (the caller's buffer). */
  readonly view?: Uint8Array;
  /** The same bytes as `src[off, off + len)`: a caller that copies them needs no view made. */
  readonly src?: Uint8Array;
  readonly off?: number;
}

export interface IngestOptions {
  /**
   * Keep references into `bytes` instead of copies in device memory: the caller promises not to
   * change those bytes until the scope is dropped. Such entries take no device memory (they
   * count in maxEntries, not in the byte budget).
   */
  reference?: boolean;
  /**
   * (fill by reference only) The receiver of this scope may assemble its object in these bytes
   * once the fill has settled, overwriting them (takeInPlaceBasis): the caller gives them up to the
   * transfer and reads the object there. The receiver keeps track of what it overwrote and never
   * uses an entry whose bytes it has changed.
   */
  inPlace?: boolean;
}

/**
 * A basis still being read into `bytes` from its start: `progress` yields how many bytes are in
 * so far (rising); when it ends, what is in is the basis (a file that shrank meanwhile is
 * shorter). Returning it early (a fill stopped) lets the reader close what it reads from.
 */
export interface FillSource {
  bytes: Uint8Array;
  progress: AsyncIterable<number>;
  /**
   * Where `bytes` lies in this store's device memory, when it does (a view of it from this
   * address): then it is chunked and hashed in place, not copied through the scratch.
   */
  addr?: number;
  /**
   * Every byte is read (no read is in flight or will come): from then on a receiver may assemble
   * its object in `bytes` while the rest is still chunked (ChunkStore.takeInPlaceBasis). Absent:
   * not before the fill settles.
   */
  readDone?: () => boolean;
}
