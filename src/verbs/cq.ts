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
import { ErrorCode, SabreError } from '../core/errors.js';
import type { CompletionSink, WorkCompletion } from '../core/work.js';

interface Waiter {
  resolve: () => void;
  reject: (e: Error) => void;
  /** performance.now() past which it rejects (Infinity: no timeout). */
  deadline: number;
  timeoutMs?: number;
}

export class CompletionQueue implements CompletionSink {
  readonly depth: number;
  #q: WorkCompletion[] = [];
  #head = 0;
  #overrun = false;
  #dropped = 0;
  #closed = false;
  #waiters = new Set<Waiter>();
  // One timer for all waiters, armed for the earliest deadline and left armed (unref'd while
  // nobody waits) when they resolve: a wait(timeoutMs) that is woken costs no timer insert and
  // clear — on a ping-pong those were ~1.5 µs of every hop.
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Infinity;

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

  /** @internal the engine's side: false when the CQ was full (the completion is lost, the CQ overran). */
  offer(wc: WorkCompletion): boolean {
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
      const w: Waiter = { resolve, reject, deadline: Infinity };
      if (timeoutMs !== undefined) {
        w.deadline = performance.now() + timeoutMs;
        w.timeoutMs = timeoutMs;
        if (w.deadline < this.#timerAt) this.#arm(w.deadline);
        else this.#timer?.ref();
      }
      this.#waiters.add(w);
    });
  }

  #arm(at: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(this.#expire, Math.max(0, at - performance.now()) + 1);
  }

  #expire = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const w of this.#waiters) {
      if (w.deadline <= now) {
        this.#waiters.delete(w);
        w.reject(new SabreError(ErrorCode.Timeout, `no completion within ${w.timeoutMs} ms`));
      } else if (w.deadline < next) next = w.deadline;
    }
    if (next < Infinity) this.#arm(next);
  };

  #wake(): void {
    if (this.#waiters.size === 0) return;
    // resolve/reject run nothing synchronously: iterating the live set is safe.
    for (const w of this.#waiters) {
      if (this.count > 0) w.resolve();
      else w.reject(new SabreError(ErrorCode.InvalidState, 'completion queue overrun'));
    }
    this.#waiters.clear();
    // Nobody waits: the timer must not keep the process alive.
    this.#timer?.unref();
  }

  /** @internal device close. */
  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const ws = [...this.#waiters];
    this.#waiters.clear();
    for (const w of ws) w.reject(new SabreError(ErrorCode.Closed, 'device closed'));
  }
}
