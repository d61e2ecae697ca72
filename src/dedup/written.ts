// The byte ranges of a buffer written so far, as sorted disjoint intervals: a receiver that
// assembles its object in the basis it reads chunks from (store.takeInPlaceBasis) asks, before it
// copies a held chunk from one place of that buffer to another, whether anything it wrote has
// changed the chunk's bytes there. Writes come mostly in rising order (pages and rounds follow
// the object), so an append at the end is the common case; one interval per run of adjacent
// writes, at most one per chunk of the object.
export class WrittenRanges {
  readonly #starts: number[] = [];
  readonly #ends: number[] = [];

  /** Index of the last interval starting before `at` (-1: none). */
  #before(at: number): number {
    let lo = 0, hi = this.#starts.length - 1, found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.#starts[mid]! < at) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  /** Has any byte of [at, at + len) been written? */
  touches(at: number, len: number): boolean {
    const i = this.#before(at + len);
    return i >= 0 && this.#ends[i]! > at;
  }

  /** [at, at + len) has been written. */
  add(at: number, len: number): void {
    if (len <= 0) return;
    let s = at, e = at + len;
    const n = this.#starts.length;
    if (n === 0 || s > this.#ends[n - 1]!) {
      this.#starts.push(s);
      this.#ends.push(e);
      return;
    }
    // Merge with every interval it meets or abuts, then put the union in their place.
    let first = this.#before(s);
    if (first < 0 || this.#ends[first]! < s) first++;
    let last = first;
    while (last < this.#starts.length && this.#starts[last]! <= e) last++;
    if (last > first) {
      s = Math.min(s, this.#starts[first]!);
      e = Math.max(e, this.#ends[last - 1]!);
    }
    this.#starts.splice(first, last - first, s);
    this.#ends.splice(first, last - first, e);
  }

  /** Intervals held (tests). */
  get size(): number {
    return this.#starts.length;
  }
}
