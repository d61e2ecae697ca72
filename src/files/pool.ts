// A fixed set of buffer indices leased one at a time, waiters served in order. Bounds how much
// registered memory a client's reads and writes use, however many the caller starts.
export class LeasePool {
  readonly #free: number[];
  readonly #waiters: ((i: number) => void)[] = [];
  readonly #failers: ((e: Error) => void)[] = [];
  #error: Error | undefined;

  constructor(n: number) {
    this.#free = Array.from({ length: n }, (_, i) => n - 1 - i);
  }

  get available(): number {
    return this.#free.length;
  }

  acquire(): Promise<number> {
    if (this.#error) return Promise.reject(this.#error);
    const i = this.#free.pop();
    if (i !== undefined) return Promise.resolve(i);
    return new Promise((resolve, reject) => {
      this.#waiters.push(resolve);
      this.#failers.push(reject);
    });
  }

  release(i: number): void {
    const w = this.#waiters.shift();
    this.#failers.shift();
    if (w) w(i);
    else this.#free.push(i);
  }

  /** Every waiter (and every later acquire) fails with `e`. */
  fail(e: Error): void {
    this.#error = e;
    this.#waiters.length = 0;
    for (const f of this.#failers.splice(0)) f(e);
  }
}
