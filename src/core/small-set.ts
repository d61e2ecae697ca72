// A set that keeps its one member inline and makes a Set only for a second: a channel's
// protection domain holds one QP and one region for its whole life, and a Set of one is about
// 180 bytes (its hash table is allocated whole) — on thousands of idle channels.
// Members are objects (undefined marks the empty slot). Iteration goes over a snapshot when
// inline, over the Set's live view otherwise (as a Set's).
export class SmallSet<T extends object> implements Iterable<T> {
  #one: T | undefined = undefined;
  #many: Set<T> | undefined = undefined;

  get size(): number {
    return this.#many !== undefined ? this.#many.size : this.#one === undefined ? 0 : 1;
  }

  add(v: T): this {
    if (this.#many !== undefined) this.#many.add(v);
    else if (this.#one === undefined || this.#one === v) this.#one = v;
    else {
      this.#many = new Set([this.#one, v]);
      this.#one = undefined;
    }
    return this;
  }

  delete(v: T): boolean {
    if (this.#many !== undefined) return this.#many.delete(v);
    if (this.#one !== v || v === undefined) return false;
    this.#one = undefined;
    return true;
  }

  has(v: T): boolean {
    return this.#many !== undefined ? this.#many.has(v) : this.#one === v && v !== undefined;
  }

  [Symbol.iterator](): Iterator<T> {
    if (this.#many !== undefined) return this.#many.values();
    return (this.#one === undefined ? [] : [this.#one]).values();
  }
}
