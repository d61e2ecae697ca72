// What serveFiles takes (ServeOptions) and what FileServer.stats() returns (FileServerStats):
// the file server's public option and counter shapes, apart from the server that uses them.
import type { CmListenerCounters } from '../cm/index.js';
import type { BackoffCounters, BackoffLimits } from './admission.js';
import type { DedupCounters } from './dedup.js';
import type { ListCacheCounters } from './list-cache.js';
import type { PartSweepCounters } from './sweep.js';
import type { OpenFileCounters } from './open-files.js';
import type { PipeCounters } from './pipe.js';
import type { PipeShellCounters } from './pipes.js';
import type { ServerCounters, ServerLimits } from './server-types.js';
import type { SessionCounters, SessionLimits } from './sessions.js';

export type Provider = 'udp' | 'tcp' | 'inproc';

/** Every numeric option is checked at serveFiles: an integer in its range, else ERR_INVALID_ARGUMENT naming it (./serve-checks.ts). */
export interface ServeOptions {
  /** Interface for the pipe and the devices. Default 127.0.0.1. */
  host?: string;
  /** Control-pipe TCP port (0: ephemeral). Default 0. */
  port?: number;
  /** Providers to serve. Default ['udp', 'tcp']. */
  transports?: Provider[];
  /** The shared secret; serveFiles makes a random one when absent (server.token). */
  token?: string;
  readOnly?: boolean;
  /** fsync every Replace put before its rename. */
  fsync?: boolean;
  limits?: Partial<ServerLimits>;
  /**
   * Session limits (./sessions.ts): maxSessions (64), maxSessionsPerHost (16: one source host's
   * share), idleEvictMs (10 000: a full table closes the session longest without a bound
   * connection, if idle that long, for a new one), maxConnectionsPerSession, maxPendingKeys, keyTtlMs.
   */
  sessions?: Partial<SessionLimits>;
  /** RDMA connections at once, authenticated or not (bounds memory). Default 64. */
  maxConnections?: number;
  /**
   * RDMA connections of one source host, authenticated or not. Default 16. Past it a new one is
   * refused (connectionHostLimit) once the host's are all authenticated: those are never closed
   * for it (an unauthenticated one of the host is, for the new one).
   */
  maxConnectionsPerHost?: number;
  /**
   * RDMA connections not yet authenticated, all sources (default 16) and per source host (default
   * 4); past either the oldest of the source holding the most is closed for the new one.
   */
  maxUnauthenticated?: number;
  maxUnauthenticatedPerHost?: number;
  /** Control pipes at once. Default 256. */
  maxPipes?: number;
  /** Control pipes of one source host (default 32); not yet authenticated: all (64), per host (8). */
  maxPipesPerHost?: number;
  maxUnauthenticatedPipes?: number;
  maxUnauthenticatedPipesPerHost?: number;
  /** The backoff of failed token proofs per source (docs/files.md "Security model"). */
  login?: Partial<BackoffLimits>;
  /** Refuse a token shorter than this (ERR_INVALID_ARGUMENT). Default 0: any; see weakToken. */
  minTokenLength?: number;
  /** udp device options (openDevice's). */
  mtu?: number;
  /** NIC threads of the udp and tcp devices (openDevice's `workers`; 0 runs them inline). */
  workers?: number;
  /**
   * The devices' integrity check (openDevice's): udp 'xxh3' (default), 'crc32c' or 'none'; tcp
   * 'crc32c' (default) or 'none' (MPA's CRC off) — 'xxh3' leaves tcp at its default.
   */
  integrity?: 'crc32c' | 'xxh3' | 'none';
  /** Serve put/get --dedup (docs/files.md "Dedup transfers"). Default true. */
  dedup?: boolean;
  /** Largest file a dedup transfer moves (assembled in memory). Default 256 MiB. */
  dedupMaxBytes?: number;
  /** Dedup transfers under way at once, all sessions (each may hold up to twice dedupMaxBytes). Default 8. */
  dedupMaxTransfers?: number;
  /**
   * At start, put temporaries (`.sabre-<16 hex>.part`, regular files) under DIR whose mtime is at
   * least this old are removed: a killed server's leftovers (ms; default 3 600 000; 0: all, where
   * no other server serves DIR — a live put of one is younger than the default). ./sweep.ts.
   */
  partSweepAgeMs?: number;
  /** Files open at once, all connections and dedup transfers (limits.maxOpenFiles is per connection). Default: a quarter of the soft fd limit (./open-files.ts). */
  maxOpenFilesTotal?: number;
}

export interface FileServerStats extends ServerCounters, PipeCounters, SessionCounters, PipeShellCounters, BackoffCounters, DedupCounters, CmListenerCounters, OpenFileCounters, ListCacheCounters, PartSweepCounters {
  sessions: number;
  /** Source hosts holding a session now (each holds at most sessions.maxSessionsPerHost). */
  sessionHosts: number;
  /** RDMA connections not yet authenticated, now; pipes likewise. */
  unauthenticatedConnections: number;
  unauthenticatedPipes: number;
  /** Unauthenticated RDMA connections closed to make room for a newer one (then told why: evictionsTold, evictionsUntold, or cut: evictionsCut). */
  connectionsEvicted: number;
  /** Evicted RDMA connections waiting now for a message to answer with why (at most maxUnauthenticated, 2 s each). */
  evictionsWaiting: number;
  /** Evicted RDMA connections destroyed at once, untold: maxUnauthenticated were waiting already. */
  evictionsCut: number;
  /** RDMA connections refused because their source host held maxConnectionsPerHost authenticated ones (also in connectionsRefused). */
  connectionHostLimit: number;
  /** Source hosts holding an RDMA connection now (each at most maxConnectionsPerHost). */
  connectionHosts: number;
  /** Sources (and networks, past login.maxSources sources) whose failed token proofs are remembered now (bounded: 2 × login.maxSources + 1). */
  loginSources: number;
  /** Dedup channels waiting for their AUTH now. */
  dedupPending: number;
  /** RDMA connections alive now (authenticating or bound). */
  liveConnections: number;
  pipes: number;
  connectionsRefused: number;
  /** Bytes of device memory the connections have registered now. */
  registeredBytes: number;
}

