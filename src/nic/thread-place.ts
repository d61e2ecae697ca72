// Placement records (M3's amended metadata) held back on the NIC thread. A region over the
// application's non-shared memory is placed into a shared copy here, and each placed segment
// becomes a record the application's thread turns into a copy into its array. While that thread
// is away (blocked, busy) the completion ring fills and records wait here, in order with the
// completions — and a peer's stream of small scattered writes would make them grow without end.
//
// Two bounds. Records for one region whose ranges touch or overlap merge into the one held
// back (a stream of adjacent writes is one record): the copy reads the shared copy when it is
// taken, so a merged record copies what the separate ones would have by then, only earlier,
// and no byte outside the placed ranges (bytes in between may be the application's own). And
// past PLACE_HELD_MAX held records the device stops taking in new frames — the link's
// back-pressure (Link.holdReceive): udp drops new DATA unacknowledged and the peer sends it
// again, tcp stops reading its sockets — until the application's thread has taken half of them.
// Nothing acknowledged is dropped: what the link took in before the hold is placed and recorded
// (one more batch at most), and what it refused was never acknowledged. Stopping all input, not
// only the frames for such regions, is what a link can do without decoding: the completion
// path is backed up either way.
import { PLACE_RECORD_CQ } from './thread-proto.js';
import type { Cqe } from './wqe.js';

/** Placement records held back before the device stops taking in frames. */
export const PLACE_HELD_MAX = 4096;

export class HeldPlacements {
  /** Placement records among the held-back completions now, their most, merges, holds (dev.stats().nic). */
  held = 0;
  peak = 0;
  merged = 0;
  holds = 0;
  #holding = false;
  /** Per region (STag): its last held-back record, which a touching range merges into. */
  readonly #last = new Map<number, Cqe>();
  readonly #hold: (hold: boolean) => void;

  constructor(hold: (hold: boolean) => void) {
    this.#hold = hold;
  }

  /** [off, off+len) of region `stag` was placed while completions are held back: merged, or a new record (returned: the caller holds it back). */
  add(stag: number, off: number, len: number): Cqe | undefined {
    const last = this.#last.get(stag);
    if (last !== undefined && off <= last.qpn + last.byteLen && off + len >= last.qpn) {
      const end = Math.max(last.qpn + last.byteLen, off + len);
      last.qpn = Math.min(last.qpn, off);
      last.byteLen = end - last.qpn;
      this.merged++;
      return undefined;
    }
    const c: Cqe = { cq: PLACE_RECORD_CQ, token: stag, qpn: off, status: 0, opcode: 0, byteLen: len };
    this.#last.set(stag, c);
    if (++this.held > this.peak) this.peak = this.held;
    if (this.held >= PLACE_HELD_MAX && !this.#holding) {
      this.#holding = true;
      this.holds++;
      this.#hold(true);
    }
    return c;
  }

  /** Held-back record `c` went into the ring. */
  written(c: Cqe): void {
    if (c.cq !== PLACE_RECORD_CQ) return;
    this.held--;
    if (this.#last.get(c.token) === c) this.#last.delete(c.token);
    if (this.#holding && this.held <= PLACE_HELD_MAX / 2) {
      this.#holding = false;
      this.#hold(false);
    }
  }

  /** dev.stats().nic's share of these. */
  counts(): { placeHeld: number; placeHeldPeak: number; placeMerged: number; receiveHolds: number } {
    return { placeHeld: this.held, placeHeldPeak: this.peak, placeMerged: this.merged, receiveHolds: this.holds };
  }

  /** Region `stag` is gone: a later region with its STag merges into nothing of it. */
  forget(stag: number): void {
    this.#last.delete(stag);
  }
}
