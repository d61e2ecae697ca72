// What one peer can make the engine hold, per QP (the table with the numbers is
// docs/resource-bounds.md). Every refusal is counted in DeviceCounters.
//
// Out-of-order state: the messages of a flow not yet completed (InMessage records, the placed
// ranges of each, control payloads and header copies kept until the message is next). It is
// charged per QP in entries (one per pending message, one per extra range of a message with
// gaps) and in bytes (an estimate of the records, plus the payload bytes kept); a segment that
// would go past either is refused before any work — rc: Terminate (the peer broke the
// stream's resources), srd: dropped and counted. The charge is checked when a segment arrives
// and settled when its placement returns, so one placement batch (≤ 1024 segments) may pass
// the entry cap by its size.
//
// srd flows: one record per (peer address, remote QPN) a QP talks with. Capped per QP and per
// peer address; when full, a flow with nothing in flight either way and idle for 2×srdIdleMs
// is evicted (oldest first), else the new flow is refused and its segment dropped. Eviction
// forgets the flow's ssn state, so flows restart in epochs (srd-epoch.ts): a sender whose flow
// is quiet both ways for srdIdleMs starts again at ssn 1 in its next epoch, and a receiver
// whose flow from that peer has been as quiet takes any epoch, or a message below its
// expected ssn, as the start of a new one rather than as a stale copy (the link delivers each
// datagram once; nothing of the old epoch can still arrive after that long).
export interface EngineBounds {
  /** Out-of-order entries per QP (pending messages + extra placed ranges). */
  maxOooEntries: number;
  /** Out-of-order bytes per QP (record estimates + control payloads + header copies). */
  maxOooBytes: number;
  /** srd flows per QP. */
  maxSrdFlows: number;
  /**
   * srd flows per QP from one peer address (host and port). A source host (core/address
   * sourceKey: any of its ports, an IPv6 /64 as one host) holds at most half of maxSrdFlows
   * (hostFlowCap), whatever its ports.
   */
  maxSrdFlowsPerPeer: number;
  /** An srd flow quiescent this long restarts its ssn (and may be evicted after twice this). */
  srdIdleMs: number;
  /**
   * The peer's RDMA Reads answered and not yet acknowledged (the IRD), per rc QP and per srd
   * flow. One more is a Terminate (srd: that flow fails, the QP goes on). Default 1024, the largest maxRdAtomic a QP may ask for, as nothing negotiates
   * it on udp/inproc; tcp also enforces the IRD of its MPA exchange (16) in the link.
   */
  maxIrd: number;
  /**
   * rc, peers that acknowledge: bytes of read answers in flight (each a copy: the deregister
   * fence). Past it the next read waits for earlier answers to be acked; one read is always
   * answered, whatever its size.
   */
  maxAnswerBytes: number;
  /**
   * srd: bytes of read answers in flight over all of a QP's flows (each flow holds up to
   * maxAnswerBytes, and a QP up to maxSrdFlows of them: a peer that reads from many source QPNs
   * and never acks held 512 MiB of copies on one QP in 0.4 s with a 2 MiB flow budget; found by
   * an audit). A read that would take a QP past it fails its flow (readsRefused), as one past
   * the IRD does; the QP serves its other flows.
   */
  maxQpAnswerBytes: number;
}

/**
 * srd flows per QP from one source host: half the table (at least maxSrdFlowsPerPeer). One host
 * sending from many ports (one udp cookie handshake each) filled a QP's whole table and, keeping
 * its flows busy, locked every other peer out — of a listener's CM QP, every other device's
 * connect. Half, not maxSrdFlowsPerPeer: the many processes of one host (a cluster's workers,
 * a test harness) each talk to the QP from a port of their own.
 */
export const hostFlowCap = (b: EngineBounds): number => Math.max(b.maxSrdFlowsPerPeer, b.maxSrdFlows >>> 1);

export const DEFAULT_BOUNDS: EngineBounds = {
  maxOooEntries: 4096,
  maxOooBytes: 4 << 20,
  maxSrdFlows: 1024,
  maxSrdFlowsPerPeer: 64,
  srdIdleMs: 30_000,
  maxIrd: 1024,
  maxAnswerBytes: 64 << 20,
  maxQpAnswerBytes: 256 << 20,
};

/**
 * Heap bytes charged for one pending message record (InMessage, its map entry, its ranges;
 * measured ≈ 448 B with a 14-byte header copy, which is charged on top).
 */
export const MSG_BYTES = 432;
/** … and for each range beyond its first. */
export const RANGE_BYTES = 16;
