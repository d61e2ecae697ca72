// The lifecycle of the objects above verbs that a user closes (a channel, the file client's
// session, the file server): close() does its work once and every call returns the same promise;
// when the object ends, every promise it still owes settles — with the object's failure, or with
// the closed error (SabreError ERR_CLOSED unless the object's contract names another, as the file
// client's ERR_FILE_CLOSED). One place for the rules, so no object leaves a caller waiting.
import { ErrorCode, SabreError } from './errors.js';

/** The two ends of a promise the object owes. */
export interface Settle<T = void> {
  resolve(v: T): void;
  reject(e: Error): void;
}

export class Lifecycle {
  readonly #closedError: () => Error;
  #closing: Promise<void> | undefined;
  #closeCalled = false;
  #ended = false;
  #onEnd: (() => void) | undefined;
  /** Made on the first owed promise: an idle object holds as little as it can. */
  #owed: Set<Settle<never>> | undefined;

  /** `closedError` makes the error owed promises reject with when the object closes. */
  constructor(closedError: () => Error = () => new SabreError(ErrorCode.Closed, 'closed')) {
    this.#closedError = closedError;
  }

  /** close() was called, or the object ended. */
  get closing(): boolean {
    return this.#closeCalled || this.#ended;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** The error the object's contract gives for "it is closed". */
  closedError(): Error {
    return this.#closedError();
  }

  /**
   * Close once. The first call runs `start` (what begins the close; it may finish it by calling
   * end(), now or later); every call returns the promise of that first one, which resolves once
   * `start` has settled and end() has been called (it rejects only if `start` throws).
   */
  close(start: () => void | Promise<void>): Promise<void> {
    if (this.#closing) return this.#closing;
    // Closing from here on, before `start` runs: it reads `closing` to know what to do.
    this.#closeCalled = true;
    const ended = this.#ended ? Promise.resolve() : new Promise<void>((r) => (this.#onEnd = r));
    this.#closing = (async () => {
      await start();
      await ended;
    })();
    return this.#closing;
  }

  /**
   * A promise the object owes its caller: `settle` resolves or rejects it (and forgets it); if
   * the object ends first it rejects with the closed error (or the error end() was given).
   */
  owe<T>(): { promise: Promise<T>; settle: Settle<T> } {
    let settle!: Settle<T>;
    const promise = new Promise<T>((resolve, reject) => {
      const s: Settle<T> = {
        resolve: (v) => {
          this.#forget(s as Settle<never>);
          resolve(v);
        },
        reject: (e) => {
          this.#forget(s as Settle<never>);
          reject(e);
        },
      };
      settle = s;
    });
    if (this.#ended) settle.reject(this.#closedError());
    else (this.#owed ??= new Set()).add(settle as Settle<never>);
    return { promise, settle };
  }

  /** The last owed promise settled drops the Set too: an object that owed one at its start (a channel's connect) holds none idle. */
  #forget(s: Settle<never>): void {
    const owed = this.#owed;
    if (owed?.delete(s) && owed.size === 0) this.#owed = undefined;
  }

  /** Reject every owed promise with `err` (the object failed; it may still be ending). */
  rejectAll(err: Error): void {
    const owed = this.#owed;
    if (!owed || owed.size === 0) return;
    this.#owed = undefined;
    for (const s of owed) s.reject(err);
  }

  /**
   * The object ended: nothing more will happen on it. Every owed promise rejects (with `err`, or
   * the closed error) and close()'s promise resolves. Idempotent.
   */
  end(err?: Error): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#owed?.size) this.rejectAll(err ?? this.#closedError());
    this.#onEnd?.();
    this.#onEnd = undefined;
  }
}

/**
 * An iteration over `next` (a listener's accept, a receiver's next) that ends when the object
 * closes: ERR_CLOSED ends it as done, any other error throws out of the for-await.
 */
export async function* untilClosed<T>(next: () => Promise<T>): AsyncGenerator<T, void, undefined> {
  for (;;) {
    try {
      yield await next();
    } catch (e) {
      if (e instanceof SabreError && e.code === ErrorCode.Closed) return;
      throw e;
    }
  }
}
