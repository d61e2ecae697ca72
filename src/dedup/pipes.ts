// The interfaces the dedup shells (./endpoint.ts, ./receiver.ts) run over: the caller's message
// pipe, its RDMA write path, and an object a sender reads itself (a DedupSource).
import { ErrorCode, SabreError } from '../core/errors.js';

/** A reliable, ordered message pipe. */
export interface MessagePipe {
  /** Send one message (delivered whole, in order). */
  send(bytes: Uint8Array): void | Promise<void>;
  /** Register the handler of every message that arrives. */
  onMessage(handler: (bytes: Uint8Array) => void): void;
  /** Register the handler of the pipe's end (error when it broke). */
  onClose?(handler: (error?: Error) => void): void;
}

/**
 * A transfer's error when its pipe closed: the code of why it closed (a channel that failed
 * hands its own error — ERR_UNREACHABLE for a lost peer), so a transfer fails with the code its
 * channel fails with: one error per cause. ERR_CLOSED for a pipe that closed without one.
 */
export function pipeClosed(e: Error | undefined): SabreError {
  return new SabreError(e instanceof SabreError ? e.code : ErrorCode.Closed, `dedup: the pipe closed${e ? `: ${e.message}` : ''}`);
}

/** RDMA WRITE from the sender's device memory into the receiver's landing zone. */
export interface RdmaWritePath {
  /**
   * Copy `src` bytes of the object (already in device memory, as `stage` returned it) to the
   * remote pieces; resolve when every write has completed (placed at the receiver). `onPosted`
   * (only where `ordered`): called once every piece is posted.
   */
  write(pieces: ReadonlyArray<{ src: number; len: number; remoteAddr: number }>, rkey: number, onPosted?: () => void): Promise<void>;
  /**
   * Whether a message the pipe sends after a write's pieces are all posted is placed at the
   * receiver after them (writes and messages on one rc QP): then a ROUND goes right behind its
   * writes instead of waiting for their completions.
   */
  readonly ordered?: boolean;
  /** Drop the writes not posted yet (their promises reject): the transfer they were for is over. */
  cancel?(): void;
  /** Place `bytes` in registered device memory the writes can read from; returns the address. */
  stage(bytes: Uint8Array): number;
  /**
   * Registered device memory for an object of `length` bytes that the caller fills itself (the
   * writes read from it, like a stage): its address and a view of it. Without it a DedupSource
   * is read into a buffer first and staged.
   */
  reserve?(length: number): { addr: number; view: Uint8Array };
}

/**
 * An object the sender reads into its staging memory itself, a piece at a time, chunking each
 * piece as it is in (a file: no copy of it outside device memory, and the chunking starts with
 * the first piece instead of after the last).
 */
export interface DedupSource {
  readonly length: number;
  /** Read bytes of the object from offset `at` into `into` (at most its length); 0: there are no more. */
  read(into: Uint8Array, at: number): Promise<number>;
}

export const isDedupSource = (v: unknown): v is DedupSource =>
  !!v && typeof v === 'object' && !(v instanceof Uint8Array) && Number.isSafeInteger((v as DedupSource).length) && (v as DedupSource).length >= 0 && typeof (v as DedupSource).read === 'function';
