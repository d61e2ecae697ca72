// The byte ranges of one incoming message that have been placed (the duplicate check, and the
// count of out-of-order state a message holds). Ranges are kept merged: segments arriving in
// order — a stream, or a link that only reorders a little — stay one range however long the
// message (a Set of segment offsets grew by one entry per segment: an endless Write on a TCP
// stream grew it without bound). Only gaps cost entries, and the engine caps
// those per QP (bounds.ts). The first range lives in fields: nearly every message is one
// segment, and an allocation per message was the costliest of a ping-pong hop.
export class Offsets {
  #s = -1;
  #e = -1;
  /** More than one range: [start0, end0, start1, end1, …], sorted, disjoint, not touching. */
  #more: number[] | undefined;

  /** Ranges held (the engine's out-of-order entries for this message). */
  get count(): number {
    return this.#more ? this.#more.length >> 1 : this.#s < 0 ? 0 : 1;
  }

  /** Whether the byte at `off` was placed (a segment starting there is a duplicate). */
  has(off: number): boolean {
    const r = this.#more;
    if (!r) return off >= this.#s && off < this.#e;
    const i = this.#find(r, off);
    return i >= 0 && off < r[i + 1]!;
  }

  /** Whether placing [off, off + len) would leave the range count as it is (it touches or overlaps a range). */
  joins(off: number, len: number): boolean {
    if (this.count === 0) return true;
    return this.has(off) || (off > 0 && this.has(off - 1)) || this.has(off + Math.max(1, len));
  }

  /**
   * Segment [off, off + len) placed; `off` a non-negative integer. A zero-length segment (the
   * one segment of an empty message) covers its offset, so a copy of it is a duplicate too.
   */
  add(off: number, len: number): void {
    const end = off + Math.max(1, len);
    const r = this.#more;
    if (!r) {
      if (this.#s < 0) {
        this.#s = off;
        this.#e = end;
        return;
      }
      if (off <= this.#e && end >= this.#s) {
        this.#s = Math.min(this.#s, off);
        this.#e = Math.max(this.#e, end);
        return;
      }
      this.#more = off < this.#s ? [off, end, this.#s, this.#e] : [this.#s, this.#e, off, end];
      return;
    }
    // The range starting at or before `off` (or -2: none), then merge with both neighbours.
    let i = this.#find(r, off);
    if (i >= 0 && off <= r[i + 1]!) {
      if (end > r[i + 1]!) r[i + 1] = end;
    } else {
      i += 2;
      r.splice(i, 0, off, end);
    }
    while (i + 2 < r.length && r[i + 2]! <= r[i + 1]!) {
      if (r[i + 3]! > r[i + 1]!) r[i + 1] = r[i + 3]!;
      r.splice(i + 2, 2);
    }
    if (r.length === 2) {
      this.#s = r[0]!;
      this.#e = r[1]!;
      this.#more = undefined;
    }
  }

  /** Each range held, [start, end), in order. */
  forEach(f: (start: number, end: number) => void): void {
    const r = this.#more;
    if (r) for (let i = 0; i < r.length; i += 2) f(r[i]!, r[i + 1]!);
    else if (this.#s >= 0) f(this.#s, this.#e);
  }

  /** Index of the last range whose start is <= off, or -2. */
  #find(r: number[], off: number): number {
    let lo = 0;
    let hi = (r.length >> 1) - 1;
    let at = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (r[mid * 2]! <= off) {
        at = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return at * 2;
  }
}
