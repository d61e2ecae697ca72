// The transport context (M5): the reliability state one device keeps for one peer device,
// shared by every QP that talks to that peer. Sans-I/O: fed payloads, decoded packet fields
// and a clock; it answers with datagrams to transmit and with delivery/ack/failure events.
//
// Sender: PSNs per payload, a SACK scoreboard, FACK-style fast retransmit, an RTO from
// timestamp RTT samples (RFC 6298) with exponential backoff and a retry limit, and a
// congestion window (slow start, AIMD, halve on loss, collapse on RTO) in packets, never
// beyond the window the receiver advertises. Receiver: a bitmap over the PSNs it may still
// see, so duplicates and replays are suppressed and each payload is delivered exactly once,
// at arrival (ordering is the engine's job); cumulative ACK + SACK blocks, delayed ACKs.
//
// A receiver never reneges: it delivers before it acknowledges, so a SACKed payload is
// already in the peer engine's hands and is reported `acked` at once.
//
// Nothing the peer says drives work beyond the window (issue #11): before any of it is used,
// the cumulative ack and every SACK block are checked against what was sent (RFC 5961 §5's
// acceptable range: [sndUna - maxWindow, sndNxt]); a datagram whose ack fields fail is
// dropped whole and changes nothing, so the PSNs one datagram can make us visit are at most a
// few windows' worth (counted in `counters.scanned`), whatever numbers it carries.
//
// Headers are src/wire/udp.ts's `UdpHdr`: every DATA and ACK carries the receive side's
// state (ackPsn, SACK blocks, window); RESET is handled by the endpoint.
import { UdpType, type UdpHdr, type SackBlock } from '../../wire/udp.js';

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
  /** What the sender assumes the peer allows before its first ACK arrives. */
  initialPeerWindow: number;
  initialCwnd: number;
  minCwnd: number;
  initialRtoMs: number;
  minRtoMs: number;
  maxRtoMs: number;
  /** Consecutive timeouts without progress before everything outstanding fails. */
  retryLimit: number;
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

interface Queued {
  id: number;
  payload: TxPayload;
  dstQpn: number;
  srcQpn: number;
}

const USED = 1;
const INFLIGHT = 2;
const SACKED = 4;
const LOST = 8;

/** Serial-number difference a - b over u32 PSNs (RFC 1982 style). */
export function psnDiff(a: number, b: number): number {
  return (a - b) | 0;
}

function tsNow(nowMs: number): number {
  return Math.floor(nowMs * 1000) >>> 0 || 1;
}

export class TransportContext {
  readonly opts: ContextOptions;
  localId: number;
  peerId: number;
  state: 'open' | 'failed' = 'open';
  /** Time of the last packet received from the peer or payload queued (for idle reclaim). */
  lastActivity: number;
  readonly counters: ContextCounters = {
    txData: 0, retransmits: 0, fastRetransmits: 0, probes: 0, timeouts: 0, txAcks: 0,
    rxData: 0, rxDuplicate: 0, rxOutOfWindow: 0, rxNoCredit: 0, delivered: 0, rxBadAck: 0, rxBadSack: 0, scanned: 0,
    keepalives: 0, keepaliveAnswers: 0,
  };
  /**
   * First contact, before the peer has shown it keeps state for us (a COOKIE or its answer):
   * one DATA datagram in flight at most, as a SYN — the receiver keeps nothing and drops it.
   */
  probing = false;

  // Events for the owner to drain.
  delivered: Uint8Array[] = [];
  deliveredMeta: unknown[] = [];
  acked: number[] = [];
  failed: number[] = [];
  failReason: FailReason | undefined;

  // --- sender ---
  private nextId = 1;
  private queue: Queued[] = [];
  private qHead = 0;
  private readonly mask: number;
  private slotPayload: (TxPayload | null)[];
  private slotId: Float64Array;
  private slotDstQpn: Uint32Array;
  private slotSrcQpn: Uint32Array;
  private slotFlags: Uint8Array;
  private slotLossMark: Int32Array;
  private sndUna = 0;
  private sndNxt = 0;
  private pipe = 0;
  private cwnd: number;
  private ssthresh = Infinity;
  private inRecovery = false;
  private recoveryPoint = 0;
  private fack = -1; // highest PSN known received; valid when haveFack
  private haveFack = false;
  private retx: number[] = [];
  private retxHead = 0;
  private peerRightEdge: number;
  private peerRwnd: number;
  private peerCum = 0;
  private srtt = 0;
  private rttvar = 0;
  private rto: number;
  private rtoDeadline = Infinity;
  // Probe timeout (tail loss probe): a couple of RTTs without an ACK resend the oldest
  // unacknowledged packet once or twice before the conservative RTO collapses the window.
  private ptoDeadline = Infinity;
  private probes = 0;
  private probePsn = -1;
  private retries = 0;
  private probeDue = false;
  // Keepalive: when the next probe (or the check whether one is wanted) is due, the probes
  // sent since the peer was last heard, and a probe owed to the next flush.
  private kaAt: number;
  private kaSent = 0;
  private kaOwed = false;

  // --- receiver ---
  private rcvNxt = 0;
  private rcvSeen: Uint8Array;
  private rcvHighest = -1;
  private ooo = 0;
  private pending = 0;
  private unacked = 0;
  private ackNow = false;
  private ackDeadline = Infinity;
  private tsRecent = 0;
  private lastRcvPsn = 0;

  constructor(localId: number, now: number, opts: Partial<ContextOptions> = {}, peerId = 0) {
    this.opts = { ...defaultContextOptions, ...opts };
    const w = this.opts.maxWindow;
    if (w < 4 || (w & (w - 1)) !== 0) throw new RangeError('maxWindow must be a power of two >= 4');
    this.mask = w - 1;
    this.slotPayload = new Array(w).fill(null);
    this.slotId = new Float64Array(w);
    this.slotDstQpn = new Uint32Array(w);
    this.slotSrcQpn = new Uint32Array(w);
    this.slotFlags = new Uint8Array(w);
    this.slotLossMark = new Int32Array(w);
    this.rcvSeen = new Uint8Array(w);
    this.localId = localId;
    this.peerId = peerId;
    this.lastActivity = now;
    this.kaAt = this.opts.keepaliveMs > 0 ? now + this.opts.keepaliveMs : Infinity;
    this.cwnd = this.opts.initialCwnd;
    this.rto = this.opts.initialRtoMs;
    this.peerRwnd = Math.min(this.opts.initialPeerWindow, w);
    const isn = this.opts.initialPsn >>> 0;
    this.sndUna = this.sndNxt = this.peerCum = this.rcvNxt = this.lastRcvPsn = isn;
    this.rcvHighest = (isn - 1) | 0;
    this.peerRightEdge = (isn + this.peerRwnd) >>> 0;
  }

  /**
   * Queue a payload; returns its id (reported later in `acked` or `failed`), or 0 when the
   * context has failed or its queue is full. The QPNs travel with it in the header. `id`:
   * the owner's own nonzero id for it (default: one counted by the context).
   */
  send(payload: TxPayload, now: number, dstQpn = 0, srcQpn = 0, id = 0): number {
    if (this.state !== 'open') return 0;
    if (this.queue.length - this.qHead >= this.opts.maxSendQueue) return 0;
    if (id === 0) id = this.nextId++;
    this.queue.push({ id, payload, dstQpn, srcQpn });
    this.lastActivity = now;
    return id;
  }

  /** Payloads accepted by send() and not yet acked or failed. */
  get outstanding(): number {
    let n = this.queue.length - this.qHead;
    for (let p = this.sndUna; p !== this.sndNxt; p = (p + 1) >>> 0) {
      if (!(this.slotFlags[p & this.mask] & SACKED)) n++;
    }
    return n;
  }

  /** Nothing to send, nothing unacknowledged, no ACK owed: the context may be reclaimed. */
  get quiescent(): boolean {
    return this.sndUna === this.sndNxt && this.queue.length === this.qHead && !this.ackDue();
  }

  get stats(): { cwnd: number; ssthresh: number; srtt: number; rto: number; pipe: number; peerRwnd: number; pending: number } {
    return { cwnd: this.cwnd, ssthresh: this.ssthresh, srtt: this.srtt, rto: this.rto, pipe: this.pipe, peerRwnd: this.peerRwnd, pending: this.pending };
  }

  /** The owner finished with `n` delivered payloads: their receive credit returns. True: a window update is due now. */
  release(n: number): boolean {
    const before = this.advertisedWindow();
    this.pending = Math.max(0, this.pending - n);
    // A sender stalled on a small window learns it opened without waiting for its probe.
    if (before < this.opts.rcvCredit / 4 && this.advertisedWindow() >= 2 * before + 1) this.ackNow = true;
    return this.ackNow;
  }

  nextDeadline(): number {
    if (this.state !== 'open') return Infinity;
    return Math.min(this.rtoDeadline, this.ptoDeadline, this.ackNow ? -Infinity : this.ackDeadline, this.keepaliveDeadline());
  }

  /**
   * When keepalive(now, …) is next due: Infinity while it is off, while the handshake is not
   * done, or while something of ours is outstanding (the retransmission timer watches then).
   */
  keepaliveDeadline(): number {
    if (this.state !== 'open' || this.kaAt === Infinity || this.peerId === 0 || this.probing) return Infinity;
    if (this.sndUna !== this.sndNxt || this.qHead < this.queue.length) return Infinity;
    return this.kaAt;
  }

  /**
   * The keepalive timer fired: `wanted` says whether the owner still keeps this peer (it has
   * connected rc QPs to it). Not wanted: nothing is sent, asked again a keepalive interval
   * later. Wanted: a probe goes with the next flush, or — keepaliveProbes sent and none
   * answered — the context fails ('peer-lost'). Only an answer from inside this context (its
   * two ids and an acceptable ack, checked by the owner and receive()) counts as hearing the
   * peer, so an off-path sender cannot hold a dead peer up, and nothing it sends can make the
   * probes go unanswered.
   */
  keepalive(now: number, wanted: boolean): void {
    if (this.keepaliveDeadline() > now) return;
    const ms = this.opts.keepaliveMs;
    if (!wanted) {
      this.kaSent = 0;
      this.kaAt = now + ms;
      return;
    }
    if (this.kaSent >= this.opts.keepaliveProbes) {
      this.fail('peer-lost');
      return;
    }
    this.kaSent++;
    this.kaOwed = true;
    this.kaAt = now + Math.max(1, ms / 2);
  }

  /**
   * Process one decoded packet from the peer (already matched to this context). A delivered
   * payload is appended to `delivered`; `meta` (e.g. the header's QPNs, whatever the owner
   * wants back) goes to `deliveredMeta` at the same index.
   */
  receive<M>(h: UdpHdr, payload: Uint8Array | null, now: number, meta?: M): RxVerdictValue {
    if (this.state !== 'open' || (h.type !== UdpType.Data && h.type !== UdpType.Ack)) return RxVerdict.Ok;
    const v = this.checkAck(h);
    if (v !== RxVerdict.Ok) {
      if (v === RxVerdict.BadAck) this.counters.rxBadAck++;
      else this.counters.rxBadSack++;
      return v;
    }
    this.lastActivity = now;
    if (this.kaAt !== Infinity) {
      this.kaSent = 0;
      this.kaAt = now + this.opts.keepaliveMs;
    }
    // A peer's keepalive probe (an ACK asking for one): answered with one ACK, the same size.
    if (h.type === UdpType.Ack && h.ackReq) {
      this.ackNow = true;
      this.counters.keepaliveAnswers++;
    }
    this.onAck(h, now);
    if (h.type === UdpType.Data && payload !== null) this.onData(h, payload, now, meta);
    return RxVerdict.Ok;
  }

  /**
   * The peer showed it keeps state for us (it challenged us with a COOKIE, or answered): the
   * window opens, and what we sent to a receiver that kept nothing goes again at once — not
   * as loss (no congestion response, no retry counted). `tsEcr` echoes our probe: an RTT sample.
   */
  validated(now: number, tsEcr: number): void {
    if (this.state !== 'open') return;
    this.probing = false;
    if (tsEcr !== 0) {
      const rttMs = ((tsNow(now) - tsEcr) >>> 0) / 1000;
      if (rttMs < 60_000) {
        this.rttSample(rttMs);
        this.rto = this.computeRto();
      }
    }
    const mask = this.mask;
    for (let p = this.sndUna; p !== this.sndNxt; p = (p + 1) >>> 0) {
      const i = p & mask;
      const f = this.slotFlags[i];
      if (f & SACKED) continue;
      if (f & INFLIGHT) this.pipe--;
      this.slotFlags[i] = (f & ~INFLIGHT) | LOST;
      this.retx.push(p);
    }
    this.retries = 0;
    this.probes = 0;
    this.rtoDeadline = Infinity;
    this.ptoDeadline = Infinity;
  }

  /** Fire timers due at `now`. */
  tick(now: number): void {
    if (this.state !== 'open') return;
    if (now >= this.rtoDeadline) this.onTimeout(now);
    else if (now >= this.ptoDeadline) this.onProbeTimeout(now);
  }

  /**
   * Append every datagram that may leave now, at most `limit` DATA datagrams; returns true when
   * the limit held back DATA the window would have let go (the owner flushes again soon).
   */
  flush(now: number, out: TxDatagram[], limit = Infinity): boolean {
    if (this.state !== 'open') return false;
    const start = out.length;
    const end = limit === Infinity ? Infinity : start + limit;
    const mask = this.mask;
    if (this.probePsn !== -1) {
      const psn = this.probePsn >>> 0;
      this.probePsn = -1;
      const i = psn & mask;
      const f = this.slotFlags[i];
      if (psnDiff(psn, this.sndUna) >= 0 && psnDiff(psn, this.sndNxt) < 0 && !(f & SACKED)) {
        if (!(f & INFLIGHT)) this.pipe++;
        this.slotFlags[i] = (f & ~LOST) | INFLIGHT;
        this.counters.retransmits++;
        const d = this.dataDatagram(psn, this.slotPayload[i], this.slotDstQpn[i], this.slotSrcQpn[i], true, now);
        d.hdr.ackReq = true;
        out.push(d);
      }
    }
    const cwnd = this.probing ? 1 : this.cwnd;
    // Retransmissions first: they hold back the peer's cumulative ack.
    while (this.retxHead < this.retx.length && this.pipe < cwnd && out.length < end) {
      const psn = this.retx[this.retxHead++];
      const i = psn & mask;
      const f = this.slotFlags[i];
      if (!(f & LOST) || psnDiff(psn, this.sndUna) < 0 || psnDiff(psn, this.sndNxt) >= 0) continue;
      this.slotFlags[i] = (f & ~LOST) | INFLIGHT;
      this.slotLossMark[i] = (this.sndNxt - 1) | 0;
      this.pipe++;
      this.counters.retransmits++;
      const d = this.dataDatagram(psn, this.slotPayload[i], this.slotDstQpn[i], this.slotSrcQpn[i], true, now);
      d.hdr.ackReq = true;
      out.push(d);
    }
    if (this.retxHead === this.retx.length && this.retxHead > 0) {
      this.retx.length = 0;
      this.retxHead = 0;
    }
    while (
      this.qHead < this.queue.length &&
      out.length < end &&
      (this.pipe < cwnd || (this.probeDue && !this.probing)) &&
      psnDiff(this.sndNxt, this.sndUna) < this.opts.maxWindow &&
      (psnDiff(this.sndNxt, this.peerRightEdge) < 0 || this.probeDue)
    ) {
      this.probeDue = false;
      const q = this.queue[this.qHead];
      this.queue[this.qHead++] = undefined as never;
      const psn = this.sndNxt;
      this.sndNxt = (psn + 1) >>> 0;
      const i = psn & mask;
      this.slotPayload[i] = q.payload;
      this.slotId[i] = q.id;
      this.slotDstQpn[i] = q.dstQpn;
      this.slotSrcQpn[i] = q.srcQpn;
      this.slotFlags[i] = USED | INFLIGHT;
      this.slotLossMark[i] = psn | 0;
      this.pipe++;
      this.counters.txData++;
      const d = this.dataDatagram(psn, q.payload, q.dstQpn, q.srcQpn, false, now);
      // Ask for an ACK at once when nothing more will follow soon: the queue ran dry or the
      // window is full (a delayed ACK would stall the sender for the ACK timer).
      if (this.qHead === this.queue.length || (this.pipe >= this.cwnd && this.cwnd < 2 * this.opts.ackEvery + 2)) d.hdr.ackReq = true;
      out.push(d);
    }
    this.probeDue = false;
    if (this.qHead > 1024 && this.qHead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.qHead);
      this.qHead = 0;
    }
    const more = out.length >= end && (this.retxHead < this.retx.length || this.qHead < this.queue.length);
    if (out.length > start) {
      if (this.rtoDeadline === Infinity) this.rtoDeadline = now + this.rto;
      if (this.ptoDeadline === Infinity && this.probes === 0) this.ptoDeadline = now + this.pto();
    } else if (this.kaOwed) {
      this.counters.keepalives++;
      const hdr = this.header(false, this.sndNxt, now);
      hdr.ackReq = true;
      out.push({ hdr, payload: null, dstQpn: 0, srcQpn: 0 });
    } else if (this.ackDue(now)) {
      this.counters.txAcks++;
      out.push({ hdr: this.header(false, this.sndNxt, now), payload: null, dstQpn: 0, srcQpn: 0 });
    }
    this.kaOwed = false;
    this.armPersist(now);
    return more;
  }

  /** Give up on everything outstanding (peer gone, device closing). */
  fail(reason: FailReason): void {
    if (this.state !== 'open') return;
    for (const e of this.takeUnacked()) this.failed.push(e.id);
    this.state = 'failed';
    this.failReason = reason;
    this.rtoDeadline = Infinity;
    this.ptoDeadline = Infinity;
    this.ackDeadline = Infinity;
    this.ackNow = false;
  }

  /**
   * Start a new incarnation towards the same peer address: fresh ids and PSN spaces.
   * 'requeue' keeps every unacknowledged payload (with its id) for the new stream;
   * 'fail' reports them failed.
   */
  restart(newLocalId: number, newPeerId: number, mode: 'requeue' | 'fail', now: number): void {
    const unacked = this.takeUnacked();
    if (mode === 'fail') for (const e of unacked) this.failed.push(e.id);
    const keepNextId = this.nextId;
    const fresh = new TransportContext(newLocalId, now, this.opts, newPeerId);
    const events = { delivered: this.delivered, meta: this.deliveredMeta, acked: this.acked, failed: this.failed, counters: this.counters };
    Object.assign(this, fresh);
    this.delivered = events.delivered;
    this.deliveredMeta = events.meta;
    this.acked = events.acked;
    this.failed = events.failed;
    Object.assign(this.counters, events.counters);
    this.nextId = keepNextId;
    if (mode === 'requeue') this.queue = unacked;
  }

  // ---------------------------------------------------------------- sender internals

  private takeUnacked(): Queued[] {
    const res: Queued[] = [];
    for (let p = this.sndUna; p !== this.sndNxt; p = (p + 1) >>> 0) {
      const i = p & this.mask;
      if (!(this.slotFlags[i] & SACKED)) res.push({ id: this.slotId[i], payload: this.slotPayload[i]!, dstQpn: this.slotDstQpn[i], srcQpn: this.slotSrcQpn[i] });
      this.slotFlags[i] = 0;
      this.slotPayload[i] = null;
    }
    for (let k = this.qHead; k < this.queue.length; k++) res.push(this.queue[k]);
    this.queue = [];
    this.qHead = 0;
    this.sndUna = this.sndNxt;
    this.pipe = 0;
    this.retx = [];
    this.retxHead = 0;
    return res;
  }

  private dataDatagram(psn: number, payload: TxPayload | null, dstQpn: number, srcQpn: number, retx: boolean, now: number): TxDatagram {
    const hdr = this.header(true, psn, now);
    hdr.retx = retx;
    hdr.dstQpn = dstQpn;
    hdr.srcQpn = srcQpn;
    return { hdr, payload, dstQpn, srcQpn };
  }

  /** Every DATA and ACK carries the receive side's state: cumulative ack, SACK, credit. */
  private header(data: boolean, psn: number, now: number): UdpHdr {
    const sack = this.ooo > 0 ? this.sackBlocks() : [];
    const rwnd = this.advertisedWindow();
    this.unacked = 0;
    this.ackNow = false;
    this.ackDeadline = Infinity;
    return {
      type: data ? UdpType.Data : UdpType.Ack, ackReq: false, retx: false, window: rwnd,
      srcCtx: this.localId, dstCtx: this.peerId, psn, ackPsn: this.rcvNxt,
      tsVal: tsNow(now), tsEcr: this.tsRecent, dstQpn: 0, srcQpn: 0, sack,
    };
  }

  /**
   * Every PSN the datagram names must lie in [sndUna - maxWindow, sndNxt] (RFC 5961 §5: older
   * acks are stale but harmless, an ack beyond what was sent is forged), SACK blocks must be
   * non-empty and above the datagram's own cumulative ack (a receiver only SACKs beyond a
   * hole). Offsets from the low edge compare without serial-number ambiguity.
   */
  private checkAck(h: UdpHdr): RxVerdictValue {
    const lo = (this.sndUna - this.opts.maxWindow) >>> 0;
    const span = (this.sndNxt - lo) >>> 0;
    const cum = (h.ackPsn - lo) >>> 0;
    if (cum > span) return RxVerdict.BadAck;
    const sack = h.sack;
    for (let b = 0; b < sack.length; b++) {
      const s = (sack[b].start - lo) >>> 0;
      const e = (sack[b].end - lo) >>> 0;
      if (e > span || s >= e || s <= cum) return RxVerdict.BadSack;
    }
    return RxVerdict.Ok;
  }

  /** Only after checkAck: every loop below runs over [sndUna, sndNxt) at most. */
  private onAck(h: UdpHdr, now: number): void {
    const mask = this.mask;
    let newly = 0;
    const cum = h.ackPsn >>> 0;
    if (psnDiff(cum, this.sndUna) > 0 && psnDiff(cum, this.sndNxt) <= 0) {
      this.counters.scanned += (cum - this.sndUna) >>> 0;
      for (let p = this.sndUna; p !== cum; p = (p + 1) >>> 0) {
        const i = p & mask;
        const f = this.slotFlags[i];
        if (!(f & SACKED)) {
          newly++;
          this.acked.push(this.slotId[i]);
        }
        if (f & INFLIGHT) this.pipe--;
        this.slotFlags[i] = 0;
        this.slotPayload[i] = null;
      }
      this.sndUna = cum;
      if (!this.haveFack || psnDiff(cum - 1, this.fack) > 0) {
        this.fack = (cum - 1) | 0;
        this.haveFack = true;
      }
    }
    const sack = h.sack;
    for (let b = 0; b < sack.length && b < MAX_SACK_BLOCKS; b++) {
      let s = sack[b].start >>> 0;
      const e = sack[b].end >>> 0;
      if (psnDiff(s, this.sndUna) < 0) s = this.sndUna;
      const lim = psnDiff(e, this.sndNxt) > 0 ? this.sndNxt : e;
      if (psnDiff(lim, s) <= 0) continue;
      this.counters.scanned += (lim - s) >>> 0;
      for (let p = s; p !== lim; p = (p + 1) >>> 0) {
        const i = p & mask;
        const f = this.slotFlags[i];
        if (f & SACKED) continue;
        newly++;
        this.acked.push(this.slotId[i]);
        if (f & INFLIGHT) this.pipe--;
        this.slotFlags[i] = (f & ~(INFLIGHT | LOST)) | SACKED;
        this.slotPayload[i] = null;
      }
      if (!this.haveFack || psnDiff(lim - 1, this.fack) > 0) {
        this.fack = (lim - 1) | 0;
        this.haveFack = true;
      }
    }
    // A receiver never reneges, so SACKed packets at the left edge are done even if the
    // cumulative ack that would say so was lost or reordered.
    while (this.sndUna !== this.sndNxt && this.slotFlags[this.sndUna & mask] & SACKED) {
      this.slotFlags[this.sndUna & mask] = 0;
      this.sndUna = (this.sndUna + 1) >>> 0;
      this.counters.scanned++;
    }
    // Right edge only moves forward with acks that are not older than what we know.
    if (psnDiff(cum, this.peerCum) >= 0 && psnDiff(cum, this.sndNxt) <= 0) {
      this.peerCum = cum;
      const edge = (cum + Math.min(h.window, this.opts.maxWindow)) >>> 0;
      this.peerRwnd = h.window;
      this.peerRightEdge = edge;
    }
    if (newly > 0) {
      if (h.tsEcr !== 0) {
        const rttMs = ((tsNow(now) - h.tsEcr) >>> 0) / 1000;
        if (rttMs < 60_000) this.rttSample(rttMs);
      }
      this.retries = 0;
      this.rto = this.computeRto();
      if (this.inRecovery && psnDiff(this.sndUna, this.recoveryPoint) >= 0) this.inRecovery = false;
      if (!this.inRecovery) {
        if (this.cwnd < this.ssthresh) this.cwnd += newly;
        else this.cwnd += newly / this.cwnd;
        if (this.cwnd > this.opts.maxWindow) this.cwnd = this.opts.maxWindow;
      }
      this.rtoDeadline = this.sndUna !== this.sndNxt ? now + this.rto : Infinity;
      this.probes = 0;
      this.ptoDeadline = this.sndUna !== this.sndNxt ? now + this.pto() : Infinity;
      this.detectLoss();
    } else if (h.window === 0) {
      // The peer is alive but full: not a reason to give up on it.
      this.retries = 0;
    }
    this.armPersist(now);
  }

  private detectLoss(): void {
    if (!this.haveFack || this.sndUna === this.sndNxt) return;
    const mask = this.mask;
    const limit = (this.fack - this.opts.dupThresh + 1) | 0;
    let lost = 0;
    for (let p = this.sndUna; psnDiff(p, limit) < 0 && p !== this.sndNxt; p = (p + 1) >>> 0) {
      this.counters.scanned++;
      const i = p & mask;
      const f = this.slotFlags[i];
      if (f & (SACKED | LOST)) continue;
      if (psnDiff(this.fack, this.slotLossMark[i]) < this.opts.dupThresh) continue;
      if (f & INFLIGHT) this.pipe--;
      this.slotFlags[i] = (f & ~INFLIGHT) | LOST;
      this.retx.push(p);
      lost++;
    }
    if (lost === 0) return;
    this.counters.fastRetransmits += lost;
    if (!this.inRecovery) {
      this.inRecovery = true;
      this.recoveryPoint = this.sndNxt;
      this.ssthresh = Math.max(this.cwnd / 2, this.opts.minCwnd);
      this.cwnd = this.ssthresh;
    }
  }

  private pto(): number {
    return this.srtt === 0 ? this.opts.initialRtoMs / 2 : Math.max(2 * this.srtt + this.opts.ackDelayMs / 4, 1);
  }

  private onProbeTimeout(now: number): void {
    this.ptoDeadline = Infinity;
    if (this.sndUna === this.sndNxt || this.probes >= 2) return;
    this.probes++;
    this.counters.probes++;
    for (let p = this.sndUna; p !== this.sndNxt; p = (p + 1) >>> 0) {
      if (!(this.slotFlags[p & this.mask] & SACKED)) {
        this.probePsn = p;
        break;
      }
    }
    if (this.probes < 2) this.ptoDeadline = now + 2 * this.pto();
  }

  private onTimeout(now: number): void {
    this.ptoDeadline = Infinity;
    const outstanding = this.sndUna !== this.sndNxt;
    const windowProbe = !outstanding && this.qHead < this.queue.length;
    if (!outstanding && !windowProbe) {
      this.rtoDeadline = Infinity;
      return;
    }
    this.retries++;
    this.counters.timeouts++;
    if (this.retries > this.opts.retryLimit) {
      this.fail('retry-exceeded');
      return;
    }
    if (outstanding) {
      const mask = this.mask;
      this.retx = [];
      this.retxHead = 0;
      for (let p = this.sndUna; p !== this.sndNxt; p = (p + 1) >>> 0) {
        const i = p & mask;
        const f = this.slotFlags[i];
        if (f & SACKED) continue;
        this.slotFlags[i] = (f & ~INFLIGHT) | LOST;
        this.retx.push(p);
      }
      this.pipe = 0;
      this.ssthresh = Math.max(this.cwnd / 2, this.opts.minCwnd);
      this.cwnd = this.opts.minCwnd;
      this.inRecovery = true;
      this.recoveryPoint = this.sndNxt;
    } else {
      this.probeDue = true;
    }
    this.rto = Math.min(this.rto * 2, this.opts.maxRtoMs);
    this.rtoDeadline = now + this.rto;
  }

  /** With data queued, nothing in flight and the peer's window shut, a timer must probe it. */
  private armPersist(now: number): void {
    if (this.rtoDeadline === Infinity && this.sndUna === this.sndNxt && this.qHead < this.queue.length) {
      this.rtoDeadline = now + this.rto;
    }
  }

  private rttSample(r: number): void {
    if (this.srtt === 0) {
      this.srtt = r;
      this.rttvar = r / 2;
    } else {
      this.rttvar = 0.75 * this.rttvar + 0.25 * Math.abs(this.srtt - r);
      this.srtt = 0.875 * this.srtt + 0.125 * r;
    }
  }

  private computeRto(): number {
    if (this.srtt === 0) return this.opts.initialRtoMs;
    const r = this.srtt + Math.max(4 * this.rttvar, 0.1);
    return Math.min(Math.max(r, this.opts.minRtoMs), this.opts.maxRtoMs);
  }

  // ---------------------------------------------------------------- receiver internals

  private onData(h: UdpHdr, payload: Uint8Array, now: number, meta: unknown): void {
    const psn = h.psn >>> 0;
    const d = psnDiff(psn, this.rcvNxt);
    this.tsRecent = h.tsVal;
    if (h.ackReq) this.ackNow = true;
    if (d < 0 || (d < this.opts.maxWindow && this.rcvSeen[psn & this.mask])) {
      // The ACK that would have stopped this retransmission was lost: resend it now.
      this.counters.rxDuplicate++;
      this.ackNow = true;
      return;
    }
    if (d >= this.opts.maxWindow) {
      this.counters.rxOutOfWindow++;
      this.ackNow = true;
      return;
    }
    if (this.pending >= this.opts.rcvCredit) {
      this.counters.rxNoCredit++;
      this.ackNow = true;
      return;
    }
    this.counters.rxData++;
    this.rcvSeen[psn & this.mask] = 1;
    this.pending++;
    this.counters.delivered++;
    this.delivered.push(payload);
    this.deliveredMeta.push(meta);
    this.lastRcvPsn = psn;
    if (d === 0) {
      let p = psn;
      do {
        this.rcvSeen[p & this.mask] = 0;
        p = (p + 1) >>> 0;
        if (this.ooo > 0 && this.rcvSeen[p & this.mask]) this.ooo--;
        else break;
      } while (true);
      this.rcvNxt = p;
      if (this.ooo > 0) this.ackNow = true;
    } else {
      this.ooo++;
      // Tell the sender at once about a new hole or a filled one; packets that merely extend
      // the highest block are acked at the normal pace (SACK needs no dup-ACK per packet).
      if (psnDiff(psn, this.rcvHighest) !== 1) this.ackNow = true;
    }
    if (psnDiff(psn, this.rcvHighest) > 0) this.rcvHighest = psn;
    if (++this.unacked >= this.opts.ackEvery) this.ackNow = true;
    else if (this.ackDeadline === Infinity) this.ackDeadline = now + this.opts.ackDelayMs;
  }

  private ackDue(now?: number): boolean {
    return this.ackNow || (now !== undefined ? now >= this.ackDeadline : this.ackDeadline !== Infinity);
  }

  private advertisedWindow(): number {
    const free = Math.max(0, this.opts.rcvCredit - this.pending);
    return Math.min(this.opts.maxWindow, free + this.ooo, 0xffff);
  }

  /** The block holding the latest arrival first (RFC 2018), then the lowest blocks. */
  private sackBlocks(): SackBlock[] {
    const mask = this.mask;
    const res: SackBlock[] = [];
    const top = (this.rcvHighest + 1) >>> 0;
    const span = Math.min(psnDiff(top, this.rcvNxt), this.opts.maxWindow);
    if (psnDiff(this.lastRcvPsn, this.rcvNxt) > 0 && this.rcvSeen[this.lastRcvPsn & mask]) {
      let s = this.lastRcvPsn;
      while (psnDiff(s, this.rcvNxt) > 0 && this.rcvSeen[(s - 1) & mask]) s = (s - 1) >>> 0;
      let e = this.lastRcvPsn;
      while (psnDiff(e, top) < 0 && this.rcvSeen[e & mask]) e = (e + 1) >>> 0;
      res.push({ start: s, end: e });
    }
    let k = 1;
    while (k < span && res.length < MAX_SACK_BLOCKS) {
      const p = (this.rcvNxt + k) >>> 0;
      if (!this.rcvSeen[p & mask]) {
        k++;
        continue;
      }
      let e = k;
      while (e < span && this.rcvSeen[(this.rcvNxt + e) & mask]) e++;
      const s0 = p;
      const e0 = (this.rcvNxt + e) >>> 0;
      if (res.length === 0 || res[0].start !== s0) res.push({ start: s0, end: e0 });
      k = e;
    }
    return res;
  }
}
