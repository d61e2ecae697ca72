// One completion queue fed by several NIC threads (./multi-port.ts): each thread's port sees a
// CQ of its own (a part: its completion ring's records are offered to it), every part hands its
// completions to the one CQ, and the CQ's source drains every thread's ring. A NIC thread
// counts the room a CQ has from what the application took of its completions, so each taken
// completion is told to the thread it came from (the CQ hands them out oldest first, so the
// threads' order of arrival is kept alongside).
import type { CqSource, PortCq } from './port.js';

type Wc = Parameters<PortCq['offer']>[0];

export class FanInCq {
  readonly cq: PortCq;
  readonly parts: PortCq[];
  readonly #sources: Array<CqSource | undefined>;
  /** The thread of each completion queued in the CQ, oldest first (from #head on). */
  #origins: number[] = [];
  #head = 0;
  /** The thread whose completion is being offered, and what the CQ took of it at once (a promised work request's). */
  #offering = -1;
  #tookAtOnce = 0;
  readonly #taken: number[];

  constructor(cq: PortCq, n: number) {
    this.cq = cq;
    this.#sources = new Array<CqSource | undefined>(n).fill(undefined);
    this.#taken = new Array<number>(n).fill(0);
    this.parts = Array.from({ length: n }, (_, i): PortCq => ({
      depth: cq.depth,
      offer: (wc: Wc) => this.#offer(i, wc),
      bind: (source: CqSource) => {
        this.#sources[i] = source;
      },
    }));
  }

  /** What the CQ itself is bound to once every part is: all the threads' rings. */
  readonly source: CqSource = {
    drain: () => {
      for (const s of this.#sources) s?.drain();
    },
    took: (n: number) => this.#took(n),
  };

  /** Completions offered while the device closes, handed to the CQ together when it has closed. */
  #held: Array<[number, Wc]> | undefined;

  /**
   * The threads close one after another, each handing over its flushes as it ends: held until
   * the last has, so they reach the CQ in the turn the device's close resolves in (as with one).
   */
  hold(): void {
    this.#held ??= [];
  }

  release(): void {
    const held = this.#held;
    this.#held = undefined;
    for (const [i, wc] of held ?? []) this.#offer(i, wc);
  }

  #offer(i: number, wc: Wc): boolean {
    if (this.#held) {
      // A copy: the port refills the completion it offers.
      this.#held.push([i, { ...wc }]);
      return true;
    }
    this.#offering = i;
    this.#tookAtOnce = 0;
    let ok: boolean;
    try {
      ok = this.cq.offer(wc);
    } finally {
      this.#offering = -1;
    }
    if (ok && this.#tookAtOnce === 0) this.#origins.push(i);
    return ok;
  }

  #took(n: number): void {
    if (this.#offering >= 0) {
      this.#tookAtOnce += n;
      this.#sources[this.#offering]?.took(n);
      return;
    }
    const taken = this.#taken;
    const end = Math.min(this.#head + n, this.#origins.length);
    for (let k = this.#head; k < end; k++) taken[this.#origins[k]!]!++;
    this.#head = end;
    for (let i = 0; i < taken.length; i++) {
      if (taken[i] === 0) continue;
      this.#sources[i]?.took(taken[i]!);
      taken[i] = 0;
    }
    // Drop what was handed out once it is most of the list (no copy per poll).
    if (this.#head > 1024 && this.#head * 2 > this.#origins.length) {
      this.#origins = this.#origins.slice(this.#head);
      this.#head = 0;
    }
  }
}
