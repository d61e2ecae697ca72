// The requests of a file-server connection: the record the core keeps for each one and for each
// open file, and the checks and plans that need nothing but the request and the limits.
import { FILE_AUTH_RESP, FileAccess, FileOp, FileStatus } from '../wire/files-spec.js';
import { writeFields } from './layout.js';
import type { Body } from './messages.js';
import { type ServerLimits, receiveSize } from './server-types.js';

export interface OpenFile {
  handle: number;
  access: number;
  inflight: number;
  closing: boolean;
  /** Close without committing (a Replace put abandoned). */
  discard?: boolean;
}

export type Req = {
  id: number;
  op: number;
  slot: number;
  flags: number;
  recvId: number;
  body: Body;
  state: 'queued' | 'fs' | 'done';
  cancelled: boolean;
  /** The client asked to be told by Send (InterruptRequest). */
  interrupt: boolean;
  staging?: number;
  fileId?: number;
  /** List: the checked path. */
  parts?: string[];
};

/** A message waiting for a credit to leave. */
export interface Outbound {
  /** Encode with the grant this message carries (computed when it leaves). */
  build(grant: number, requested: number): { kind: 'send'; bytes: Uint8Array; last?: boolean } | { kind: 'block'; bytes: Uint8Array; remoteAddr: number; rkey: number; imm?: number };
}

/** The requests a client may send once authenticated. */
export const CLIENT_OPS = new Set<number>([FileOp.RegisterFile, FileOp.Read, FileOp.ReadV, FileOp.Write, FileOp.WriteV, FileOp.Close, FileOp.List]);

/** The status refusing a RegisterFile's `access`, or undefined when it may be opened. */
export function openAccessRefused(access: number, readOnly: boolean): number | undefined {
  const writes = FileAccess.Write | FileAccess.Create | FileAccess.Truncate | FileAccess.Replace;
  if (readOnly && access & writes) return FileStatus.ReadOnly;
  if ((access & (FileAccess.Read | FileAccess.Write)) === 0 || access & ~0x7f) return FileStatus.InvalidParameter;
  // A Replace writes a temporary that no one may read before it is renamed into place.
  if (access & FileAccess.Replace && (access & FileAccess.Read || !(access & FileAccess.Write))) return FileStatus.InvalidParameter;
  return undefined;
}

/**
 * A Write or WriteV naming a byte at or past 2^53 − 1. Sizes and offsets cross the wire as safe
 * integers: a file grown past that could never be opened again (its size does not decode), so
 * the write that would make it is refused.
 */
export function writePastSafeEnd(b: Body): boolean {
  if (b.op === FileOp.Write) return b.offset + b.length > Number.MAX_SAFE_INTEGER;
  return b.op === FileOp.WriteV && b.entries.some((e) => e.offset + e.length > Number.MAX_SAFE_INTEGER);
}

/** One RDMA Write of staged bytes: `length` bytes at `at` of the staging buffer to the client's sink. */
export interface StagingWrite {
  at: number;
  length: number;
  remoteAddr: number;
  rkey: number;
}

/**
 * The Writes that hand `n` staged bytes of a Read, List or ReadV to the client's sinks. A ReadV's
 * pieces lie back to back in staging and got `got[i]` bytes each; collapsed, they land back to
 * back from the one sink address, else each at its own. Empty pieces are not written.
 */
export function stagingWrites(b: Body, n: number, got: number[] | undefined, collapse: boolean): StagingWrite[] {
  const out: StagingWrite[] = [];
  const post = (at: number, length: number, remoteAddr: number, rkey: number): void => {
    if (length > 0) out.push({ at, length, remoteAddr, rkey });
  };
  if (b.op === FileOp.Read || b.op === FileOp.List) post(0, n, b.sinkAddr, b.sinkRkey);
  else if (b.op === FileOp.ReadV) {
    let at = 0;
    let sink = b.sinkAddr;
    b.entries.forEach((e, i) => {
      post(at, got?.[i] ?? 0, collapse ? sink : e.sinkAddr, b.sinkRkey);
      at += e.length;
      sink += e.length;
    });
  }
  return out;
}

/** The AuthenticateResponse's fields for `L`, and the bytes before its MAC that the MAC covers. */
export function authResponseFields(L: ServerLimits) {
  const resp = {
    status: FileStatus.Success, maxReceiveSize: receiveSize(L), maxReadWriteSize: L.maxReadWriteSize, maxWriteSize: L.maxWriteSize,
    maxVectors: L.maxVectors, maxOpenFiles: L.maxOpenFiles, rwDepth: L.rwDepth, creditsMax: L.credits,
  };
  const tmp = new Uint8Array(FILE_AUTH_RESP.size);
  writeFields(FILE_AUTH_RESP, tmp, 0, resp);
  return { resp, params: tmp.slice(0, FILE_AUTH_RESP.fields.mac.offset) };
}
