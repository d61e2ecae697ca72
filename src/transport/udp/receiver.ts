// The receive half of a transport context (./context.ts): a bitmap over the PSNs it may still
// see, so duplicates and replays are suppressed and each payload is delivered exactly once, at
// arrival (ordering is the engine's job); receive credit (payloads delivered and not yet
// released by the owner); and when an ACK is owed — cumulative ack + SACK blocks, delayed
// ACKs, at once for a new or filled hole. Every header the context sends carries this state.
import type { SackBlock, UdpHdr } from '../../wire/udp.js';
import { MAX_SACK_BLOCKS, psnDiff, type ContextCounters, type ContextOptions } from './context-options.js';

export class ContextReceiver {
  rcvNxt: number;
  private readonly rcvSeen: Uint8Array;
  private rcvHighest: number;
  private ooo = 0;
  /** Payloads delivered and not yet released (receive credit in use). */
  pending = 0;
  private unacked = 0;
  /** An ACK must go with the next flush. */
  ackNow = false;
  ackDeadline = Infinity;
  /** The peer's latest timestamp, echoed in our headers. */
  tsRecent = 0;
  private lastRcvPsn: number;
  private readonly mask: number;

  constructor(
    private readonly opts: ContextOptions,
    private readonly counters: ContextCounters,
    isn: number,
  ) {
    this.mask = opts.maxWindow - 1;
    this.rcvSeen = new Uint8Array(opts.maxWindow);
    this.rcvNxt = this.lastRcvPsn = isn;
    this.rcvHighest = (isn - 1) | 0;
  }

  /** The owner finished with `n` delivered payloads: their credit returns. True: a window update is due now. */
  release(n: number): boolean {
    const before = this.advertisedWindow();
    this.pending = Math.max(0, this.pending - n);
    // A sender stalled on a small window learns it opened without waiting for its probe.
    if (before < this.opts.rcvCredit / 4 && this.advertisedWindow() >= 2 * before + 1) this.ackNow = true;
    return this.ackNow;
  }

  /** A header is going out: it carries the ACK (what it says is read before this). */
  ackSent(): void {
    this.unacked = 0;
    this.ackNow = false;
    this.ackDeadline = Infinity;
  }

  /** SACK blocks for the next header (none without a hole). */
  sack(): SackBlock[] {
    return this.ooo > 0 ? this.sackBlocks() : [];
  }

  /** A DATA packet's payload: true when it is new and within credit (deliver it, once). */
  onData(h: UdpHdr, now: number): boolean {
    const psn = h.psn >>> 0;
    const d = psnDiff(psn, this.rcvNxt);
    this.tsRecent = h.tsVal;
    if (h.ackReq) this.ackNow = true;
    if (d < 0 || (d < this.opts.maxWindow && this.rcvSeen[psn & this.mask])) {
      // The ACK that would have stopped this retransmission was lost: resend it now.
      this.counters.rxDuplicate++;
      this.ackNow = true;
      return false;
    }
    if (d >= this.opts.maxWindow) {
      this.counters.rxOutOfWindow++;
      this.ackNow = true;
      return false;
    }
    if (this.pending >= this.opts.rcvCredit || this.opts.rxHold?.held === true) {
      this.counters.rxNoCredit++;
      this.ackNow = true;
      return false;
    }
    this.counters.rxData++;
    this.rcvSeen[psn & this.mask] = 1;
    this.pending++;
    this.counters.delivered++;
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
    return true;
  }

  ackDue(now?: number): boolean {
    return this.ackNow || (now !== undefined ? now >= this.ackDeadline : this.ackDeadline !== Infinity);
  }

  advertisedWindow(): number {
    // Held (Link.holdReceive): a shut window, so the sender knows the peer is alive but full
    // (its retries reset) instead of counting the dropped DATA against its retry budget.
    if (this.opts.rxHold?.held === true) return 0;
    const free = Math.max(0, this.opts.rcvCredit - this.pending);
    return Math.min(this.opts.maxWindow, free + this.ooo, 0xffff);
  }

  /** The block holding the latest arrival first (RFC 2018), then the lowest blocks. */
  sackBlocks(): SackBlock[] {
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
