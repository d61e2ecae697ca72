// What every listener (cm's listen(), listenChannels()) is to its user, in one place: what is
// ready waits in order for accept(); accept() waits with a timeout and an AbortSignal; for-await
// takes every item until the listener closes. Its lifecycle is src/core/lifecycle.ts's: close()
// does its work once (a second call does nothing: it must not let go of a service that a newer
// listener holds by then), every accept() still waiting rejects with ERR_CLOSED, as does every
// accept() after, and what was never taken goes back to the subclass to dispose of. The device
// closing closes the listener, so nobody waits on one that can no longer accept.
import { timerMs } from '../core/deadline.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { Lifecycle, type Settle, untilClosed } from '../core/lifecycle.js';
import { abortError, checkSignal, onAbort } from './abort.js';
import type { Device } from './device.js';

export abstract class Listener<T> implements AsyncIterable<T> {
  readonly device: Device;
  readonly #what: string;
  readonly #life = new Lifecycle(() => new SabreError(ErrorCode.Closed, 'listener is closed'));
  readonly #ready: T[] = [];
  /** Waiting accept()s, oldest first; each is also owed by #life, which rejects it at the end. */
  readonly #waiters: Settle<T>[] = [];
  #unhook: (() => void) | undefined;

  /** `what` names the items in the timeout message ("no connection within …"). */
  protected constructor(dev: Device, what: string) {
    this.device = dev;
    this.#what = what;
  }

  /**
   * The subclass's constructor calls this last, once it holds what release() lets go of: from
   * here the device's close closes the listener (a constructor that throws earlier leaves no hook).
   */
  protected watchDevice(): void {
    this.#unhook = this.device.onClose(() => this.close());
  }

  /** Stop taking new items (the service registration, half-made items); runs once, at close. */
  protected abstract release(): void;

  /** Let go of an item nobody took: at close, or offered after it. */
  protected abstract dispose(item: T): void;

  /** close() was called, or the device closed. */
  protected get closing(): boolean {
    return this.#life.closing;
  }

  /** Items ready and not yet taken. */
  protected get ready(): number {
    return this.#ready.length;
  }

  /** Hand `item` to the oldest waiting accept(), or keep it for the next one; after close it is disposed of. */
  protected offer(item: T): void {
    if (this.#life.closing) {
      this.dispose(item);
      return;
    }
    const w = this.#waiters.shift();
    if (w) w.resolve(item);
    else this.#ready.push(item);
  }

  /**
   * The next item, in the order offered. Rejects with ERR_TIMEOUT after `timeoutMs`,
   * ERR_ABORTED when `signal` aborts, ERR_CLOSED when the listener or its device closes.
   */
  accept(timeoutMs?: number, opts: { signal?: AbortSignal } = {}): Promise<T> {
    if (this.#ready.length) return Promise.resolve(this.#ready.shift()!);
    if (this.#life.closing) return Promise.reject(this.#life.closedError());
    if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs >= 0)) return Promise.reject(new SabreError(ErrorCode.InvalidArgument, 'accept(timeoutMs): a non-negative number'));
    const signal = opts?.signal;
    try {
      checkSignal(signal, 'accept');
    } catch (e) {
      return Promise.reject(e);
    }
    if (signal?.aborted) return Promise.reject(abortError(signal, 'accept'));
    const { promise, settle } = this.#life.owe<T>();
    const leave = (): void => {
      const i = this.#waiters.indexOf(w);
      if (i >= 0) this.#waiters.splice(i, 1);
    };
    const w: Settle<T> = {
      resolve: (item) => {
        leave();
        settle.resolve(item);
      },
      reject: (e) => {
        leave();
        settle.reject(e);
      },
    };
    this.#waiters.push(w);
    const dispose = onAbort(signal, () => w.reject(abortError(signal!, 'accept')));
    const t = timeoutMs === undefined ? undefined : setTimeout(() => w.reject(new SabreError(ErrorCode.Timeout, `no ${this.#what} within ${timeoutMs} ms`)), timerMs(timeoutMs));
    // However it settles (the lifecycle's end settles it directly), the timer and the abort
    // listener go with it: neither may keep the process alive or fire later.
    const done = (): void => {
      if (t) clearTimeout(t);
      dispose();
    };
    promise.then(done, done);
    return promise;
  }

  /** Every item until the listener closes (an ERR_CLOSED ends the iteration; other errors throw). */
  [Symbol.asyncIterator](): AsyncIterator<T> {
    return untilClosed(() => this.accept());
  }

  /**
   * Stop accepting: release() runs, items never taken are disposed of, waiting accept()s reject
   * with ERR_CLOSED. Once: later calls (and the device's close after it) do nothing.
   */
  close(): void {
    let failed: { e: unknown } | undefined;
    void this.#life.close(() => {
      this.#unhook?.();
      try {
        this.release();
      } catch (e) {
        // The waits still settle and the items still go; the caller of the first close hears of it.
        failed = { e };
      }
      for (const item of this.#ready.splice(0)) this.dispose(item);
      this.#waiters.length = 0;
      this.#life.end();
    });
    if (failed) throw failed.e;
  }
}
