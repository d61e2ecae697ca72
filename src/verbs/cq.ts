// CompletionQueue: a bounded FIFO of work completions with poll() and an event-mode wait().
//
// Overflow (CQ overrun) follows ibverbs, where an overrun is a catastrophic asynchronous CQ
// error: when a completion arrives and the CQ already holds `depth` entries, that completion
// is dropped (counted in `dropped`), the CQ is marked `overrun`, and every QP that reports to
// this CQ is moved to ERROR (their further completions into this CQ are dropped as well;
// completions for another, healthy CQ — e.g. a separate recv CQ — still arrive there).
// poll() keeps returning the completions queued before the overrun; once they are drained,
// poll() and wait() throw / reject SabreError(InvalidState): the CQ is no longer usable.
// Device close works the same way with ERR_CLOSED: the flushes of outstanding work (WrFlushErr)
// are queued before the CQ closes, poll() hands them out, then throws once drained.
// Size CQs for the work you keep outstanding (maxSendWr + maxRecvWr of the QPs on it).
import { timerMs } from '../core/deadline.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { CompletionSink, WorkCompletion } from '../core/work.js';
import type { CqSource } from '../nic/port.js';
import { Deque } from '../core/deque.js';
import { abortError } from './abort.js';
import { isPromiseWrId, Wc, WorkRequestError } from './wc.js';

interface Waiter {
  resolve: () => void;
  reject: (e: Error) => void;
  /** performance.now() past which it rejects (Infinity: no timeout). */
  deadline: number;
  timeoutMs?: number;
}

export class CompletionQueue implements CompletionSink {
  readonly depth: number;
  // A ring (rdmap/deque.ts): taking completions off the head never reallocates, where an array
  // emptied by poll() and refilled by offer() grew a new backing store on every round trip.
  #q = new Deque<WorkCompletion>();
  #overrun = false;
  #dropped = 0;
  #closed = false;
  // Waiters in a list that is never emptied by reallocation: a Set's clear(), and its delete()
  // of the last entry, allocate a fresh hash table — once per wake-up, i.e. per hop of a
  // ping-pong. Slots past #nWaiters are undefined.
  readonly #waiters: (Waiter | undefined)[] = [];
  #nWaiters = 0;
  /** Work requests of promise helpers (qp.write …): their completions settle these instead of queueing. */
  readonly #promised = new Map<bigint, { resolve: (wc: WorkCompletion) => void; reject: (e: Error) => void }>();
  #closing = false;
  /** Promise helpers flushed while the device closes: rejected at the end of its close. */
  readonly #flushed: (() => void)[] = [];
  // One timer for all waiters, armed for the earliest deadline and left armed (unref'd while
  // nobody waits) when they resolve: a wait(timeoutMs) that is woken costs no timer insert and
  // clear — on a ping-pong those were a visible share of every hop.
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Infinity;
  /** A NIC thread's completion ring (undefined inline: the engine offers completions itself). */
  #source: CqSource | undefined;

  /** @internal use Device.createCq */
  constructor(depth: number) {
    this.depth = depth;
  }

  /** @internal a thread port binds this CQ to its completion ring. */
  bind(source: CqSource): void {
    this.#source = source;
  }

  /** Completions waiting to be polled. */
  get count(): number {
    return this.#q.length;
  }

  /** True once a completion found the CQ full (see the file comment). */
  get overrun(): boolean {
    return this.#overrun;
  }

  /** Completions lost to the overrun (with a NIC thread: at least 1 once it overran; the thread counts no more). */
  get dropped(): number {
    return this.#dropped;
  }

  /**
   * @internal the device's NIC refused a completion for this CQ (a NIC thread's completion ring
   * full: its own offer, not this one's): it overran, as offer() would have found it. What the
   * ring holds is taken first, so poll() still returns the completions from before the overrun.
   */
  markOverrun(): void {
    if (this.#overrun) return;
    this.#source?.drain();
    this.#overrun = true;
    this.#dropped++;
    this.#wake();
  }

  /** @internal the engine's side: false when the CQ was full (the completion is lost, the CQ overran). */
  offer(engineWc: WorkCompletion): boolean {
    if (this.#closed) return true;
    const wc: WorkCompletion = new Wc(engineWc);
    if (this.#promised.size !== 0 && isPromiseWrId(wc.wrId)) {
      const p = this.#promised.get(wc.wrId);
      if (p) {
        this.#promised.delete(wc.wrId);
        if (wc.status === 0) p.resolve(wc);
        // The device's close flushes are told when its close ends (close()), so a promise made
        // before close and awaited after it is settled in the same turn as close() resolves.
        else if (this.#closing) this.#flushed.push(() => p.reject(new WorkRequestError(wc, true)));
        else p.reject(new WorkRequestError(wc, false));
        this.#source?.took(1);
        return true;
      }
    }
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
    if (!Number.isInteger(max) || max < 1) throw new SabreError(ErrorCode.InvalidArgument, 'poll(max): max must be a positive integer');
    if (this.#source !== undefined && this.#q.length < max) this.#source.drain();
    const n = Math.min(max, this.count);
    if (n === 0) {
      // After close, what was queued (the flushes of the device's work) is still handed out.
      if (this.#closed) throw new SabreError(ErrorCode.Closed, 'completion queue is closed');
      if (this.#overrun) throw new SabreError(ErrorCode.InvalidState, `completion queue overrun (${this.#dropped} completions lost)`);
      return [];
    }
    // The returned array and its completions are the caller's: nothing here touches them again.
    const out: WorkCompletion[] = [];
    for (let i = 0; i < n; i++) out.push(this.#q.shift()!);
    this.#source?.took(n);
    return out;
  }

  /**
   * Resolves once the CQ holds a completion — at once if it already does. Rejects with
   * SabreError(Timeout) after timeoutMs, InvalidState on overrun, Closed when the device closes,
   * Aborted when `opts.signal` aborts (the waiter is removed; its timer goes with the last one).
   */
  wait(timeoutMs?: number, opts?: { signal?: AbortSignal }): Promise<void> {
    if (this.count === 0 && !this.#closed) this.#source?.drain();
    if (this.count > 0) return Promise.resolve();
    if (this.#closed) return Promise.reject(new SabreError(ErrorCode.Closed, 'completion queue is closed'));
    if (this.#overrun) return Promise.reject(new SabreError(ErrorCode.InvalidState, 'completion queue overrun'));
    if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs >= 0)) {
      return Promise.reject(new SabreError(ErrorCode.InvalidArgument, 'wait(timeoutMs): timeoutMs must be a non-negative number'));
    }
    const signal = opts?.signal;
    if (signal !== undefined) {
      if (!(signal instanceof AbortSignal)) return Promise.reject(new SabreError(ErrorCode.InvalidArgument, 'wait: signal must be an AbortSignal'));
      if (signal.aborted) return Promise.reject(abortError(signal, 'wait'));
    }
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = { resolve, reject, deadline: Infinity };
      if (signal) {
        const abort = (): void => {
          if (!this.#removeWaiter(w)) return;
          if (this.#nWaiters === 0) this.#timer?.unref();
          reject(abortError(signal, 'wait'));
        };
        signal.addEventListener('abort', abort, { once: true });
        w.resolve = () => {
          signal.removeEventListener('abort', abort);
          resolve();
        };
        w.reject = (e) => {
          signal.removeEventListener('abort', abort);
          reject(e);
        };
      }
      if (timeoutMs !== undefined) {
        w.deadline = performance.now() + timeoutMs;
        w.timeoutMs = timeoutMs;
        if (w.deadline < this.#timerAt) this.#arm(w.deadline);
        else this.#timer?.ref();
      }
      this.#waiters[this.#nWaiters++] = w;
    });
  }

  /**
   * Completions as they come, one at a time, until the device closes (the loop then ends after
   * the flushed ones). Same completions poll() would return: do not mix the two on one CQ.
   */
  async *[Symbol.asyncIterator](): AsyncIterator<WorkCompletion> {
    for (;;) {
      try {
        await this.wait();
      } catch (e) {
        if (e instanceof SabreError && e.code === ErrorCode.Closed) return;
        throw e;
      }
      for (const wc of this.poll(64)) yield wc;
    }
  }

  #arm(at: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timerAt = at;
    // A deadline past a timer's range is looked at again when the longest timer fires.
    this.#timer = setTimeout(this.#expire, timerMs(Math.max(0, at - performance.now()) + 1));
  }

  #expire = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    // Keep the waiters not yet due, in order; reject the rest (reject runs nothing synchronously).
    let kept = 0;
    for (let i = 0; i < this.#nWaiters; i++) {
      const w = this.#waiters[i]!;
      this.#waiters[i] = undefined;
      if (w.deadline <= now) w.reject(new SabreError(ErrorCode.Timeout, `no completion within ${w.timeoutMs} ms`));
      else {
        this.#waiters[kept++] = w;
        if (w.deadline < next) next = w.deadline;
      }
    }
    this.#nWaiters = kept;
    if (next < Infinity) this.#arm(next);
  };

  #wake(): void {
    const n = this.#nWaiters;
    if (n === 0) return;
    this.#nWaiters = 0;
    // resolve/reject run nothing synchronously: nobody adds a waiter while this loop runs.
    for (let i = 0; i < n; i++) {
      const w = this.#waiters[i]!;
      this.#waiters[i] = undefined;
      if (this.count > 0) w.resolve();
      else w.reject(new SabreError(ErrorCode.InvalidState, 'completion queue overrun'));
    }
    // Nobody waits: the timer must not keep the process alive.
    this.#timer?.unref();
  }

  /** @internal a promise helper's work request `id` is about to be posted: its completion settles the promise. */
  expect(id: bigint): Promise<WorkCompletion> {
    return new Promise((resolve, reject) => this.#promised.set(id, { resolve, reject }));
  }

  /** @internal the post of `id` failed synchronously. */
  unexpect(id: bigint): void {
    this.#promised.delete(id);
  }

  /** @internal the device starts closing: flushes from here on reject promise helpers with ERR_CLOSED. */
  closing(): void {
    this.#closing = true;
  }

  /** @internal device close. */
  close(): void {
    this.#closed = true;
    this.#closing = true;
    for (const f of this.#flushed.splice(0)) f();
    for (const [, p] of this.#promised) p.reject(new SabreError(ErrorCode.Closed, 'device closed'));
    this.#promised.clear();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const ws = this.#waiters.slice(0, this.#nWaiters);
    this.#waiters.fill(undefined);
    this.#nWaiters = 0;
    for (const w of ws) w!.reject(new SabreError(ErrorCode.Closed, 'device closed'));
  }

  /** Take `w` off the waiter list, keeping the order of the rest; false if it was not on it. */
  #removeWaiter(w: Waiter): boolean {
    const i = this.#waiters.indexOf(w);
    if (i < 0 || i >= this.#nWaiters) return false;
    for (let k = i; k < this.#nWaiters - 1; k++) this.#waiters[k] = this.#waiters[k + 1];
    this.#waiters[--this.#nWaiters] = undefined;
    return true;
  }
}
