// The shapes of the file client's API: what open, the operations and get/put take and return.
import type { DedupTransferStats } from './dedup.js';
import type { Provider } from './server.js';

export interface OpenOptions {
  /** 'r' (default), 'r+', 'w' (create or truncate in place), 'wx' (create, fail if it exists), 'replace' (write a temporary file, renamed into place on close). */
  flags?: 'r' | 'r+' | 'w' | 'wx' | 'replace';
  mode?: number;
  /** With 'replace': fsync before the rename. */
  fsync?: boolean;
}

export interface RemoteFile {
  readonly id: number;
  readonly path: string;
  /** Size when opened. */
  readonly size: number;
}

export interface OpOptions {
  signal?: AbortSignal;
  mode?: 'interrupt' | 'poll';
}

export interface TransferResult {
  bytes: number;
  seconds: number;
  transport: Provider;
  /** put/get with { dedup: true }: the basis and what crossed the wire. */
  dedup?: DedupTransferStats;
}
