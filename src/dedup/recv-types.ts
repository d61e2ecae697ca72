// The receiver core's options and actions (./recv-core.ts), on their own so the core stays one job.
import { ErrorCode, SabreError } from '../core/errors.js';
import type { ChunkMap } from './chunk-map.js';
import type { ChunkStore } from './store.js';
import type { DedupMemory, RecvStats } from './types.js';

export interface LandingZone {
  /** Device address of the registered zone (slots × slotLen bytes) and its rkey. */
  addr: number;
  rkey: number;
  length: number;
}

export interface DedupRecvOptions {
  mem: DedupMemory;
  store: ChunkStore;
  /** The store scope of this peer (default scoping: one per peer). */
  scope: string;
  zone: LandingZone;
  slots: number;
  /** Chunking the sender must use: the receiver's store only matches chunks cut the same way. */
  avg?: number;
  min?: number;
  max?: number;
  normalization?: number;
  /**
   * Chunking key (32 bytes): a secret of this receiver scope, so boundaries do not fingerprint
   * content. Default: the store's key for the scope (store.chunkKey(scope)), never one key for
   * several scopes.
   */
  key?: Uint8Array;
  /** Entries per OFFER page (bounds the receive buffer a page needs). Default 1024. */
  maxEntries?: number;
  /** Chunks per transfer. Default 2^20. */
  maxChunks?: number;
  /** Bytes per transfer (the object is allocated when its first OFFER page arrives). Default 256 MiB. */
  maxTotal?: number;
  /**
   * Put every verified chunk into the store, so later transfers of this scope find it (default
   * true). false for a scope that lives for one transfer (a file's basis): repeats inside the
   * object are served from the object itself either way.
   */
  keepReceived?: boolean;
  /**
   * Queue 'progress' actions as the object's verified prefix grows, so the caller can write the
   * start of the object out while the rest still arrives (default false).
   */
  progress?: boolean;
}

/** What the receiver's shell carries out, in the order the core made them (pollAction). */
export type RecvAction =
  | { kind: 'send'; bytes: Uint8Array }
  /** The object, assembled (its own memory: the receiver keeps no reference). */
  | { kind: 'delivered'; bytes: Uint8Array; stats: RecvStats }
  /**
   * The first `done` bytes of the object being assembled are final: verified, in place, never
   * written again. `bytes` is the object (still the receiver's until it is delivered); `moved`:
   * it is a new array since the last progress, holding the same bytes in the prefix reported.
   */
  | { kind: 'progress'; bytes: Uint8Array; done: number; moved?: boolean }
  | { kind: 'failed'; error: SabreError }
  /** The sender refused our HELLO: no transfer will run on this pipe (whoever waits gets `error`). */
  | { kind: 'refused'; error: SabreError };

/** A peer's message this receiver cannot go on with: the transfer ends with `status` (END). */
export class Violation extends Error {
  constructor(readonly status: number, readonly detail: number, msg: string) {
    super(msg);
  }
}

/** A landing-zone slot armed for the sender's next write into it (the receiver core's). */
export interface Armed {
  /** Manifest indices in the slot, in order. */
  idx: number[];
  bytes: number;
  map: ChunkMap | undefined;
}

/** Written ranges a receiver remembers while its object is the basis (written.ts). */
export const WRITTEN_MAX = 1024;

/** A transfer's counters before its first page. */
export function zeroStats(xfer: number): RecvStats {
  return { xfer, total: 0, chunks: 0, chunksFromStore: 0, bytesFromStore: 0, chunksRepeated: 0, chunksReceived: 0, bytesReceived: 0, rounds: 0, hashedInBand: 0, rehashedRounds: 0, leftBasis: 0, leftBasisRanges: 0 };
}

/**
 * What whoever waits on a receiver gets once the sender refused its HELLO: the peer cannot use
 * these parameters (ERR_NOT_SUPPORTED, as for a channel that takes no dedup sends).
 */
export const helloRefusedError = (): SabreError =>
  new SabreError(ErrorCode.NotSupported, 'dedup: the sender refused this receiver\'s HELLO (it cannot use its slots, sizes, hash or chunking parameters); no transfer will run on this pipe');
