// The vocabulary of a transport context (./context.ts): what it sends and reports, its options
// and their defaults, its counters, and the serial-number arithmetic of PSNs and timestamps.
import type { UdpHdr } from '../../wire/udp.js';

/**
 * A payload to send: one buffer, or a gather list sent as one datagram (no copy; the parts
 * must stay unchanged until the payload is acked or failed, since it may be sent again).
 */
export type TxPayload = Uint8Array | readonly Uint8Array[];

export interface TxDatagram {
  hdr: UdpHdr;
  payload: TxPayload | null;
  /** The QP numbers given to send() with this payload (0 on ACKs); they ride in the header. */
  dstQpn: number;
  srcQpn: number;
}

export const MAX_SACK_BLOCKS = 4;

export interface ContextOptions {
  /** Max packets outstanding and span of the receive bitmap (power of two). */
  maxWindow: number;
  /** Payloads the receiver holds delivered-but-unreleased before it stops accepting more. */
  rcvCredit: number;
  /**
   * The owner's hold on receiving (shared by every context of an endpoint): while `held`, a
   * new DATA payload is dropped unacknowledged, as without credit, and the peer sends it again.
   */
  rxHold?: { held: boolean };
  /** What the sender assumes the peer allows before its first ACK arrives. */
  initialPeerWindow: number;
  initialCwnd: number;
  minCwnd: number;
  initialRtoMs: number;
  minRtoMs: number;
  maxRtoMs: number;
  /** Consecutive timeouts without progress before everything outstanding fails… */
  retryLimit: number;
  /**
   * …and at least this long since the first of them: backed-off timeouts start at tens of ms,
   * so a count alone gives up on a live peer whose event loop stalls a few seconds. 0: the
   * count alone decides.
   */
  retryTimeoutMs: number;
  /** Fast retransmit once this many later packets are SACKed. */
  dupThresh: number;
  ackEvery: number;
  ackDelayMs: number;
  /** Payloads queued (not yet given a PSN) before send() refuses. */
  maxSendQueue: number;
  /**
   * First PSN of both directions. Both ends must use the same value (nothing negotiates it):
   * 0 on the wire today; tests set it near 2^32 to cover serial-number wraparound.
   */
  initialPsn: number;
  /**
   * Liveness of an idle peer (0: off). When the owner keeps the peer (keepalive(now, true):
   * connected rc QPs) and nothing has been heard from it for this long while nothing of ours is
   * outstanding, an ACK asking for an ACK goes as a probe, then again every keepaliveMs / 2;
   * after keepaliveProbes unanswered the context fails ('peer-lost'): a peer is declared lost
   * within keepaliveMs × (1 + keepaliveProbes / 2), and one whose event loop stalls for less than
   * keepaliveProbes / 2 × keepaliveMs is not. With work outstanding the retransmission timer
   * decides instead.
   */
  keepaliveMs: number;
  keepaliveProbes: number;
}

export const defaultContextOptions: ContextOptions = {
  maxWindow: 1024,
  rcvCredit: 512,
  initialPeerWindow: 32,
  initialCwnd: 16,
  minCwnd: 2,
  initialRtoMs: 50,
  minRtoMs: 10,
  maxRtoMs: 1000,
  retryLimit: 8,
  retryTimeoutMs: 6000,
  dupThresh: 3,
  ackEvery: 4,
  ackDelayMs: 1,
  maxSendQueue: 1 << 16,
  initialPsn: 0,
  // 3 s: a killed idle peer is seen within 7.5 s, under the 8 s a QP with work outstanding
  // takes (timeoutMs), and a live peer whose event loop stalls (a long GC, a synchronous
  // hash of a large buffer, a loaded CI machine) for up to 4.5 s is not torn down.
  keepaliveMs: 3000,
  keepaliveProbes: 3,
};

export type FailReason = 'retry-exceeded' | 'peer-reset' | 'peer-lost' | 'closed';

/** What receive() made of a datagram: used, or refused whole for the field that failed. */
export const RxVerdict = { Ok: 0, BadAck: 1, BadSack: 2 } as const;
export type RxVerdictValue = (typeof RxVerdict)[keyof typeof RxVerdict];

export interface ContextCounters {
  txData: number;
  retransmits: number;
  fastRetransmits: number;
  probes: number;
  timeouts: number;
  txAcks: number;
  rxData: number;
  rxDuplicate: number;
  rxOutOfWindow: number;
  rxNoCredit: number;
  delivered: number;
  /** Datagrams refused whole: a cumulative ack, or a SACK block, outside what was sent. */
  rxBadAck: number;
  rxBadSack: number;
  /** PSNs visited by ACK processing and loss detection (bounded per datagram by the window). */
  scanned: number;
  /** Keepalive probes sent (ACKs asking for an ACK on an idle context), and answers sent to the peer's. */
  keepalives: number;
  keepaliveAnswers: number;
}

/** Serial-number difference a - b over u32 PSNs (RFC 1982 style). */
export function psnDiff(a: number, b: number): number {
  return (a - b) | 0;
}

/** A header timestamp: microseconds, mod 2^32, never 0 (0 means none). */
export function tsNow(nowMs: number): number {
  return Math.floor(nowMs * 1000) >>> 0 || 1;
}
