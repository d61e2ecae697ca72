// The port: what the verbs objects on the application's thread ask of the NIC, whichever
// thread the NIC runs on. Two implementations: the inline port (./inline-port.ts), where the
// driver, the engine and the link run on the calling thread (openDevice `workers: 0`), and
// the thread port (./thread-port.ts), where they run on a NIC worker thread and work requests
// and completions cross in shared-memory rings (DESIGN.md §8). Everything here is checked
// already: the verbs layer validates arguments before it calls a port.
import type { DeviceAddress } from '../core/address.js';
import type { OpcodeValue, QpStateValue } from '../core/enums.js';
import type { QpDownCause, ServiceRequest, TransportContextStats } from '../core/link.js';
import type { CompletionSink } from '../core/work.js';
import type { AllocatorStats } from '../dataplane/allocator.js';
import type { DeviceMemory } from '../dataplane/device-memory.js';
import type { OpcodeRow } from '../rdmap/opcodes.js';
import type { DeviceCounters } from '../rdmap/memory.js';
import type { EngineBounds } from '../rdmap/bounds.js';
import type { QpCaps } from '../rdmap/state.js';
import type { NicEvent } from './driver.js';

/** A registered region as the port keeps it: the keys' facts the post-time checks read. */
export interface PortMr {
  readonly stag: number;
  readonly addr: number;
  readonly length: number;
  readonly pd: number;
  readonly access: number;
  /** Memory outside the device (a region over the caller's Uint8Array). */
  readonly ext?: Uint8Array;
}

/** A checked local segment. */
export interface PortPiece {
  rec: PortMr;
  addr: number;
  len: number;
}

/** A checked send work request: the verbs SendWr fields, its opcode row, its segments. */
export interface PortSend {
  readonly wrId: number | bigint;
  readonly opcode: OpcodeValue;
  /** Default true. */
  readonly signaled?: boolean;
  readonly imm?: number;
  readonly remoteAddr?: number;
  readonly rkey?: number;
  readonly remoteSgList?: readonly { addr: number; length: number; rkey: number }[];
  readonly compareAdd?: bigint;
  readonly swap?: bigint;
}

/** srd: where a send goes (an address handle and the remote QPN). */
export interface PortDest {
  address: DeviceAddress;
  key: string;
  remoteQpn: number;
}

export interface PortQp {
  readonly qpn: number;
  readonly state: QpStateValue;
  /** Send work requests not yet out of the send queue (posted, not completed or flushed). */
  readonly sqLength: number;
  /** Receives posted and not yet consumed. */
  readonly rqLength: number;
  /** Connected to a peer that speaks no sabre extension (a standard iWARP peer). */
  readonly standardPeer: boolean;
  /**
   * Why the QP went to ERROR by itself, as its qpError event says (undefined: not down, down by
   * the application's act, or down without a cause). Known before the step's flushed
   * completions can be polled, so a consumer of those completions reads why they were flushed
   * here, whichever comes first to it, the completions or the event (a NIC thread posts its
   * events separately from its completion ring). Cleared by reset.
   */
  readonly downCause: QpDownCause | undefined;
  /** RESET → INIT. */
  init(): void;
  /**
   * `secret`: both ends' connect were given it (QueuePair.connect's; a tcp pairing proves it).
   * `passive` (links without connections): send nothing until the peer QP's hello arrives from
   * `peer`, then answer it — for a peer address the other side named but has not shown it owns.
   */
  connect(peer: DeviceAddress, rqpn: number, secret?: Uint8Array, passive?: boolean): void;
  toError(): void;
  /** ERROR/INIT → RESET. */
  reset(): void;
  postSend(w: PortSend, row: OpcodeRow, pieces: PortPiece[], total: number, dest: PortDest | undefined, inline: Uint8Array | undefined): void;
  postRecv(wrId: number | bigint, pieces: PortPiece[], total: number): void;
  /** Destroy: a connected rc QP tells a sabre peer, outstanding work flushes, the QPN leaves. */
  destroy(deviceOpen: boolean): void;
}

/**
 * What crosses between the application's thread and a NIC thread. NIC side: `doorbells` it rang
 * while the application waited for completions, `polls` of its WQE ring (nicPollUs) and
 * `pollHits` that found a post, `wakes` of it by the application's doorbell, `cqes` written.
 * `badWqes`: records of the WQE ring it dropped as malformed (./thread-wqes.ts; a
 * length in the ring's own prefix that is not a record's drops what the ring held, counted once); `ahs`: the
 * address handles it knows (at most AH_MAX, ./thread-ahs.ts); `placeHeld` placement records for
 * regions over non-shared memory held back now (the completion ring full), `placeHeldPeak` the
 * most at once, `placeMerged` merged into one held back, `receiveHolds` times it stopped taking
 * in frames for them (./thread-place.ts).
 * Application side: `appWakes` by the NIC's doorbell, `appDoorbells` it rang while the NIC slept,
 * `ahEvictions`: address-handle ids it gave up to stay within AH_MAX.
 */
export interface NicCounters {
  doorbells: number;
  badWqes: number;
  ahs: number;
  ahEvictions: number;
  placeHeld: number;
  placeHeldPeak: number;
  placeMerged: number;
  receiveHolds: number;
  polls: number;
  pollHits: number;
  wakes: number;
  cqes: number;
  appWakes: number;
  appDoorbells: number;
}

/** The device's counters and what the port's link and memory report. */
export interface PortStats {
  counters: DeviceCounters;
  memory: AllocatorStats;
  link?: Record<string, number>;
  linkContexts?: TransportContextStats[];
  /** A NIC thread's counters (NicCounters). */
  nic?: NicCounters;
}

/**
 * Where a CQ's completions come from when the NIC runs on another thread: `drain` takes what
 * the completion ring holds into the CQs (poll and wait call it first), `took` tells the NIC
 * how many the application has taken (the room a CQ has again).
 */
export interface CqSource {
  drain(): void;
  took(n: number): void;
}

/** A completion queue as a port sees it: the engine offers completions to it. */
export interface PortCq extends CompletionSink {
  readonly depth: number;
  /** A thread port binds the CQ to its completion ring. */
  bind?(source: CqSource, id: number): void;
}

/**
 * What a port reports to its device: the NIC's events, and `deviceFatal` when the NIC itself is
 * gone (its thread ended or threw: ibverbs' IBV_EVENT_DEVICE_FATAL). After it nothing of the
 * port works; the device closes.
 */
export type PortEvent = NicEvent | { kind: 'deviceFatal'; error: Error };

export interface NicPort {
  readonly address: DeviceAddress;
  readonly mtu: number | undefined;
  readonly integrity: 'crc32c' | 'xxh3' | 'none' | undefined;
  /** The largest DDP segment of an untagged message. */
  readonly mss: number;
  /** The largest control message (never cut: a Read Request) one segment carries. */
  readonly maxControl: number;
  readonly bounds: EngineBounds;
  /** The link carries rdma_cm-style exchanges in its connection handshake (tcp). */
  readonly linkServices: boolean;
  /**
   * postSend/postRecv keep the pieces they are given (the inline engine's work records do);
   * false: they are read during the call only (a WQE is written), so a poster may reuse them.
   */
  readonly keepsPieces: boolean;
  /** Posts made inside `fn` go to the NIC together (one driver step, one doorbell). */
  batch(fn: () => void): void;
  /** Where the NIC's events go (called once, by the device). */
  start(onEvent: (ev: PortEvent) => void): void;
  stats(contextsShown: number): PortStats;
  reachable(a: DeviceAddress): boolean;
  /** The device memory as this thread reaches it (features above verbs run kernels over it). */
  readonly dataPlane: DeviceMemory;
  /** A view of device memory (rebuilt if the memory has grown). */
  view(addr: number, length: number): Uint8Array;
  /** A region carved out of device memory, zeroed. */
  regDevice(length: number, pd: number, access: number): PortMr;
  /** A region over memory outside the device. */
  regExternal(buf: Uint8Array, pd: number, access: number): PortMr;
  /** The keys stop working now; device memory returns once no queued send names it. */
  deregister(mr: PortMr): void;
  lookup(stag: number): PortMr | undefined;
  /** The placement checks for a local segment (PlaceStatus). */
  check(stag: number, pd: number, addr: number, len: number, access: number): number;
  addCq(cq: PortCq): void;
  dropCq(cq: PortCq): void;
  hasQpn(qpn: number): boolean;
  /** Several NIC threads: QPs made inside `fn` go to the first (./multi-port.ts). */
  onFirstThread?<T>(fn: () => T): T;
  /** Several NIC threads: the thread the next QP goes to whatever its number (inside onFirstThread, a listener's accept), or undefined (the number decides). */
  placing?(): number | undefined;
  createQp(qpn: number, type: 'rc' | 'srd', pd: number, caps: QpCaps, sendCq: PortCq, recvCq: PortCq, reportSource: boolean): PortQp;
  listenService(service: number, handler: ((r: ServiceRequest) => void) | undefined): void;
  dialService(qpn: number, to: DeviceAddress, service: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ remoteQpn: number; privateData: Uint8Array | undefined }>;
  /** The device starts closing: its QPs are destroyed next, then stop() and close(). */
  closing(): void;
  /** No more events; the link stays open until close(). */
  stop(): void;
  close(): Promise<void>;
}
