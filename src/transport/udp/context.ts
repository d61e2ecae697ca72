// The transport context (M5): the reliability state one device keeps for one peer device,
// shared by every QP that talks to that peer. Sans-I/O: fed payloads, decoded packet fields
// and a clock; it answers with datagrams to transmit and with delivery/ack/failure events.
//
// This file is the sender: PSNs per payload, a SACK scoreboard, FACK-style fast retransmit,
// tail-loss probes, the RTO with a retry limit, keepalives, never beyond the window the
// receiver advertises; its congestion window and RTT estimate are ./congestion.ts, the receive
// half ./receiver.ts. A receiver never reneges (it delivers before it acknowledges), so a
// SACKed payload is already in the peer engine's hands and is reported `acked` at once.
//
// Nothing the peer says drives work beyond the window: before any of it is used,
// the cumulative ack and every SACK block are checked against what was sent (RFC 5961 §5's
// acceptable range: [sndUna - maxWindow, sndNxt]); a datagram whose ack fields fail is
// dropped whole and changes nothing, so the PSNs one datagram can make us visit are at most a
// few windows' worth (counted in `counters.scanned`), whatever numbers it carries.
// Headers are src/wire/udp.ts's `UdpHdr`; RESET is handled by the endpoint.
import { UdpType, type UdpHdr } from '../../wire/udp.js';
import {
  defaultContextOptions, MAX_SACK_BLOCKS, psnDiff, RxVerdict, tsNow, type ContextCounters, type ContextOptions, type FailReason,
  type RxVerdictValue, type TxDatagram, type TxPayload,
} from './context-options.js';
import { CongestionControl } from './congestion.js';
import { ContextReceiver } from './receiver.js';


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
  private readonly cc: CongestionControl;
  private fack = -1; // highest PSN known received; valid when haveFack
  private haveFack = false;
  private retx: number[] = [];
  private retxHead = 0;
  private peerRightEdge: number;
  private peerRwnd: number;
  private peerCum = 0;
  private rtoDeadline = Infinity;
  // Probe timeout (tail loss probe): a couple of RTTs without an ACK resend the oldest
  // unacknowledged packet once or twice before the conservative RTO collapses the window.
  private ptoDeadline = Infinity;
  private probes = 0;
  private probePsn = -1;
  private retries = 0;
  private retryStart = 0;
  private probeDue = false;
  // Keepalive: when the next probe (or the check whether one is wanted) is due, the probes
  // sent since the peer was last heard, and a probe owed to the next flush.
  private kaAt: number;
  private kaSent = 0;
  private kaOwed = false;
  /** The receive half: the PSNs seen, receive credit, when an ACK is owed. */
  readonly rx: ContextReceiver;

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
    this.localId = localId;
    this.peerId = peerId;
    this.lastActivity = now;
    this.kaAt = this.opts.keepaliveMs > 0 ? now + this.opts.keepaliveMs : Infinity;
    this.cc = new CongestionControl(this.opts);
    this.peerRwnd = Math.min(this.opts.initialPeerWindow, w);
    const isn = this.opts.initialPsn >>> 0;
    this.sndUna = this.sndNxt = this.peerCum = isn;
    this.rx = new ContextReceiver(this.opts, this.counters, isn);
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
    return this.sndUna === this.sndNxt && this.queue.length === this.qHead && !this.rx.ackDue();
  }

  get stats(): { cwnd: number; ssthresh: number; srtt: number; rto: number; pipe: number; peerRwnd: number; pending: number } {
    const cc = this.cc;
    return { cwnd: cc.cwnd, ssthresh: cc.ssthresh, srtt: cc.srtt, rto: cc.rto, pipe: this.pipe, peerRwnd: this.peerRwnd, pending: this.rx.pending };
  }

  /** The owner finished with `n` delivered payloads: their receive credit returns. True: a window update is due now. */
  release(n: number): boolean {
    return this.rx.release(n);
  }

  nextDeadline(): number {
    if (this.state !== 'open') return Infinity;
    return Math.min(this.rtoDeadline, this.ptoDeadline, this.rx.ackNow ? -Infinity : this.rx.ackDeadline, this.keepaliveDeadline());
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
   * payload is appended to `delivered`.
   */
  receive(h: UdpHdr, payload: Uint8Array | null, now: number): RxVerdictValue {
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
      this.rx.ackNow = true;
      this.counters.keepaliveAnswers++;
    }
    this.onAck(h, now);
    if (h.type === UdpType.Data && payload !== null && this.rx.onData(h, now)) this.delivered.push(payload);
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
    if (tsEcr !== 0 && ((tsNow(now) - tsEcr) >>> 0) / 1000 < 60_000) {
      this.cc.sample(((tsNow(now) - tsEcr) >>> 0) / 1000);
      this.cc.resetRto();
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
    const cwnd = this.probing ? 1 : this.cc.cwnd;
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
      if (this.qHead === this.queue.length || (this.pipe >= this.cc.cwnd && this.cc.cwnd < 2 * this.opts.ackEvery + 2)) d.hdr.ackReq = true;
      out.push(d);
    }
    this.probeDue = false;
    if (this.qHead > 1024 && this.qHead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.qHead);
      this.qHead = 0;
    }
    const more = out.length >= end && (this.retxHead < this.retx.length || this.qHead < this.queue.length);
    if (out.length > start) {
      if (this.rtoDeadline === Infinity) this.rtoDeadline = now + this.cc.rto;
      if (this.ptoDeadline === Infinity && this.probes === 0) this.ptoDeadline = now + this.cc.pto();
    } else if (this.kaOwed) {
      this.counters.keepalives++;
      const hdr = this.header(false, this.sndNxt, now);
      hdr.ackReq = true;
      out.push({ hdr, payload: null, dstQpn: 0, srcQpn: 0 });
    } else if (this.rx.ackDue(now)) {
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
    this.rx.ackDeadline = Infinity;
    this.rx.ackNow = false;
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
    const events = { delivered: this.delivered, acked: this.acked, failed: this.failed, counters: this.counters };
    Object.assign(this, fresh);
    this.delivered = events.delivered;
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
    const rx = this.rx;
    const sack = rx.sack();
    const rwnd = rx.advertisedWindow();
    rx.ackSent();
    return {
      type: data ? UdpType.Data : UdpType.Ack, ackReq: false, retx: false, window: rwnd,
      srcCtx: this.localId, dstCtx: this.peerId, psn, ackPsn: rx.rcvNxt,
      tsVal: tsNow(now), tsEcr: rx.tsRecent, dstQpn: 0, srcQpn: 0, sack,
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
      if (h.tsEcr !== 0) this.cc.sample(((tsNow(now) - h.tsEcr) >>> 0) / 1000);
      this.retries = 0;
      this.cc.resetRto();
      this.cc.onAcked(newly, this.sndUna);
      this.rtoDeadline = this.sndUna !== this.sndNxt ? now + this.cc.rto : Infinity;
      this.probes = 0;
      this.ptoDeadline = this.sndUna !== this.sndNxt ? now + this.cc.pto() : Infinity;
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
    this.cc.onLoss(this.sndNxt);
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
    if (this.probes < 2) this.ptoDeadline = now + 2 * this.cc.pto();
  }

  private onTimeout(now: number): void {
    this.ptoDeadline = Infinity;
    const outstanding = this.sndUna !== this.sndNxt;
    const windowProbe = !outstanding && this.qHead < this.queue.length;
    if (!outstanding && !windowProbe) {
      this.rtoDeadline = Infinity;
      return;
    }
    if (this.retries++ === 0) this.retryStart = now;
    this.counters.timeouts++;
    if (this.retries > this.opts.retryLimit && now - this.retryStart >= this.opts.retryTimeoutMs) {
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
      this.cc.onTimeout(this.sndNxt);
    } else {
      this.probeDue = true;
    }
    this.cc.backoff();
    this.rtoDeadline = now + this.cc.rto;
  }

  /** With data queued, nothing in flight and the peer's window shut, a timer must probe it. */
  private armPersist(now: number): void {
    if (this.rtoDeadline === Infinity && this.sndUna === this.sndNxt && this.qHead < this.queue.length) {
      this.rtoDeadline = now + this.cc.rto;
    }
  }
}
