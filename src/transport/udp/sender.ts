// The sending half of a transport context (./context.ts): PSNs per payload, a SACK scoreboard,
// FACK-style fast retransmit, tail-loss probes, the RTO with a retry limit, never beyond the
// window the receiver advertises; its congestion window and RTT estimate are ./congestion.ts.
// A receiver never reneges (it delivers before it acknowledges), so a SACKed payload is
// already in the peer engine's hands and is reported acked at once.
//
// Nothing the peer says drives work beyond the window: before any of it is used, the
// cumulative ack and every SACK block are checked against what was sent (RFC 5961 §5's
// acceptable range: [sndUna - maxWindow, sndNxt]); a datagram whose ack fields fail is
// dropped whole and changes nothing, so the PSNs one datagram can make us visit are at most a
// few windows' worth (counted in `counters.scanned`), whatever numbers it carries.
import { detachPayload, type Owns } from '../../core/detach.js';
import type { UdpHdr } from '../../wire/udp.js';
import {
  MAX_SACK_BLOCKS, psnDiff, RxVerdict, tsNow, type ContextCounters, type ContextOptions, type RxVerdictValue, type TxDatagram,
  type TxPayload,
} from './context-options.js';
import { CongestionControl } from './congestion.js';

/** A payload accepted and not yet given a PSN (or taken back from the window by takeUnacked). */
export interface Queued {
  id: number;
  payload: TxPayload;
  dstQpn: number;
  srcQpn: number;
}

/** Where the sender's DATA headers come from: the context fills in its ids and the receive side's state. */
export interface HeaderSource {
  header(data: boolean, psn: number, now: number): UdpHdr;
}

/** Half the header timestamps' wrap (2^31 µs): within it, serial comparison orders them. */
const TS_HALF_WRAP_MS = 2 ** 31 / 1000;

const USED = 1;
const INFLIGHT = 2;
const SACKED = 4;
const LOST = 8;

export class ContextSender {
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
  /** The next PSN to send (ACK-only datagrams carry it too). */
  sndNxt = 0;
  private pipe = 0;
  private readonly cc: CongestionControl;
  private fack = -1; // highest PSN known received; valid when haveFack
  private haveFack = false;
  private retx: number[] = [];
  private retxHead = 0;
  private peerRightEdge: number;
  private peerRwnd: number;
  private peerCum = 0;
  /** The timestamp (0: none yet) and local time of the header whose window we took last. */
  private wlTs = 0;
  private wlAt = 0;
  private rtoDeadline = Infinity;
  // Probe timeout (tail loss probe): a couple of RTTs without an ACK resend the oldest
  // unacknowledged packet once or twice before the conservative RTO collapses the window.
  private ptoDeadline = Infinity;
  private probes = 0;
  private probePsn = -1;
  private retries = 0;
  private retryStart = 0;
  private probeDue = false;

  constructor(
    private readonly opts: ContextOptions,
    private readonly counters: ContextCounters,
    /** Ids of the payloads the peer now holds, for the owner to drain (the context's `acked`). */
    private readonly acked: number[],
    private readonly headers: HeaderSource,
  ) {
    const w = opts.maxWindow;
    if (w < 4 || (w & (w - 1)) !== 0) throw new RangeError('maxWindow must be a power of two >= 4');
    this.mask = w - 1;
    this.slotPayload = new Array(w).fill(null);
    this.slotId = new Float64Array(w);
    this.slotDstQpn = new Uint32Array(w);
    this.slotSrcQpn = new Uint32Array(w);
    this.slotFlags = new Uint8Array(w);
    this.slotLossMark = new Int32Array(w);
    this.cc = new CongestionControl(opts);
    this.peerRwnd = Math.min(opts.initialPeerWindow, w);
    const isn = opts.initialPsn >>> 0;
    this.sndUna = this.sndNxt = this.peerCum = isn;
    this.peerRightEdge = (isn + this.peerRwnd) >>> 0;
  }

  /** Payloads enqueue() would take now. */
  get room(): number {
    return this.opts.maxSendQueue - (this.queue.length - this.qHead);
  }

  /** Queue a payload; false when the send queue is full. */
  enqueue(q: Queued): boolean {
    if (this.room <= 0) return false;
    this.queue.push(q);
    return true;
  }

  /** Payloads taken from another stream (a restart that keeps them) go first, in their order. */
  requeue(qs: Queued[]): void {
    this.queue = qs;
    this.qHead = 0;
  }

  /** Payloads accepted and not yet acked or failed. */
  get outstanding(): number {
    let n = this.queue.length - this.qHead;
    for (let p = this.sndUna; p !== this.sndNxt; p = (p + 1) >>> 0) {
      if (!(this.slotFlags[p & this.mask] & SACKED)) n++;
    }
    return n;
  }

  /** Nothing queued, nothing unacknowledged. */
  get idle(): boolean {
    return this.sndUna === this.sndNxt && this.queue.length === this.qHead;
  }

  get stats(): { cwnd: number; ssthresh: number; srtt: number; rto: number; pipe: number; peerRwnd: number } {
    const cc = this.cc;
    return { cwnd: cc.cwnd, ssthresh: cc.ssthresh, srtt: cc.srtt, rto: cc.rto, pipe: this.pipe, peerRwnd: this.peerRwnd };
  }

  /** The retransmission and probe timers (Infinity: neither runs). */
  deadline(): number {
    return Math.min(this.rtoDeadline, this.ptoDeadline);
  }

  stopTimers(): void {
    this.rtoDeadline = Infinity;
    this.ptoDeadline = Infinity;
  }

  /**
   * The peer keeps state for us now: what we sent to a receiver that kept nothing goes again
   * at once, not as loss (no congestion response, no retry counted). `tsEcr` echoes our probe.
   */
  validated(now: number, tsEcr: number): void {
    if (tsEcr !== 0 && ((tsNow(now) - tsEcr) >>> 0) / 1000 < 60_000) {
      this.cc.sample(((tsNow(now) - tsEcr) >>> 0) / 1000);
      this.cc.resetRto();
    }
    this.resendUnsacked();
    this.retries = 0;
    this.probes = 0;
    this.stopTimers();
  }

  /** Every packet out and not SACKed goes again at the next flush (one already queued for it is left as it is). */
  private resendUnsacked(): void {
    const mask = this.mask;
    for (let p = this.sndUna; p !== this.sndNxt; p = (p + 1) >>> 0) {
      const i = p & mask;
      const f = this.slotFlags[i];
      if (f & (SACKED | LOST)) continue;
      if (f & INFLIGHT) this.pipe--;
      this.slotFlags[i] = (f & ~INFLIGHT) | LOST;
      this.retx.push(p);
    }
  }

  /** Fire the timers due at `now`; false: the retry limit is spent (the context fails). */
  tick(now: number): boolean {
    if (now >= this.rtoDeadline) return this.onTimeout(now);
    if (now >= this.ptoDeadline) this.onProbeTimeout(now);
    return true;
  }

  /**
   * Append the DATA datagrams that may leave now, at most `limit`; `probing`: first contact,
   * one in flight at most. Returns true when the limit held back DATA the window would have
   * let go (the owner flushes again soon).
   */
  flush(now: number, out: TxDatagram[], limit: number, probing: boolean): boolean {
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
    const cwnd = probing ? 1 : this.cc.cwnd;
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
      (this.pipe < cwnd || (this.probeDue && !probing)) &&
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
    }
    return more;
  }

  /** Payloads queued or kept for retransmission: the views `owns` claims become copies (core/detach.ts). */
  detach(owns: Owns): void {
    for (let p = this.sndUna; p !== this.sndNxt; p = (p + 1) >>> 0) {
      const i = p & this.mask;
      const v = this.slotPayload[i];
      if (v) this.slotPayload[i] = detachPayload(v, owns);
    }
    for (let k = this.qHead; k < this.queue.length; k++) {
      const q = this.queue[k]!;
      q.payload = detachPayload(q.payload, owns);
    }
  }

  /** Take back every payload not yet acknowledged (sent or queued), in order; the window empties. */
  takeUnacked(): Queued[] {
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
    const hdr = this.headers.header(true, psn, now);
    hdr.retx = retx;
    hdr.dstQpn = dstQpn;
    hdr.srcQpn = srcQpn;
    return { hdr, payload, dstQpn, srcQpn };
  }

  /**
   * Every PSN the datagram names must lie in [sndUna - maxWindow, sndNxt] (RFC 5961 §5: older
   * acks are stale but harmless, an ack beyond what was sent is forged), SACK blocks must be
   * non-empty and above the datagram's own cumulative ack (a receiver only SACKs beyond a
   * hole). Offsets from the low edge compare without serial-number ambiguity.
   */
  checkAck(h: UdpHdr): RxVerdictValue {
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
  onAck(h: UdpHdr, now: number): void {
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
    const shut = this.peerRwnd === 0;
    if (this.newerWindow(cum, h.tsVal, now)) {
      this.peerCum = cum;
      this.wlTs = h.tsVal;
      this.wlAt = now;
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
    } else if (shut && this.peerRwnd > 0 && this.sndUna !== this.sndNxt) {
      this.windowReopened(now);
    }
    this.armPersist(now);
  }

  /**
   * Whether a header's window is news (RFC 9293 §3.10.7.4: a window is taken only from a
   * segment not older than the last that updated it, SND.WL1/SND.WL2). Its cumulative ack
   * orders it first; with the same ack, its timestamp (the peer's clock when it built the
   * header, so retransmissions and ACK-only headers are ordered too): a window-0 ACK sent
   * while the peer held its input, reordered behind the update that ended the hold, carries
   * the same ack and PSN and would otherwise shut the window until the persist probe.
   * Timestamps wrap (µs mod 2^32): one last taken more than half a wrap ago orders nothing.
   */
  private newerWindow(cum: number, tsVal: number, now: number): boolean {
    const d = psnDiff(cum, this.peerCum);
    if (d < 0 || psnDiff(cum, this.sndNxt) > 0) return false;
    if (d > 0 || this.wlTs === 0) return true;
    return psnDiff(tsVal, this.wlTs) >= 0 || now - this.wlAt >= TS_HALF_WRAP_MS;
  }

  /**
   * The peer's window opened again with nothing newly acked: what it refused while shut (it
   * holds its input: Link.holdReceive) goes again now, not at the next RTO, which the
   * retransmissions into the shut window backed off to its cap. Not loss: no congestion response.
   */
  private windowReopened(now: number): void {
    this.resendUnsacked();
    this.retries = 0;
    this.cc.resetRto();
    this.rtoDeadline = now + this.cc.rto;
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

  /** False: past the retry limit (the context fails). */
  private onTimeout(now: number): boolean {
    this.ptoDeadline = Infinity;
    const outstanding = this.sndUna !== this.sndNxt;
    const windowProbe = !outstanding && this.qHead < this.queue.length;
    if (!outstanding && !windowProbe) {
      this.rtoDeadline = Infinity;
      return true;
    }
    if (this.retries++ === 0) this.retryStart = now;
    this.counters.timeouts++;
    if (this.retries > this.opts.retryLimit && now - this.retryStart >= this.opts.retryTimeoutMs) {
      return false;
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
    return true;
  }

  /** With data queued, nothing in flight and the peer's window shut, a timer must probe it. */
  armPersist(now: number): void {
    if (this.rtoDeadline === Infinity && this.sndUna === this.sndNxt && this.qHead < this.queue.length) {
      this.rtoDeadline = now + this.cc.rto;
    }
  }
}
