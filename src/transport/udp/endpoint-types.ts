// What the sans-I/O UDP endpoint (./endpoint.ts) takes and gives: peer addresses, its options,
// the datagrams it emits, the deliveries and failures it reports, and its counters.
import type { ContextOptions, FailReason } from './context-options.js';
import type { IntegrityCounters, IntegrityMode } from './integrity.js';

export interface PeerAddress {
  host: string;
  port: number;
}

/** CRC32C continuing from `previous`: crc(b, crc(a)) === crc(a ‖ b). */
export type Crc32cFn = (data: Uint8Array, previous?: number) => number;

/** XXH3-64 of gather lists and of received datagrams (src/kernels/xxh3-64.ts Xxh3Parts). */
export interface Xxh3Hasher {
  /** XXH3-64 of parts[from, to) concatenated, LSB first into dst[at, at + 8). */
  hash(parts: readonly Uint8Array[], from: number, to: number, dst: Uint8Array, at: number): void;
  /** Whether data[0, length - 8) hashes to its last 8 bytes. */
  check(data: Uint8Array): boolean;
}

export interface EndpointOptions {
  /** Largest datagram we emit (header + payload + trailer). Default 65000: loopback. */
  mtu: number;
  /** Datagrams longer than this are dropped unread. */
  maxDatagram: number;
  maxContexts: number;
  /** Contexts the peers of one source host can make us create by contacting us. */
  maxContextsPerHost: number;
  /** A quiescent context untouched this long is reclaimed. Keep it above the retry span. */
  idleMs: number;
  /**
   * A quiescent context the owner has not kept (keepPeer) for this long may be taken for a
   * newcomer however often its peer sends (contexts.ts reclaimIdle). Default 10 000 ms: a
   * connect's deadline (qp.connect, cm), the time a peer gets to be taken by a QP.
   */
  unownedContextMs: number;
  /** Number of sockets the shell stripes over (path index in each outgoing datagram). */
  paths: number;
  /** Old peer context ids remembered so their stray datagrams count as stale. */
  maxRetiredIds: number;
  context: Partial<ContextOptions>;
  crc32c: Crc32cFn;
  xxh3: Xxh3Hasher;
  /**
   * The integrity this device asks for (docs/integrity.md); each context settles on the
   * stronger of ours and the peer's in the handshake. Default 'xxh3'.
   */
  integrity: IntegrityMode;
  /** Source of context ids (nonzero u32, unpredictable: they are verification tags); tests pass a seeded one. */
  randomId: () => number;
  /** How long after minting a cookie is accepted back (the initiator echoes it a round trip later). */
  cookieLifetimeMs: number;
  /** RESETs a second, and the burst saved up: for the whole device, and per destination host. */
  resetRate: number;
  resetBurst: number;
  resetRatePerHost: number;
  resetBurstPerHost: number;
  /** Destination hosts with a RESET bucket of their own (the oldest is forgotten past it). */
  maxTrackedHosts: number;
  /** The device secret behind cookies and reset tokens (>= 16 bytes; 32 random bytes by default). */
  secret?: Uint8Array;
  /**
   * Parts for which this is true leave their CRC32C to the owner (a worker): frame() stops
   * at the largest such part and marks the datagram `pendingCrc` (see sealDeferred).
   */
  txOffloadable?: (part: Uint8Array) => boolean;
  /**
   * Whether the owner still keeps `peer` (the udp link: the device has connected rc QPs to it):
   * asked when an idle context's keepalive is due (context.keepaliveMs). Without it no context
   * probes its peer.
   */
  keepPeer?: (peer: PeerAddress) => boolean;
}

export interface OutDatagram {
  to: PeerAddress;
  /** Gather list: header, payload (DATA only), trailer. */
  parts: Uint8Array[];
  /** Which of the device's sockets sends it. */
  path: number;
  /**
   * Set when the trailer is not written yet: `prefix` is the CRC32C of parts[0, part); the
   * owner computes it through parts[part] (offloaded), then calls sealDeferred().
   */
  pendingCrc?: { part: number; prefix: number };
}

export interface Delivery {
  from: PeerAddress;
  /** Our context id for the peer: hand it back to release(). */
  ctx: number;
  payload: Uint8Array;
  dstQpn: number;
  srcQpn: number;
}

export interface Failure {
  /** The payload that failed; 0 for a context that failed with nothing outstanding (keepalive). */
  id: number;
  peer: PeerAddress;
  reason: FailReason;
}

export interface EndpointCounters extends IntegrityCounters {
  rxDatagrams: number;
  txDatagrams: number;
  truncated: number;
  oversized: number;
  badCrc: number;
  /** XXH3-64 trailers that did not verify. */
  badHash: number;
  malformed: number;
  /** Datagrams naming a context id we do not have. */
  unknownContext: number;
  /** Datagrams from an old incarnation of a peer, or naming our context with another peer id. */
  stale: number;
  /** Validated peers refused a context: the device cap, or their host's cap. */
  contextLimit: number;
  hostLimit: number;
  /** COOKIEs sent (first contacts answered), and echoes that came back valid, bad or too old. */
  cookiesSent: number;
  cookiesValidated: number;
  cookiesFailed: number;
  cookiesExpired: number;
  /** COOKIEs received for a context of ours waiting for one, and those for nothing we wait on. */
  cookiesReceived: number;
  cookiesIgnored: number;
  /** First contacts that cannot open a context: not DATA, or an echo without the reset token. */
  unvalidated: number;
  /** A new context id from the address of a live peer, not (yet) proven by a cookie echo. */
  restartClaims: number;
  /** Answers not sent because they would be longer than 3x what triggered them. */
  amplificationRefused: number;
  resetsSent: number;
  /** RESETs owed but held back by the device or per-host rate limit. */
  resetsSuppressed: number;
  /** RESETs to a peer whose context we dropped (reclaimed, failed), naming it from its address: outside the rate limits. */
  resetsOwed: number;
  /** RESETs with the peer's token: it dropped our context; we started a fresh stream. */
  resetsReceived: number;
  /** RESETs that did not echo both context ids (forged or misdirected): ignored. */
  resetsInvalid: number;
  /** Peer restarts proven (a cookie echo from a new incarnation, or a RESET without its token). */
  peerRestarts: number;
  /** Datagrams refused whole: cumulative ack, or a SACK block, outside what we sent. */
  badAck: number;
  badSack: number;
  contextsCreated: number;
  contextsReclaimed: number;
  /** Of contextsReclaimed: taken for a newcomer while their peer kept sending, owned by no QP of ours past unownedContextMs. */
  unownedReclaimed: number;
  contextsFailed: number;
}

export interface PollResult {
  /** A burst limit held DATA back: poll again after reading what has arrived. */
  more: boolean;
  datagrams: OutDatagram[];
  delivered: Delivery[];
  acked: number[];
  failed: Failure[];
}
