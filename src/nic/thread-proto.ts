// What the application's thread and a NIC thread share besides the rings (./ring.ts): the
// control table, the messages of the slow path, and how errors cross. One definition for both
// sides (./thread-port.ts, ./thread-nic.ts).
//
// The control table (one SharedArrayBuffer of Int32 words) is written by one side per word:
//   QP slot s (4 words at s*4):  state (NIC), send WRs retired (NIC), receives retired (NIC),
//                                flags (NIC: bit 0 the peer is a standard iWARP peer; bits 1-3
//                                why the QP went down, QP_DOWN_CAUSES' index + 1, 0 none)
//   CQ slot c (1 word at CQ_BASE + c): completions the application has taken (application)
// Retired counts are free-running totals: the application knows how many it posted, so the
// queue's occupancy is posted - retired, read without a message.
import { ErrorCode, type ErrorCodeValue, SabreError } from '../core/errors.js';
import type { QpDownCause } from '../core/link.js';
import type { MemoryMap } from '../dataplane/memory-map.js';
import type { SharedMemoryInit } from './thread-arena.js';

export const QP_SLOTS = 1 << 16;
export const QP_WORDS = 4;
export const QpWord = { state: 0, sqRetired: 1, rqRetired: 2, flags: 3 } as const;
export const QP_FLAG_STANDARD_PEER = 1;
/** The flags word's down-cause field: QP_DOWN_CAUSES[field - 1] (0: none). */
export const QP_FLAG_CAUSE_SHIFT = 1;
export const QP_FLAG_CAUSE_MASK = 0b1110;
export const QP_DOWN_CAUSES: readonly QpDownCause[] = ['lost', 'broken', 'refused', 'closed'];
export const CQ_SLOTS = 1 << 16;
export const CQ_BASE = QP_SLOTS * QP_WORDS;
export const CONTROL_BYTES = (CQ_BASE + CQ_SLOTS) * 4;

/** A CQE whose cq is this is an amended-metadata record (M3): token = STag, qpn = offset in the region, byteLen = bytes. */
export const PLACE_RECORD_CQ = 0xffff_ffff;
/** A CQE whose cq is this is the NIC thread's last record at close: every completion is in the ring before it. */
export const CLOSE_DONE_CQ = 0xffff_fffe;
/**
 * A CQE whose cq is this is a QP's fence (qpn): its reset or destroy is done and every completion
 * of its work before it is in the ring ahead of this record (held-back ones included).
 */
export const QP_FENCE_CQ = 0xffff_fffd;

/** Ring sizes: the WQE ring holds a burst of posts, the CQE ring a burst of completions. */
export const WQE_RING_BYTES = 1 << 20;
export const CQE_RING_BYTES = 1 << 20;

/** An error as it crosses a thread: its code and message, and its cause's own fields (a system error's code, errno, syscall). */
export interface WireError {
  code: string;
  message: string;
  cause?: Record<string, unknown>;
}

/** The fields of a cause worth keeping: strings and numbers (a system error's code, errno, syscall, address, port). */
function plainCause(c: unknown): Record<string, unknown> | undefined {
  if (c === null || typeof c !== 'object') return undefined;
  const out: Record<string, unknown> = { message: (c as Error).message, name: (c as Error).name };
  for (const [k, v] of Object.entries(c)) if (typeof v === 'string' || typeof v === 'number') out[k] = v;
  return out;
}

export function toWireError(e: unknown): WireError {
  const cause = plainCause((e as { cause?: unknown } | undefined)?.cause);
  if (e instanceof SabreError) return { code: e.code, message: e.message, ...(cause ? { cause } : {}) };
  // Not an error of the API: a fault of the NIC thread itself.
  return { code: ErrorCode.Internal, message: `NIC thread: ${e instanceof Error ? e.message : String(e)}` };
}

export function fromWireError(w: WireError): SabreError {
  if (w.cause === undefined) return new SabreError(w.code as ErrorCodeValue, w.message);
  const { message, name, ...rest } = w.cause;
  const cause = Object.assign(new Error(String(message ?? '')), rest);
  if (typeof name === 'string') cause.name = name;
  return new SabreError(w.code as ErrorCodeValue, w.message, { cause });
}

/** What the NIC thread is started with (workerData). */
export interface NicThreadInit {
  transport: string;
  opts: Record<string, unknown>;
  limits: { engine: Record<string, number>; link: Record<string, number> };
  control: SharedArrayBuffer;
  wqe: SharedArrayBuffer;
  cqe: SharedArrayBuffer;
  mailbox: SharedArrayBuffer;
  /** One of several NIC threads of a device, not the first: it attaches to the first's device memory. */
  attach?: SharedMemoryInit;
  /** The first of several: it serves the others' allocations through these mailboxes. */
  arenas?: SharedArrayBuffer[];
}

/** The NIC thread's first message: what the device learns of its link, or why it could not open. */
export type NicReady =
  | {
      kind: 'ready';
      memory: WebAssembly.Memory;
      module: WebAssembly.Module;
      map: MemoryMap;
      maximumBytes: number;
      address: Record<string, unknown>;
      mtu?: number;
      integrity?: 'crc32c' | 'xxh3' | 'none';
      mss: number;
      maxControl: number;
      bounds: Record<string, number>;
      linkServices: boolean;
    }
  | { kind: 'failed'; error: WireError };
