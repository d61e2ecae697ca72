// Public data types of the verbs API (DESIGN §4).
import type { DeviceAddress } from '../core/address.js';
import type { OpcodeValue } from '../core/enums.js';
import type { RemoteSge, Sge, WorkCompletion, WrId } from '../core/work.js';
import type { AddressHandle } from './ah.js';
import type { CompletionQueue } from './cq.js';

export type { DeviceAddress } from '../core/address.js';
export type { RemoteSge, Sge, WorkCompletion, WrId } from '../core/work.js';

/** @internal A receive completion of the CM QP (ProtectionDomain.createCmQp): with the sender's address. */
export interface SourcedCompletion extends WorkCompletion {
  src?: DeviceAddress;
}

export interface SendWr {
  wrId: WrId;
  opcode: OpcodeValue;
  sgList?: Sge[];
  remoteAddr?: number;
  rkey?: number;
  /** RdmaRead only, instead of remoteAddr/rkey; at most maxSge entries. */
  remoteSgList?: RemoteSge[];
  /** uint32 immediate data (SendWithImm, RdmaWriteWithImm). */
  imm?: number;
  /** FetchAdd: the addend; CmpSwap: the compare value. A 64-bit word: -(2^63)..2^64-1 (negative: two's complement). */
  compareAdd?: bigint;
  /** CmpSwap: the value swapped in; a 64-bit word as compareAdd. */
  swap?: bigint;
  /** Default true. Unsignaled work completes silently unless it fails. */
  signaled?: boolean;
  /** srd only. */
  ah?: AddressHandle;
  /** srd only. */
  remoteQpn?: number;
}

export interface RecvWr {
  wrId: WrId;
  sgList?: Sge[];
}

export interface OpenDeviceOptions {
  transport: 'udp' | 'tcp' | 'inproc';
  /**
   * The device's address (udp, tcp; default 127.0.0.1): it listens there, and what it sends
   * leaves from there — udp datagrams, and the connections a tcp device dials (as rdma_cm binds
   * a connection's source). A wildcard (0.0.0.0, ::) listens on every address and leaves the
   * source to the system.
   */
  host?: string;
  port?: number;
  /**
   * Where the device's data path runs (udp and tcp; 0..16). 1 or more: on a NIC thread of its
   * own (a worker thread owning the sockets, the transport, the RDMAP engine, placement and the
   * timers), so one-sided writes, reads, atomics, acks and retransmissions go on while this
   * thread is busy; work and completions cross in shared-memory rings. 0: inline, on this
   * thread's event loop — the lowest round-trip latency where cores are few. inproc devices
   * always run inline. Default: the SABRE_WORKERS environment variable if set, else 1.
   * Today a device runs one NIC thread for any value ≥ 1 (`dev.workers` says what runs):
   * several per device, each owning its own sockets and a share of the peers, are not built yet.
   * docs/nic.md says when to pick which.
   */
  workers?: number;
  /**
   * With a NIC thread: how long (µs, 0..1000) it waits on its work-request ring after a turn
   * that handed this thread completions, before it returns to its event loop — a post made in
   * answer within that time reaches it directly (a futex wake, not the event loop's), while its
   * sockets wait. Default: SABRE_NIC_POLL_US if set, else 0 (off). docs/nic.md says when.
   */
  nicPollUs?: number;
  /** With nicPollUs: spin on the ring instead of a futex wait (takes a core meanwhile; only with cores to spare). Default false. */
  nicPollSpin?: boolean;
  /** Device memory sizing (bytes); regions from regMr(length) are carved out of it. */
  memoryBytes?: number;
  /** Memory regions registered at once (ibv_device_attr.max_mr), 1..2^24-1. Default 65535. */
  maxMr?: number;
  maximumMemoryBytes?: number;
  /** Largest DDP segment payload this device sends (inproc default 64 KiB; udp: what fits the MTU, at most). */
  mss?: number;
  /**
   * udp: largest datagram sent (reliability header + engine envelope + DDP segment + CRC32C).
   * Default 65000, right for loopback (fewest datagrams); across a 1500-byte-MTU network use
   * 1472 (IPv4) so no datagram is IP-fragmented. See docs/wire.md.
   */
  mtu?: number;
  /**
   * udp: sockets this device binds (1..16, default 1). The first is dev.address; once a peer
   * knows our transport context id, datagrams are striped over all of them (multipath), and
   * the peer accepts them from any of our sockets.
   */
  sockets?: number;
  /**
   * The integrity check this device asks for (docs/integrity.md). udp: 'xxh3' (default: a
   * 64-bit XXH3 trailer), 'crc32c' or 'none' (the UDP checksum only); each peer context settles
   * on the stronger of the two sides' wishes (none < crc32c < xxh3) in the handshake. tcp:
   * 'crc32c' (default) or 'none': MPA's CRC, used when either side asks (RFC 5044 §7.1).
   * inproc: ignored (nothing crosses a wire).
   */
  integrity?: 'crc32c' | 'xxh3' | 'none';
  /**
   * udp: liveness of an idle peer this device has connected rc QPs to (0 turns it off). After
   * this long without a word from it (and nothing outstanding), a keepalive probe goes, then
   * two more keepaliveMs / 2 apart; unanswered, the peer is lost: its QPs go to ERROR with
   * 'qp-fatal' and 'disconnected' (cause 'lost'), within keepaliveMs × 2.5 (docs/errors.md).
   * Default 3000 (a killed peer is seen within 7.5 s, as soon as a QP with work outstanding
   * sees it by its 8 s timeoutMs; a peer whose event loop stalls under 4.5 s is not taken for
   * dead). tcp: the kernel tells at once; ignored.
   */
  keepaliveMs?: number;
  /**
   * What a peer can make the device hold (docs/resource-bounds.md): each a positive integer,
   * defaults in parentheses. Lower them for a device that faces untrusted peers with little
   * memory, raise them for many legitimate peers; every refusal is counted in dev.stats().
   */
  limits?: DeviceLimits;
}

/** The bounds of docs/resource-bounds.md that openDevice can set. */
export interface DeviceLimits {
  /** Every transport, per QP: out-of-order entries (4096) and bytes (4 MiB) before a Terminate. */
  maxOooEntries?: number;
  maxOooBytes?: number;
  /** Per srd QP: flows (1024), and flows from one peer address (64); a source host (any of its ports, an IPv6 /64 as one host) holds at most half of maxSrdFlows. */
  maxSrdFlows?: number;
  maxSrdFlowsPerPeer?: number;
  /** rc: the peer's reads answered and not yet acknowledged (1024; tcp also enforces MPA's IRD). */
  maxIrd?: number;
  /** rc: bytes of read answers in flight per flow (64 MiB). */
  maxAnswerBytes?: number;
  /** srd: bytes of read answers in flight over all of a QP's flows (256 MiB): a read past it fails its flow. */
  maxQpAnswerBytes?: number;
  /** udp: transport contexts per device (1024) and per source host (64). */
  maxContexts?: number;
  maxContextsPerHost?: number;
  /**
   * udp: how long a transport context that no rc QP of this device is connected through keeps
   * its slot against a newcomer, however often its peer sends (10 000 ms: a connect's deadline).
   */
  unownedContextMs?: number;
  /** tcp: connections per device (1024) and per source host (128), handshakes included. */
  maxConnections?: number;
  maxConnectionsPerHost?: number;
  /** tcp: how long an accepted connection may take to finish MPA's handshake (10 000 ms). */
  handshakeTimeoutMs?: number;
  /** tcp: frames queued behind a blocked socket, per connection (16 MiB). */
  maxQueuedBytes?: number;
}

export interface CqInit {
  depth: number;
}

export interface QpInit {
  type: 'rc' | 'srd';
  sendCq: CompletionQueue;
  recvCq: CompletionQueue;
  maxSendWr: number;
  maxRecvWr: number;
  maxSge: number;
  /** Sends/writes up to this many bytes are copied at post time: the buffer is free when postSend returns. */
  maxInline?: number;
  /** Receiver-not-ready retries before RnrRetryExcErr. Default 7 (finite, unlike ibverbs' 7 = infinite). */
  rnrRetry?: number;
  /** Wait before resending a message the responder could not receive. Default 1 ms. */
  rnrTimeoutMs?: number;
  /** Reads and atomics in flight at once (initiator depth); more are queued. Default 16. */
  maxRdAtomic?: number;
  /**
   * With requests out, how long the peer may stay silent before they complete with
   * RetryExcErr (rc: the QP goes to ERROR). Covers a peer that dies after taking our datagrams
   * and, on srd, a remote QP that does not exist. Default 8000 ms: above the UDP transport's
   * own retry span, so a dead link is reported by the transport first.
   */
  timeoutMs?: number;
}

export interface ConnectInit {
  address: DeviceAddress;
  qpn: number;
  /**
   * 16..64 bytes both ends give their connect, exchanged with { address, qpn }: on tcp each end's
   * MPA handshake proves it holds it, so a host that read the QPNs cannot take the pairing with a
   * connection of its own (docs/tcp-framing.md, "Guessing the pair"). One secret per connect: on
   * tcp a QP's connect refuses one an earlier connect of that QP had (ERR_INVALID_ARGUMENT). udp and inproc
   * bind the QP to the peer's address and check nothing more.
   */
  secret?: Uint8Array;
  /** Default 10 000 ms. */
  timeoutMs?: number;
  /** Aborts the wait: the promise rejects with ERR_ABORTED and the QP goes to ERROR (reset it to retry). */
  signal?: AbortSignal;
}

export interface AhInit {
  address: DeviceAddress;
}
