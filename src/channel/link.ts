// What the two halves of a channel core (./inbound.ts: this end as receiver, ./outbound.ts: this
// end as sender) ask of the core that holds them (./core.ts): one outbox, one control-message
// queue with its credits, one work-request table, one way to fail.
import type { ResolvedOptions } from './options.js';
import type { Action, ChannelPorts, FailKind, Region } from './ports.js';
import type { Body } from './wire.js';

/** Writes up to this many bytes are inline: verbs copies them at post time (QueuePair maxInline cap). */
export const INLINE_MAX = 4096;

/**
 * Control writes this end keeps awaiting their completions, at most (the send queue has room for
 * them: ./hub.ts). The peer's mailbox credits bound them too (64 slots at most), but a credit
 * comes back when the peer has the message, which can be before this end has polled the write's
 * completion: the credits alone do not bound what the send queue holds.
 */
export const MAX_CTRL_WRS = 64;

/** A control message waiting for a mailbox credit. Built at post time, so its fields are current then. */
export interface CtrlEntry {
  /** The body to send now, or undefined to drop the entry (no longer needed). */
  make(): Body | undefined;
  /** Runs right after the write is posted, before anything else is (SWITCH activates the new epoch here). */
  onPost?(wrId: number): void;
}

/**
 * What a posted work request was, for its completion: the low 3 bits of its wrId (no table per
 * channel to keep — an idle channel's memory is the point of M2).
 */
export const WrKind = { Ctrl: 0, Hello: 1, Data: 2, Read: 3, /** RDMA WRITEs of dedup sends (./dedup.ts; the shell's, not the core's) */ Dedup: 4 } as const;
export type WrKindValue = (typeof WrKind)[keyof typeof WrKind];
export const wrKindOf = (wrId: number): number => wrId & 7;

export interface Link {
  readonly o: ResolvedOptions;
  readonly ports: ChannelPorts;
  /** HELLO buffer, mailbox, send scratch and phase 0's slots (the channel's life). */
  readonly fixed: Region;
  /** The send scratch in the fixed region (inline writes up to its length). */
  readonly scratchOff: number;
  readonly scratchLen: number;
  /** Where phase 0's slots start in the fixed region. */
  readonly slots0Off: number;
  emit(a: Action): void;
  fail(kind: FailKind, message: string): void;
  queueCtrl(e: CtrlEntry, front?: boolean): void;
  newWr(kind: WrKindValue): number;
  /** Post receives up to what the live slots and the mailbox need. */
  refill(): void;
  /** True while messages may still be posted (not failed, not torn down). */
  readonly live: boolean;
  /** Untrusted (pre-authentication): the largest message the peer may send; 0 once trusted. */
  readonly preauthMax: number;
  /** Bytes of staging this end may register for writes into the peer's slots (local policy, not the peer's grant). */
  readonly stageCap: number;
  /** The peer went past a local limit: count the refusal and fail the channel (ERR_LIMIT_EXCEEDED). */
  refuse(message: string): void;
}
