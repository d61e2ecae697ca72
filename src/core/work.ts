// The shapes of work that cross layers: what a work request names (local and remote segments)
// and what a completion reports (DESIGN §4). The verbs layer adds the request types that name
// its own objects (SendWr's address handle); the engine and the CQ meet here.
import type { WcOpcodeValue, WcStatusValue } from './enums.js';

/** Returned exactly as given. */
export type WrId = number | bigint;

/** A local segment: registered memory named by its lkey. */
export interface Sge {
  addr: number;
  length: number;
  lkey: number;
}

/** A remote segment for vectored reads (M1). */
export interface RemoteSge {
  addr: number;
  length: number;
  rkey: number;
}

export interface WorkCompletion {
  wrId: WrId;
  status: WcStatusValue;
  opcode: WcOpcodeValue;
  byteLen: number;
  imm?: number;
  qpn: number;
  srcQpn?: number;
}

/**
 * Where completions go: a CompletionQueue, as the engine sees it. offer() returns false when the
 * queue is full — the completion is lost and the queue overran (the engine then moves every QP
 * feeding it to ERROR, as ibverbs does on a CQ overrun).
 */
export interface CompletionSink {
  offer(wc: WorkCompletion): boolean;
}
