// How a device numbers its QPs. A QPN is what a peer names to reach a QP, and on a raw tcp
// `qp.connect` the QPN pair is all that matches an incoming MPA Request to the waiting QP
// (src/transport/tcp/connector.ts): numbers handed out in order let a third host that guesses
// them take the pairing. So QPNs are drawn from a CSPRNG over 24 bits (ibverbs' QPN width, so
// tools that print or carry QPNs as 24-bit values keep working). Thread qpn mod n is kept
// turning (src/core/peer-route.ts), so a QPN of a device of n NIC threads holds 24 - log2(n)
// unguessable bits.
import { randomInt } from 'node:crypto';
import { ErrorCode, SabreError } from '../core/errors.js';

/** User QPNs lie in [1, QPN_LIMIT): 0 is invalid to the udp link, CM_QPN and DEVICE_QPN lie above. */
export const QPN_LIMIT = 1 << 24;

/** Draws before giving up: with at most a few thousand QPs live, a clash is rare and several in a row never happen. */
const DRAWS = 64;

/**
 * QPNs of destroyed QPs not drawn again for a while: a peer may still be sending to the old QP
 * (retransmissions, a late first Send to an srd QP), and a new QP under its number would take
 * what was meant for the old one instead of the peer hearing that it is gone. Numbers handed
 * out in order never came back; a QP reused this soon after its destroy would be a one in
 * 2^24/n chance per QP, so the set is small.
 */
export const QPN_RECENT = 4096;

/** A device's QPNs: drawn at random, spread over its NIC threads in turn, none reused soon. */
export class QpnSpace {
  #seq = 0;
  /** Destroyed QPNs, oldest first (a Set keeps insertion order). */
  readonly #recent = new Set<number>();

  /** `threads`: the device's NIC threads now; `live`: whether a QPN is in use on the device; `rand`: an integer in [lo, hi). */
  constructor(
    private readonly threads: () => number,
    private readonly live: (qpn: number) => boolean,
    private readonly rand: (lo: number, hi: number) => number = randomInt,
  ) {}

  /**
   * A QPN for the next QP: not live, not recently destroyed, and naming the thread the QP goes
   * to (a peer reaches QP q at thread q mod n): `on` when the device places it (a QP kept on the
   * first thread, one a listener accepts on the thread that took the request), else the next
   * thread in turn.
   */
  draw(on?: number): number {
    const n = Math.max(1, this.threads());
    const thread = on !== undefined && on >= 0 && on < n ? on : this.#seq++ % n;
    // qpn = thread + n·k with k ≥ 1 (so qpn ≥ 1 on thread 0 too) below the limit.
    const kMax = Math.floor((QPN_LIMIT - 1 - thread) / n);
    for (let i = 0; i < DRAWS; i++) {
      const qpn = thread + n * this.rand(1, kMax + 1);
      if (!this.live(qpn) && !this.#recent.has(qpn)) return qpn;
    }
    throw new SabreError(ErrorCode.LimitExceeded, 'no free QP number');
  }

  /** `qpn`'s QP is gone: keep its number out of the next draws. */
  retire(qpn: number): void {
    this.#recent.delete(qpn);
    this.#recent.add(qpn);
    if (this.#recent.size > QPN_RECENT) this.#recent.delete(this.#recent.values().next().value!);
  }
}
