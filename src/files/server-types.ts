// What the file server's connection core (./server-core.ts) and its shell (./server.ts,
// ./server-conn.ts) say to each other: the limits a connection runs under, its counters, the
// file-system work it asks for and the results it is given, and the actions it returns.
import { HDR_LEN } from './messages.js';
import type { Session } from './sessions.js';

export interface ServerLimits {
  /** Credits the server aims to grant each client (its receive buffers per connection). */
  credits: number;
  /** Largest Write/WriteV data. */
  maxWriteSize: number;
  /** Largest Read/ReadV/List transfer (one staging buffer). */
  maxReadWriteSize: number;
  maxVectors: number;
  maxOpenFiles: number;
  /** Reads being answered by RDMA Writes at once (staging buffers). */
  rwDepth: number;
  /** How long a new connection may take to authenticate. */
  authTimeoutMs: number;
  readOnly: boolean;
  /** fsync every Replace put before its rename, whatever the client asked. */
  fsync: boolean;
}

// maxWriteSize 1 MiB, as SMB Direct's reads and writes: a put moves one Write per MiB instead of
// four, and the per-request cost (a request and its status, a receive reposted, a file-system
// call, on both sides) was what bounded it — 1 MiB Writes come closer to raw node:net than
// 256 KiB ones on udp and tcp alike (bench/files.bench.mjs; numbers in docs/benchmarks.md). The cost is
// a receive buffer of that size per credit at the server.
export const DEFAULT_SERVER_LIMITS: ServerLimits = {
  credits: 16, maxWriteSize: 1024 * 1024, maxReadWriteSize: 1024 * 1024, maxVectors: 64, maxOpenFiles: 64, rwDepth: 4,
  authTimeoutMs: 5000, readOnly: false, fsync: false,
};

/** Bytes a receive buffer needs to hold the largest message this server accepts. */
export const receiveSize = (l: ServerLimits): number => HDR_LEN + 8 + 16 * l.maxVectors + l.maxWriteSize;
/** The one receive posted before authentication (AuthenticateRequest is 124 bytes). */
export const PREAUTH_RECEIVE = 256;

export interface ServerCounters {
  connections: number;
  authenticated: number;
  authFailed: number;
  authTimeouts: number;
  beforeAuth: number;
  creditOverruns: number;
  /** Receives that completed in error (not flushed): a Send longer than the buffer, the QP failing under one. */
  receiveErrors: number;
  malformed: number;
  refusedLimit: number;
  refusedPath: number;
  refusedReadOnly: number;
  refusedTooManyOpen: number;
  refusedHandle: number;
  refusedLinked: number;
  cancelled: number;
  creditsRetired: number;
  grantOnly: number;
  interruptRequests: number;
  requests: number;
  bytesRead: number;
  bytesWritten: number;
  filesOpened: number;
  terminated: number;
  /** Connections terminated for asking for more answers by Send than they granted credits to send. */
  sendQueueOverruns: number;
  /** Closed for a newer connection before authenticating, and told why (StatusResponse(SessionLimit, Terminate) answering their first message). */
  evictionsTold: number;
  /** Closed for a newer connection before authenticating, untold: no message (or no credit) came to answer in time. */
  evictionsUntold: number;
}

export const newServerCounters = (): ServerCounters => ({
  connections: 0, authenticated: 0, authFailed: 0, authTimeouts: 0, beforeAuth: 0, creditOverruns: 0, receiveErrors: 0, malformed: 0, refusedLimit: 0,
  refusedPath: 0, refusedReadOnly: 0, refusedTooManyOpen: 0, refusedHandle: 0, refusedLinked: 0, cancelled: 0, creditsRetired: 0,
  grantOnly: 0, interruptRequests: 0, requests: 0, bytesRead: 0, bytesWritten: 0, filesOpened: 0, terminated: 0, sendQueueOverruns: 0, evictionsTold: 0, evictionsUntold: 0,
});

/** File-system work for the shell; `handle` is the shell's own name for an open file. */
export type FsOp =
  | { op: 'open'; parts: string[]; access: number; mode: number; fsync: boolean }
  | { op: 'read'; handle: number; staging: number; length: number; position: number }
  | { op: 'readv'; handle: number; staging: number; entries: { position: number; length: number; at: number }[] }
  | { op: 'write'; handle: number; recvId: number; dataOff: number; length: number; position: number }
  | { op: 'writev'; handle: number; recvId: number; dataOff: number; entries: { position: number; length: number }[] }
  | { op: 'close'; handle: number; commit: boolean }
  | { op: 'list'; parts: string[]; cookie: number; staging: number; maxBytes: number };

export interface FsResult {
  status: number;
  /** open: the shell's handle. */
  handle?: number;
  /** open: size; read/write/list: bytes. */
  value?: number;
  /** readv: bytes read per entry. */
  parts?: number[];
  /** list: next cookie (0: end). */
  next?: number;
}

export type ServerAction =
  /** Post `n` new receive buffers (after authentication, or when the target rises). */
  | { kind: 'post'; n: number }
  /** Give this receive buffer back to the QP. */
  | { kind: 'repost'; recvId: number }
  /** This receive buffer is no longer wanted (credits lowered, or the pre-auth buffer). */
  | { kind: 'retire'; recvId: number }
  /** Allocate the connection's receive and staging memory (authentication succeeded). */
  | { kind: 'provision' }
  /** A Send of these bytes (at most a few hundred: the shell may post it inline). `last`: the terminal message. */
  | { kind: 'send'; bytes: Uint8Array; last?: boolean }
  /** RDMA Write of staging bytes to the client; `token` comes back in writeDone. */
  | { kind: 'write'; staging: number; at: number; length: number; remoteAddr: number; rkey: number; token: number }
  /** A status block to the client's slot: plain RDMA Write, or Write with Immediate (imm = slot). */
  | { kind: 'block'; bytes: Uint8Array; remoteAddr: number; rkey: number; imm?: number }
  | { kind: 'fs'; token: number; work: FsOp }
  /** Close the connection (after the last Send, if any, has gone). */
  | { kind: 'terminate'; reason: string; status: number }
  /** Bound to a session / everything this connection held is released (after close). */
  | { kind: 'bound'; session: Session }
  | { kind: 'released' };
