// The boundary between the NIC's driver and whatever carries its engine's frames. A link moves
// opaque frames between devices and reports what happened to them as events; it never looks
// into the engine. The driver (src/nic/driver.ts) is the one loop that joins an engine to a
// link: it hands the engine's frames to transmit(), turns each event into an engine call, and
// keeps one timer for the engine's and the link's deadlines.
import type { DeviceAddress } from './address.js';
import type { Owns } from './detach.js';
import type { Frame, Inbound } from './frame.js';
import type { PeerProfile } from './peer.js';

/**
 * Why a QP's connection went down:
 *   lost     the peer stopped answering (stream reset or ended, process killed): the oldest
 *            unfinished work request completes with RetryExcErr, as an RC QP past its retries;
 *   broken   the link found the stream broken (bad CRC, framing, a segment out of place) and
 *            sent the peer a Terminate: the oldest unfinished work request gets LocQpOpErr;
 *   refused  the connection could not be made: outstanding work is flushed;
 *   closed   the peer closed it on purpose (destroyed its QP, closed its device) and said so
 *            (the engine's close notice): outstanding work is flushed.
 */
export type QpDownCause = 'lost' | 'broken' | 'refused' | 'closed';

/**
 * One transport context of a datagram link (udp: one per peer device, shared by its QPs), as
 * dev.stats().linkContexts shows it (docs/observability.md).
 */
export interface TransportContextStats {
  /** The peer device's address, host:port. */
  peer: string;
  retransmits: number;
  fastRetransmits: number;
  tailLossProbes: number;
  rtoExpiries: number;
  keepalives: number;
  txData: number;
  rxData: number;
  /** Smoothed round-trip time and the retransmission timeout, microseconds (0: no sample yet). */
  srttUs: number;
  rtoUs: number;
  /** Congestion window and packets in flight, in datagrams; the window the peer advertises. */
  cwnd: number;
  inFlight: number;
  peerWindow: number;
  /** Payloads delivered and not yet released by the engine (receive credit in use). */
  rxPending: number;
}

/** A frame for a peer, as the engine emits it. */
export interface Outbound {
  readonly to: DeviceAddress;
  readonly frame: Frame;
}

/** What a link reports. The driver sets it once (Link.start). */
export interface LinkEvents {
  /** Frames from peers, handed to the engine as one step (one placement batch). Views valid during the call only. */
  frames(batch: Inbound[]): void;
  /** A peer device is lost for good (udp: retries exhausted, or the peer restarted and forgot our frames). */
  peerLost(peer: DeviceAddress): void;
  /**
   * Datagram links: whether the device still keeps `peer` (it has connected rc QPs to it), so
   * the link should watch an idle peer's liveness and report peerLost when it stops answering.
   */
  keepsPeer?(peer: DeviceAddress): boolean;
  /** Connection links: local rc QP `qpn` is connected; `profile` is what the peer speaks. */
  qpUp(qpn: number, profile: PeerProfile, ord?: number): void;
  /**
   * Connection links: QP `qpn`'s connection is gone. `error`: why a connection could not be
   * made, when the link knows (a SabreError with the system error as its cause): a pending
   * connect rejects with it.
   */
  qpDown(qpn: number, cause: QpDownCause, error?: Error): void;
  /**
   * Connection links, QPs whose peer sends no acks (PeerProfile.acks false): the kernel has
   * taken every byte of local rc QP `qpn`'s messages up to `ssn`, so none is read from device
   * memory any more. The engine completes the QP's Writes and Sends on it (as the peer's ack).
   * A link that reports such peers must report this, or their work never completes.
   */
  written?(qpn: number, ssn: number): void;
  /**
   * Room to send towards `peer` again after send() returned false. The seam for flow-controlled
   * senders (read responses generated as the link has room, an enforced IRD): no link reports
   * backpressure yet, and the engine does not wait for it.
   */
  writable?(peer: DeviceAddress): void;
  /**
   * Links with a deadline of their own (Link.pollTimeout): it may be earlier now (the link
   * sent or received on its own schedule); the driver re-arms its one timer.
   */
  timerChanged?(): void;
}

/** An rdma_cm-style connect that reached a listening service (tcp: carried by the MPA exchange). */
export interface ServiceRequest {
  readonly service: number;
  /** The initiator's QPN (0 when a foreign initiator named none). */
  readonly remoteQpn: number;
  readonly privateData: Uint8Array | undefined;
  /** The initiator's address as the link observed it: where the accepted QP connects to. */
  readonly from: DeviceAddress;
  /** Which device the initiator is, where `from` does not say (tcp: a dial's source port is not its device's); else addressKey(from). */
  readonly peerKey?: string;
  /** Bind the connection to local QP `qpn`; resolves when it is established. */
  accept(qpn: number, privateData?: Uint8Array): Promise<void>;
  /** `busy`: refused for want of room, not for good — the initiator tries again (listenerBusyError). */
  reject(reason: string, busy?: boolean): void;
}

/** Bytes a QP-to-QP connect's secret may have (ConnectInit.secret): at least 128 bits, at most an HMAC block. */
export const CONNECT_SECRET_MIN = 16;
export const CONNECT_SECRET_MAX = 64;

/** What a connection-oriented link (tcp) does for rc QPs: one connection per QP pair. */
export interface QpConnections {
  /**
   * Make (or adopt the one a service exchange made) the connection of rc QP `qpn` with `rqpn`
   * at `peer`; qpUp/qpDown tell how it went. Frames from it carry `peer` as their source.
   * `secret`: the peer's connect was given the same one, and must prove it (tcp).
   */
  openQp(qpn: number, peer: DeviceAddress, rqpn: number, secret?: Uint8Array): void;
  /** QP `qpn` entered ERROR or is gone: close its connection once what is queued has left. */
  closeQp(qpn: number): void;
  /** Route service connects to `handler` (undefined stops). */
  listen(service: number, handler: ((r: ServiceRequest) => void) | undefined): void;
  /** Connect QP `qpn` to the listener for `service` at `to`; the connection is bound to `qpn` when this resolves. */
  dial(qpn: number, to: DeviceAddress, service: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ remoteQpn: number; privateData: Uint8Array | undefined }>;
}

export interface Link {
  readonly address: DeviceAddress;
  /** Largest datagram / framed PDU the link emits, where it has one (udp: the path MTU; tcp: the MULPDU). */
  readonly mtu?: number;
  /** The integrity check this link asks its peers for (docs/integrity.md); inproc: none. */
  readonly integrity?: 'crc32c' | 'xxh3' | 'none';
  /** Largest DDP payload of one segment: the engine cuts messages to it. */
  readonly mss: number;
  /**
   * The link cuts tagged segments itself, to fill its datagrams (udp, like segmentation
   * offload): the engine hands each tagged message over as one segment and cuts only untagged
   * ones. Every byte range is still cut exactly once.
   */
  readonly cutsTagged?: boolean;
  /** Connection-oriented links give rc QPs their connections (and carry service exchanges). */
  readonly connections?: QpConnections;
  /** Called once by the driver, before anything is sent. */
  start(events: LinkEvents): void;
  /**
   * Hand the engine's frames to the link, in the order the engine emitted them, for any mix
   * of peers. The payload views must stay readable until the call returns or, for
   * asynchronous links, until delivery. The array itself passes to the link: the caller builds
   * a fresh one per call and does not touch it again.
   */
  transmit(out: readonly Outbound[]): void;
  /** When handleTimeout is next due (Infinity or absent: never); the driver's timer covers it. */
  pollTimeout?(): number;
  /** The link's deadline passed: retransmit, probe, give up on peers (reported as events). */
  handleTimeout?(now: number): void;
  /**
   * Back-pressure from the device: while held, the link takes in no new frames that it would
   * have to acknowledge (udp drops new DATA unacknowledged, the sender retransmits; tcp stops
   * reading its sockets). What it already took is still delivered.
   */
  holdReceive?(hold: boolean): void;
  /**
   * Memory is about to be reused (./detach.ts): every payload view the link still holds that
   * `owns` claims — frames waiting, payloads queued or kept for retransmission — becomes a copy
   * of its bytes now. False while views already handed to the system's send queue may still be
   * read: ask again later, and reuse the memory only once this says true. Links that keep no
   * views past transmit() need not have it.
   */
  detach?(owns: Owns): boolean;
  /** Work is outstanding (not just idle bookkeeping): the driver's timer keeps the process alive. */
  readonly busy?: boolean;
  /** Whether `to` can be reached now (inproc: registered; udp/tcp: a well-formed address). */
  reachable(to: DeviceAddress): boolean;
  /** Link counters, merged into Device.stats() as `link`. */
  stats?(): Record<string, number>;
  /** Datagram links: per-peer transport contexts, at most `max` (the most retransmissions first). */
  contextStats?(max: number): TransportContextStats[];
  /** May be asynchronous (sockets): the device awaits it. */
  close(): void | Promise<void>;
}
