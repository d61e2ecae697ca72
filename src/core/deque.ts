// A FIFO over a power-of-two ring: O(1) push and shift at any length. The QP's send and
// receive queues take from the head on every completion; Array.prototype.shift is O(n) once
// V8 cannot left-trim the backing store (old-space arrays during marking, large arrays), and a
// bench posting a few thousand receives spent 10% of its time moving them.
export class Deque<T> implements Iterable<T> {
  #buf: (T | undefined)[] = new Array(8);
  #mask = 7;
  #head = 0;
  #len = 0;

  get length(): number {
    return this.#len;
  }

  push(v: T): void {
    if (this.#len > this.#mask) this.#grow();
    this.#buf[(this.#head + this.#len) & this.#mask] = v;
    this.#len++;
  }

  shift(): T | undefined {
    if (this.#len === 0) return undefined;
    const v = this.#buf[this.#head];
    this.#buf[this.#head] = undefined;
    this.#head = (this.#head + 1) & this.#mask;
    this.#len--;
    return v;
  }

  /** The i-th element from the head (undefined outside 0..length-1). */
  at(i: number): T | undefined {
    return i >= 0 && i < this.#len ? this.#buf[(this.#head + i) & this.#mask] : undefined;
  }

  indexOf(v: T): number {
    for (let i = 0; i < this.#len; i++) if (this.#buf[(this.#head + i) & this.#mask] === v) return i;
    return -1;
  }

  find(pred: (v: T) => boolean): T | undefined {
    for (let i = 0; i < this.#len; i++) {
      const v = this.#buf[(this.#head + i) & this.#mask] as T;
      if (pred(v)) return v;
    }
    return undefined;
  }

  /** Remove the i-th element, keeping the order of the rest (O(length - i)). */
  removeAt(i: number): void {
    if (i < 0 || i >= this.#len) return;
    if (i === 0) {
      this.shift();
      return;
    }
    for (let k = i; k < this.#len - 1; k++) {
      this.#buf[(this.#head + k) & this.#mask] = this.#buf[(this.#head + k + 1) & this.#mask];
    }
    this.#buf[(this.#head + this.#len - 1) & this.#mask] = undefined;
    this.#len--;
  }

  /** Every element in order; the deque is left empty. */
  takeAll(): T[] {
    const out: T[] = [];
    for (let i = 0; i < this.#len; i++) out.push(this.#buf[(this.#head + i) & this.#mask] as T);
    this.clear();
    return out;
  }

  clear(): void {
    this.#buf = new Array(8);
    this.#mask = 7;
    this.#head = 0;
    this.#len = 0;
  }

  *[Symbol.iterator](): Iterator<T> {
    for (let i = 0; i < this.#len; i++) yield this.#buf[(this.#head + i) & this.#mask] as T;
  }

  #grow(): void {
    const n = (this.#mask + 1) * 2;
    const b: (T | undefined)[] = new Array(n);
    for (let i = 0; i < this.#len; i++) b[i] = this.#buf[(this.#head + i) & this.#mask];
    this.#buf = b;
    this.#mask = n - 1;
    this.#head = 0;
  }
}
