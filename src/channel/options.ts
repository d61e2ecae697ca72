// Channel options: one table of defaults and limits, checked once when a channel is made.
// Errors from core; the defaults of the dedup store and of value decoding from where they live.
import { ErrorCode, SabreError } from '../core/errors.js';
import { CHAN_MAX_SLOTS, CHAN_MAX_WINDOW } from '../wire/channel-spec.js';
import { STORE_DEFAULTS } from '../dedup/store.js';
import { DEFAULT_DECODE_LIMITS } from './codec.js';

/** One rung of the ladder: this many receive slots of this many bytes. */
export interface Phase {
  slotSize: number;
  slots: number;
}

export interface ChannelOptions {
  /**
   * The receive-buffer phases this end offers its peer, smallest first (slot sizes strictly
   * increasing). A channel starts (and shrinks back to) phase 0; a message that does not fit
   * the current slots makes the sender ask for the smallest phase that fits; messages above
   * the last slot size go by rendezvous (RDMA READ); a backlog of small messages larger than
   * the current slots asks for the next phase too. Default: 256 B × 4 → 4 KiB × 8 →
   * 32 KiB × 8 (1 KiB, 32 KiB, 256 KiB registered).
   */
  ladder?: Phase[];
  /** Mailbox slots (32 B each) for the peer's control messages (4..64). Default 8. */
  ctrlSlots?: number;
  /** Messages the peer may send past what this application has taken (1..32768). Default 64. */
  window?: number;
  /** Largest message accepted from the peer, bytes. Default 64 MiB. */
  maxMessage?: number;
  /** Sends accepted and not yet placed at the peer; more wait in order (no copy). Default 64. */
  highWaterMark?: number;
  /** Sends waiting beyond highWaterMark before send() rejects with ERR_QUEUE_FULL. Default 65536. */
  maxQueued?: number;
  /** How long an enlargement, a fence or the peer's HELLO may take before the channel fails. Default 5000 ms. */
  timeoutMs?: number;
  /** Go back to phase 0 after this long without an incoming data message (0: never). Default 2000 ms. */
  shrinkAfterMs?: number;
  /** Rendezvous reads in flight at once. Default 2. */
  maxReads?: number;
  /** Bytes of received messages the application has not taken yet, past which rendezvous reads wait. Default 32 MiB. */
  maxBufferedBytes?: number;
  /**
   * Accept the peer's dedup sends (`send(bytes, { dedup: true })`, docs/dedup.md): a landing zone
   * of `dedupZoneBytes` is registered on the first one. false: they are refused. Default true.
   */
  dedup?: boolean;
  /** Landing zone for incoming dedup sends (4 slots; each holds at least one 64 KiB chunk). Default 4 MiB. */
  dedupZoneBytes?: number;
  /**
   * How long a dedup transfer (a send, or a receive begun) waits without word from the peer (a
   * message of the transfer, or a write of ours completing) before the channel fails with
   * ERR_TIMEOUT. Default 60 000 ms.
   */
  dedupIdleMs?: number;
  /**
   * The device chunk store this end's incoming dedup sends resolve against and fill
   * (docs/dedup.md, "The chunk store"). Default: the device's default store (XXH3-128 keys, one
   * scope per channel, 64 MiB, 2^20 entries). Channels of a device that name equal options share
   * one store.
   */
  dedupStore?: DedupStoreOptions;
  /** Values (keys and nested ones included) one received msgpack value may hold; more fails the channel (ERR_LIMIT_EXCEEDED). Default 2^17. */
  maxValueElements?: number;
  /** Arrays and maps one received value may nest. Default 256. */
  maxValueDepth?: number;
  /**
   * Largest staging region this end registers for writes into the peer's slots, whatever the
   * peer grants: with bigger slots or more of them than fit, fewer are used (and messages above
   * it go by rendezvous). Default 256 KiB, or this end's own largest phase if bigger (ends
   * with the same ladder keep sending eagerly what fits it).
   */
  maxStageBytes?: number;
  /** How long an offered rendezvous message may wait for the peer's DONE with no word from the peer (0: forever). Default 60 000 ms. */
  rendezvousTimeoutMs?: number;
  /**
   * How long this end's rendezvous reads may go without one completing while one is in flight
   * (0: forever); past it the channel fails ERR_TIMEOUT (rendezvousReadTimeouts). The verbs
   * watchdog ends a read only while the peer is silent; a peer that goes on talking and never
   * answers the read is held to this. A read of maxMessage must fit in it: raise it for very
   * large messages over slow paths. Default 60 000 ms.
   */
  rendezvousReadTimeoutMs?: number;
  /**
   * Bytes of rendezvous messages this device holds (being read, or read and not yet taken by
   * the application) for all channels of one peer; further offers wait. Default 64 MiB.
   */
  maxPeerRendezvousBytes?: number;
  /** The same, for every channel of the device. Default 256 MiB. */
  maxDeviceRendezvousBytes?: number;
}

/** A channel's choice of device chunk store (option dedupStore). */
export interface DedupStoreOptions {
  /** Chunk identity: 'xxh3-128' (default) or 'sha256' (required when shared). */
  hash?: 'xxh3-128' | 'sha256';
  /** One scope for every peer and channel: a chunk any of them sent resolves for all. Needs hash 'sha256'. Default false. */
  shared?: boolean;
  /** Bytes of chunk data the store may hold (device memory). Default 64 MiB. */
  budgetBytes?: number;
  /** Entries the store may hold. Default 2^20. */
  maxEntries?: number;
}

export interface ResolvedOptions {
  ladder: readonly Phase[];
  ctrlSlots: number;
  window: number;
  maxMessage: number;
  highWaterMark: number;
  maxQueued: number;
  timeoutMs: number;
  shrinkAfterMs: number;
  maxReads: number;
  maxBufferedBytes: number;
  dedup: boolean;
  dedupZoneBytes: number;
  dedupIdleMs: number;
  /** Normalized (every field set), so equal choices find the same store. */
  dedupStore: Readonly<Required<DedupStoreOptions>>;
  maxValueElements: number;
  maxValueDepth: number;
  maxStageBytes: number;
  rendezvousTimeoutMs: number;
  rendezvousReadTimeoutMs: number;
  maxPeerRendezvousBytes: number;
  maxDeviceRendezvousBytes: number;
}

/** The seed's reference: 32 KiB × 8 = 256 KiB per connection at the largest phase. */
export const DEFAULT_LADDER: readonly Phase[] = Object.freeze([
  { slotSize: 256, slots: 4 },
  { slotSize: 4096, slots: 8 },
  { slotSize: 32768, slots: 8 },
]);

/** Largest slot a ladder may name (a phase is one region; keep it well inside device memory). */
export const MAX_SLOT_SIZE = 16 * 1024 * 1024;
export const MAX_PHASE_BYTES = 64 * 1024 * 1024;

const bad = (msg: string): SabreError => new SabreError(ErrorCode.InvalidArgument, msg);

function int(v: unknown, name: string, def: number, min: number, max: number): number {
  if (v === undefined) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw bad(`channel option ${name} must be an integer in ${min}..${max}`);
  return v;
}

function flag(v: unknown, name: string, def: boolean): boolean {
  if (v === undefined) return def;
  if (typeof v !== 'boolean') throw bad(`channel option ${name} must be a boolean`);
  return v;
}

/** Resolved options shared by the channels made with equal options (an idle channel holds a pointer, not a copy). */
const memo = new Map<string, ResolvedOptions>();

export function resolveOptions(o: ChannelOptions | undefined): ResolvedOptions {
  let key: string;
  try {
    key = JSON.stringify(o ?? {});
  } catch {
    return resolve(o);
  }
  const hit = memo.get(key);
  if (hit) return hit;
  const r = resolve(o);
  if (memo.size >= 64) memo.delete(memo.keys().next().value!);
  memo.set(key, r);
  return r;
}

function resolve(o: ChannelOptions | undefined): ResolvedOptions {
  if (o !== undefined && (o === null || typeof o !== 'object')) throw bad('channel options must be an object');
  const opts = o ?? {};
  const ladder = opts.ladder ?? DEFAULT_LADDER;
  if (!Array.isArray(ladder) || ladder.length === 0 || ladder.length > 16) throw bad('ladder must be an array of 1..16 phases');
  let prev = 0;
  const phases: Phase[] = [];
  for (const [i, p] of ladder.entries()) {
    if (!p || typeof p !== 'object') throw bad(`ladder[${i}] must be { slotSize, slots }`);
    const slotSize = int(p.slotSize, `ladder[${i}].slotSize`, -1, 1, MAX_SLOT_SIZE);
    const slots = int(p.slots, `ladder[${i}].slots`, -1, 1, CHAN_MAX_SLOTS);
    if (slotSize <= prev) throw bad('ladder slot sizes must increase strictly');
    if (slotSize * slots > MAX_PHASE_BYTES) throw bad(`ladder[${i}] is ${slotSize * slots} bytes, more than ${MAX_PHASE_BYTES}`);
    prev = slotSize;
    phases.push({ slotSize, slots });
  }
  const maxEager = phases[phases.length - 1]!.slotSize;
  const maxMessage = int(opts.maxMessage, 'maxMessage', 64 * 1024 * 1024, 1, 0xffff_ffff);
  if (maxMessage < maxEager) throw bad('maxMessage must be at least the largest slot size');
  return Object.freeze({
    ladder: Object.freeze(phases),
    ctrlSlots: int(opts.ctrlSlots, 'ctrlSlots', 8, 4, 64),
    window: int(opts.window, 'window', 64, 1, CHAN_MAX_WINDOW),
    maxMessage,
    highWaterMark: int(opts.highWaterMark, 'highWaterMark', 64, 1, CHAN_MAX_WINDOW),
    maxQueued: int(opts.maxQueued, 'maxQueued', 65536, 0, 1 << 24),
    timeoutMs: int(opts.timeoutMs, 'timeoutMs', 5000, 1, 3_600_000),
    shrinkAfterMs: int(opts.shrinkAfterMs, 'shrinkAfterMs', 2000, 0, 86_400_000),
    maxReads: int(opts.maxReads, 'maxReads', 2, 1, 64),
    maxBufferedBytes: int(opts.maxBufferedBytes, 'maxBufferedBytes', 32 * 1024 * 1024, 0, Number.MAX_SAFE_INTEGER),
    dedup: flag(opts.dedup, 'dedup', true),
    dedupZoneBytes: int(opts.dedupZoneBytes, 'dedupZoneBytes', 4 << 20, 256 << 10, 256 << 20),
    dedupIdleMs: int(opts.dedupIdleMs, 'dedupIdleMs', 60_000, 1, 3_600_000),
    dedupStore: storeOptions(opts.dedupStore),
    maxValueElements: int(opts.maxValueElements, 'maxValueElements', DEFAULT_DECODE_LIMITS.maxElements, 1, 2 ** 31),
    maxValueDepth: int(opts.maxValueDepth, 'maxValueDepth', DEFAULT_DECODE_LIMITS.maxDepth, 1, 4096),
    maxStageBytes: int(opts.maxStageBytes, 'maxStageBytes', Math.max(256 << 10, ...phases.map((p) => p.slotSize * p.slots)), 4096, MAX_PHASE_BYTES),
    rendezvousTimeoutMs: int(opts.rendezvousTimeoutMs, 'rendezvousTimeoutMs', 60_000, 0, 86_400_000),
    rendezvousReadTimeoutMs: int(opts.rendezvousReadTimeoutMs, 'rendezvousReadTimeoutMs', 60_000, 0, 86_400_000),
    maxPeerRendezvousBytes: int(opts.maxPeerRendezvousBytes, 'maxPeerRendezvousBytes', 64 << 20, 0, Number.MAX_SAFE_INTEGER),
    maxDeviceRendezvousBytes: int(opts.maxDeviceRendezvousBytes, 'maxDeviceRendezvousBytes', 256 << 20, 0, Number.MAX_SAFE_INTEGER),
  });
}

/** The store options there are: those STORE_DEFAULTS gives a default. */
const STORE_KEYS = new Set(Object.keys(STORE_DEFAULTS));

function storeOptions(v: unknown): Readonly<Required<DedupStoreOptions>> {
  if (v === undefined) v = {};
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad('channel option dedupStore must be an object');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!STORE_KEYS.has(k)) throw bad(`channel option dedupStore.${k} is not an option (${[...STORE_KEYS].join(', ')})`);
  const hash = o.hash ?? STORE_DEFAULTS.hash;
  if (hash !== 'xxh3-128' && hash !== 'sha256') throw bad("channel option dedupStore.hash must be 'xxh3-128' or 'sha256'");
  const shared = flag(o.shared, 'dedupStore.shared', STORE_DEFAULTS.shared);
  // XXH3 is not collision-resistant against chosen bytes: one peer could make another's transfer
  // resolve to bytes it supplied. Only a cryptographic identity may span peers.
  if (shared && hash !== 'sha256') throw bad("channel option dedupStore.shared needs hash 'sha256' (xxh3-128 is not collision-resistant against chosen bytes)");
  return Object.freeze({
    hash, shared,
    budgetBytes: int(o.budgetBytes, 'dedupStore.budgetBytes', STORE_DEFAULTS.budgetBytes, 0, 2 ** 40),
    maxEntries: int(o.maxEntries, 'dedupStore.maxEntries', STORE_DEFAULTS.maxEntries, 1, 1 << 24),
  });
}

/** Options of one send. */
export interface SendOptions {
  /**
   * Move the bytes (a Uint8Array) by de-duplication (docs/dedup.md): the peer's chunks it
   * already holds from this channel are not sent again. Arrives as an ordinary message, in
   * order; ordinary sends made after it wait until it has finished.
   */
  dedup?: boolean;
}
