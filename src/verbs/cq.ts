// CompletionQueue: a bounded FIFO of work completions with poll() and an event-mode wait().
//
// Overflow (CQ overrun) follows ibverbs, where an overrun is a catastrophic asynchronous CQ
// error: when a completion arrives and the CQ already holds `depth` entries, that completion
// is dropped (counted in `dropped`), the CQ is marked `overrun`, and every QP that reports to
// this CQ is moved to ERROR (their further completions into this CQ are dropped as well;
// completions for another, healthy CQ — e.g. a separate recv CQ — still arrive there).
// poll() keeps returning the completions queued before the overrun; once they are drained,
// poll() and wait() throw / reject SabreError(InvalidState): the CQ is no longer usable.
// Size CQs for the work you keep outstanding (maxSendWr + maxRecvWr of the QPs on it).
import { ErrorCode, SabreError } from '../errors.js';
import type { CompletionSink } from '../rdmap/context.js';
import type { WorkCompletion } from './types.js';

interface Waiter {
  resolve: () => void;
  reject: (e: Error) => void;
  timer?: ReturnType<typeof setTimeout>;
}

export class CompletionQueue implements CompletionSink {
  readonly depth: number;
  #q: WorkCompletion[] = [];
  #head = 0;
  #overrun = false;
  #dropped = 0;
  #closed = false;
  #waiters = new Set<Waiter>();

  /** @internal use Device.createCq */
  constructor(depth: number) {
    this.depth = depth;
  }

  /** Completions waiting to be polled. */
  get count(): number {
    return this.#q.length - this.#head;
  }

  /** True once a completion found the CQ full (see the file comment). */
  get overrun(): boolean {
    return this.#overrun;
  }

  /** Completions lost to the overrun. */
  get dropped(): number {
    return this.#dropped;
  }

  /** @internal the engine's side. */
  push(wc: WorkCompletion): boolean {
    if (this.#closed) return true;
    if (this.#overrun || this.count >= this.depth) {
      this.#overrun = true;
      this.#dropped++;
      this.#wake();
      return false;
    }
    this.#q.push(wc);
    this.#wake();
    return true;
  }

  /** Up to `max` completions, oldest first (possibly none). */
  poll(max = 16): WorkCompletion[] {
    if (this.#closed) throw new SabreError(ErrorCode.Closed, 'completion queue is closed');
    if (!Number.isInteger(max) || max < 1) throw new SabreError(ErrorCode.InvalidArgument, 'poll(max): max must be a positive integer');
    const n = Math.min(max, this.count);
    if (n === 0) {
      if (this.#overrun) throw new SabreError(ErrorCode.InvalidState, `completion queue overrun (${this.#dropped} completions lost)`);
      return [];
    }
    const out = this.#q.slice(this.#head, this.#head + n);
    this.#head += n;
    if (this.#head === this.#q.length) {
      this.#q = [];
      this.#head = 0;
    } else if (this.#head > 4096) {
      this.#q = this.#q.slice(this.#head);
      this.#head = 0;
    }
    return out;
  }

  /**
   * Resolves once the CQ holds a completion — at once if it already does. Rejects with
   * SabreError(Timeout) after timeoutMs, InvalidState on overrun, Closed when the device closes.
   */
  wait(timeoutMs?: number): Promise<void> {
    if (this.#closed) return Promise.reject(new SabreError(ErrorCode.Closed, 'completion queue is closed'));
    if (this.count > 0) return Promise.resolve();
    if (this.#overrun) return Promise.reject(new SabreError(ErrorCode.InvalidState, 'completion queue overrun'));
    if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs >= 0)) {
      return Promise.reject(new SabreError(ErrorCode.InvalidArgument, 'wait(timeoutMs): timeoutMs must be a non-negative number'));
    }
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = { resolve, reject };
      if (timeoutMs !== undefined) {
        w.timer = setTimeout(() => {
          this.#waiters.delete(w);
          reject(new SabreError(ErrorCode.Timeout, `no completion within ${timeoutMs} ms`));
        }, timeoutMs);
      }
      this.#waiters.add(w);
    });
  }

  #wake(): void {
    if (this.#waiters.size === 0) return;
    const ws = [...this.#waiters];
    this.#waiters.clear();
    for (const w of ws) {
      if (w.timer) clearTimeout(w.timer);
      if (this.count > 0) w.resolve();
      else w.reject(new SabreError(ErrorCode.InvalidState, 'completion queue overrun'));
    }
  }

  /** @internal device close. */
  close(): void {
    this.#closed = true;
    const ws = [...this.#waiters];
    this.#waiters.clear();
    for (const w of ws) {
      if (w.timer) clearTimeout(w.timer);
      w.reject(new SabreError(ErrorCode.Closed, 'device closed'));
    }
  }
}
