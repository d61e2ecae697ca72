// The sender's congestion control and round-trip estimate of a transport context
// (./sender.ts): a window in packets (slow start, AIMD, halve on loss once per recovery
// episode, collapse to the minimum on RTO), and the RTO from timestamp RTT samples (RFC 6298)
// with exponential backoff; the tail-loss probe timeout is two smoothed RTTs.
import { psnDiff, type ContextOptions } from './context-options.js';

export class CongestionControl {
  cwnd: number;
  ssthresh = Infinity;
  inRecovery = false;
  /** Recovery ends once everything sent before it started is acknowledged. */
  recoveryPoint = 0;
  srtt = 0;
  rttvar = 0;
  rto: number;

  constructor(private readonly opts: ContextOptions) {
    this.cwnd = opts.initialCwnd;
    this.rto = opts.initialRtoMs;
  }

  /** An RTT sample (ms) from an echoed timestamp; the RTO follows it. Absurd samples are ignored. */
  sample(rttMs: number): void {
    if (rttMs >= 60_000) return;
    if (this.srtt === 0) {
      this.srtt = rttMs;
      this.rttvar = rttMs / 2;
    } else {
      this.rttvar = 0.75 * this.rttvar + 0.25 * Math.abs(this.srtt - rttMs);
      this.srtt = 0.875 * this.srtt + 0.125 * rttMs;
    }
  }

  /** The RTO from the current estimate (back-off undone: the path answered). */
  resetRto(): void {
    if (this.srtt === 0) {
      this.rto = this.opts.initialRtoMs;
      return;
    }
    const r = this.srtt + Math.max(4 * this.rttvar, 0.1);
    this.rto = Math.min(Math.max(r, this.opts.minRtoMs), this.opts.maxRtoMs);
  }

  pto(): number {
    return this.srtt === 0 ? this.opts.initialRtoMs / 2 : Math.max(2 * this.srtt + this.opts.ackDelayMs / 4, 1);
  }

  /** `newly` packets acknowledged; `sndUna` is the new left edge. */
  onAcked(newly: number, sndUna: number): void {
    if (this.inRecovery && psnDiff(sndUna, this.recoveryPoint) >= 0) this.inRecovery = false;
    if (this.inRecovery) return;
    if (this.cwnd < this.ssthresh) this.cwnd += newly;
    else this.cwnd += newly / this.cwnd;
    if (this.cwnd > this.opts.maxWindow) this.cwnd = this.opts.maxWindow;
  }

  /** Loss found by SACK: halve, once per recovery episode (ends at `sndNxt`). */
  onLoss(sndNxt: number): void {
    if (this.inRecovery) return;
    this.inRecovery = true;
    this.recoveryPoint = sndNxt;
    this.ssthresh = Math.max(this.cwnd / 2, this.opts.minCwnd);
    this.cwnd = this.ssthresh;
  }

  /** The RTO fired with packets outstanding: collapse the window, start a recovery episode. */
  onTimeout(sndNxt: number): void {
    this.ssthresh = Math.max(this.cwnd / 2, this.opts.minCwnd);
    this.cwnd = this.opts.minCwnd;
    this.inRecovery = true;
    this.recoveryPoint = sndNxt;
  }

  backoff(): void {
    this.rto = Math.min(this.rto * 2, this.opts.maxRtoMs);
  }
}
