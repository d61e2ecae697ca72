// Walking a gather list — views of memory, or pieces of registered regions — a given number of
// bytes at a time. The one loop behind cutting a message into segments, a read's sources into
// its sinks, a segment along a receive's scatter list and a packed payload's data pieces.

export class GatherCursor<T> {
  readonly #items: readonly T[];
  readonly #lengthOf: (t: T) => number;
  #i = 0;
  /** Bytes of items[#i] already passed. */
  #o = 0;

  constructor(items: readonly T[], lengthOf: (t: T) => number) {
    this.#items = items;
    this.#lengthOf = lengthOf;
  }

  /** Pass over the next `n` bytes. */
  skip(n: number): void {
    this.take(n, noop);
  }

  /**
   * The next `n` bytes as spans, in order: each(item, at, len) covers [at, at + len) of item.
   * Stops at the end of the list; returns the bytes taken.
   */
  take(n: number, each: (item: T, at: number, len: number) => void): number {
    const items = this.#items;
    let need = n;
    while (need > 0 && this.#i < items.length) {
      const item = items[this.#i]!;
      const len = this.#lengthOf(item);
      const span = Math.min(need, len - this.#o);
      if (span > 0) each(item, this.#o, span);
      this.#o += span;
      need -= span;
      if (this.#o >= len) {
        this.#i++;
        this.#o = 0;
      }
    }
    return n - need;
  }
}

const noop = (): void => {};
const viewLength = (v: Uint8Array): number => v.length;

/** A cursor over views; takeViews appends the views of the next n bytes (whole views where they fit, no copy). */
export class ViewCursor extends GatherCursor<Uint8Array> {
  constructor(views: readonly Uint8Array[]) {
    super(views, viewLength);
  }

  takeViews(n: number, out: Uint8Array[]): number {
    return this.take(n, (v, at, len) => out.push(at === 0 && len === v.length ? v : v.subarray(at, at + len)));
  }
}

// The two walks the udp packer makes for every payload, as plain loops: no cursor and no
// callback object per piece on the small-message path.

/** Copy bytes [off, off + len) of the views, in order, into buf at p; returns the end. */
export function copyViews(views: readonly Uint8Array[], off: number, len: number, buf: Uint8Array, p: number): number {
  for (let i = 0; i < views.length && len > 0; i++) {
    const v = views[i]!;
    if (off >= v.length) {
      off -= v.length;
      continue;
    }
    const n = Math.min(len, v.length - off);
    buf.set(off === 0 && n === v.length ? v : v.subarray(off, off + n), p);
    p += n;
    len -= n;
    off = 0;
  }
  return p;
}

/** Append views of bytes [off, off + len) of the views, in order, to out (whole views where they fit, no copy). */
export function appendViews(views: readonly Uint8Array[], off: number, len: number, out: Uint8Array[]): void {
  for (let i = 0; i < views.length && len > 0; i++) {
    const v = views[i]!;
    if (off >= v.length) {
      off -= v.length;
      continue;
    }
    const n = Math.min(len, v.length - off);
    out.push(off === 0 && n === v.length ? v : v.subarray(off, off + n));
    len -= n;
    off = 0;
  }
}
