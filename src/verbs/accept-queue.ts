// The accept side of every listener (cm's listen(), listenChannels()): what is ready waits in
// order for accept(); accept() waits with a timeout and an AbortSignal; close() rejects every
// wait with ERR_CLOSED and hands what was never taken back to its owner to dispose of. One
// queue, so every listener settles its waits the same way.
import { ErrorCode, SabreError } from '../core/errors.js';
import { abortError, checkSignal, onAbort } from './abort.js';

interface Waiter<T> {
  resolve: (item: T) => void;
  reject: (e: Error) => void;
}

export class AcceptQueue<T> implements AsyncIterable<T> {
  readonly #ready: T[] = [];
  readonly #waiters: Waiter<T>[] = [];
  #closed = false;

  /** `what` names the items in the timeout message ("no connection within …"). */
  constructor(private readonly what: string) {}

  /** Items ready and not yet taken. */
  get size(): number {
    return this.#ready.length;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Hand `item` to the oldest waiting accept(), or keep it for the next one. */
  offer(item: T): void {
    const w = this.#waiters.shift();
    if (w) w.resolve(item);
    else this.#ready.push(item);
  }

  /**
   * The next item, in the order offered. Rejects with ERR_TIMEOUT after `timeoutMs`,
   * ERR_ABORTED when `signal` aborts, ERR_CLOSED once the queue is closed.
   */
  accept(timeoutMs?: number, opts: { signal?: AbortSignal } = {}): Promise<T> {
    if (this.#ready.length) return Promise.resolve(this.#ready.shift()!);
    if (this.#closed) return Promise.reject(new SabreError(ErrorCode.Closed, 'listener is closed'));
    if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs >= 0)) return Promise.reject(new SabreError(ErrorCode.InvalidArgument, 'accept(timeoutMs): a non-negative number'));
    const signal = opts?.signal;
    try {
      checkSignal(signal, 'accept');
    } catch (e) {
      return Promise.reject(e);
    }
    if (signal?.aborted) return Promise.reject(abortError(signal, 'accept'));
    return new Promise((resolve, reject) => {
      let t: ReturnType<typeof setTimeout> | undefined;
      const done = (): void => {
        if (t) clearTimeout(t);
        dispose();
        const i = this.#waiters.indexOf(w);
        if (i >= 0) this.#waiters.splice(i, 1);
      };
      const w: Waiter<T> = {
        resolve: (item) => {
          done();
          resolve(item);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      };
      this.#waiters.push(w);
      const dispose = onAbort(signal, () => w.reject(abortError(signal!, 'accept')));
      if (timeoutMs !== undefined) t = setTimeout(() => w.reject(new SabreError(ErrorCode.Timeout, `no ${this.what} within ${timeoutMs} ms`)), timeoutMs);
    });
  }

  /** Every item until the queue closes (an ERR_CLOSED ends the iteration; other errors throw). */
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      try {
        yield await this.accept();
      } catch (e) {
        if (e instanceof SabreError && e.code === ErrorCode.Closed) return;
        throw e;
      }
    }
  }

  /** Close: every waiting accept() rejects with ERR_CLOSED; each item never taken goes to `dispose`. */
  close(dispose: (item: T) => void): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const item of this.#ready.splice(0)) dispose(item);
    for (const w of this.#waiters.splice(0)) w.reject(new SabreError(ErrorCode.Closed, 'listener is closed'));
  }
}
