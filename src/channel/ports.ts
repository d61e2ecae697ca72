// What the sans-I/O channel core (./core.ts) needs from its surroundings, and what it asks them
// to do. The core never touches verbs, sockets or timers: it registers memory through
// ChannelPorts (synchronous, local state), and everything that goes to the peer or to the
// application comes out as an Action. The verbs shell (./channel.ts) carries the actions out
// on a QP; the tests' model (test/channel/sim.ts) carries them out on a simulated rc link
// with a memory model that checks every placement against what was granted.

/** A registered region (lkey === rkey in sabre, but the core never relies on it). */
export interface Region {
  readonly addr: number;
  readonly length: number;
  readonly lkey: number;
  readonly rkey: number;
}

/**
 * fixed: the HELLO receive buffer, the mailbox, the send scratch and the first epoch's (phase 0)
 *   receive slots (LocalWrite | RemoteWrite);
 * eager: the receive slots of a later epoch (LocalWrite | RemoteWrite);
 * stage: send staging for writes larger than the scratch (LocalWrite);
 * sink: where a rendezvous READ lands (LocalWrite);
 * source: the bytes of an offered rendezvous message (RemoteRead).
 */
export type RegionUse = 'fixed' | 'eager' | 'stage' | 'sink' | 'source';

export interface ChannelPorts {
  /** Register `length` bytes for `use`; undefined when the device has no memory for it. */
  reg(length: number, use: RegionUse): Region | undefined;
  dereg(r: Region): void;
  /** A copy of [off, off + len) of a region. */
  read(r: Region, off: number, len: number): Uint8Array;
  /** Copy bytes into a region at off. */
  write(r: Region, off: number, bytes: Uint8Array): void;
  /**
   * Hold `len` bytes of a rendezvous message (its sink, then its copy until the application
   * takes it) against the budgets shared with the peer's and the device's other channels:
   * false when they have no room now (the read waits; ./hub.ts wakes the channel later).
   * Absent: no budget beyond the channel's own.
   */
  holdRendezvous?(len: number): boolean;
  releaseRendezvous?(len: number): void;
}

/** A local segment: len bytes at region.addr + off. */
export interface Seg {
  region: Region;
  off: number;
  len: number;
}

/** Why a channel failed; the shell turns it into a SabreError code. */
/** limit: the peer went past a local limit (a refusal, counted); aborted: the peer said it failed the channel. */
export type FailKind = 'protocol' | 'timeout' | 'memory' | 'closed' | 'link' | 'limit' | 'aborted';

export type Action =
  /** Post n receives; the first one with `hello` as its buffer (only the very first post has it). */
  | { kind: 'recv'; n: number; hello?: Seg }
  /** A Send (the HELLO only): copy `bytes` into `local` and post it (inline). */
  | { kind: 'send'; wrId: number; local: Seg; bytes: Uint8Array }
  /**
   * RDMA WRITE WITH IMMEDIATE of local (undefined: a zero-length message). With `bytes`, copy
   * them into `local` right before posting — the write is inline (len <= INLINE_MAX), so `local`
   * (the send scratch) is free again as soon as it is posted; without, `local` already holds
   * the message (staging) and stays busy until the write completes.
   */
  | { kind: 'write'; wrId: number; local: Seg | undefined; bytes?: Uint8Array; remoteAddr: number; rkey: number; imm: number }
  /** RDMA READ of local.len bytes from remoteAddr into local. */
  | { kind: 'read'; wrId: number; local: Seg; remoteAddr: number; rkey: number }
  /** The peer's HELLO arrived: the channel can carry messages. */
  | { kind: 'connected' }
  /** The message with this seq is placed at the peer: its send resolves. */
  | { kind: 'placed'; seq: number }
  /** A message can be taken (pollMessage()). */
  | { kind: 'readable' }
  /** No more messages will arrive; pollMessage() returns undefined once the ready ones are gone. */
  | { kind: 'ended' }
  /** The channel failed: every outstanding send rejects with this; pollMessage() reports it after the ready messages. */
  | { kind: 'failed'; cause: FailKind; message: string }
  /** Destroy the QP, then call core.releaseMemory(): nothing will be posted again. */
  | { kind: 'teardown' };

/** How a work request ended, classified by the shell from its completion status. */
export type Outcome =
  | { ok: true }
  /**
   * flush: QP in ERROR; remote: the peer refused the access; link: retries exhausted; rnr: the
   * peer had no receive; length: a message longer than the work request's buffer (on a receive:
   * the peer sent more bytes than this end posted room for); local: our own bug.
   */
  | { ok: false; why: 'flush' | 'remote' | 'link' | 'rnr' | 'length' | 'local'; status: string };

/** A received message in sequence order. */
export interface Delivered {
  bytes: Uint8Array;
  /** The bytes are a msgpack-encoded value (decode them); otherwise deliver them as they are. */
  value: boolean;
}
