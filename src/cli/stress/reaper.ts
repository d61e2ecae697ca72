// Routes the completions of one CQ to the promise of the operation that posted them (the stress
// worker's pairs each wait for their own work request). A loop polls the CQ until stop(); an
// operation still waiting then rejects with ERR_CLOSED, so no pair waits on a stopped reaper.
import { Lifecycle, type Settle } from '../../core/lifecycle.js';

export interface Wc {
  wrId: number | bigint;
  status: number;
  opcode: number;
  byteLen: number;
}

/** What the reaper uses of a CQ. */
export interface ReapedCq {
  poll(n: number): Wc[];
  wait(ms?: number): Promise<void>;
}

export class Reaper {
  readonly #cq: ReapedCq;
  readonly #waiters = new Map<number, Settle<Wc>>();
  readonly #life = new Lifecycle();
  readonly #loop: Promise<void>;

  constructor(cq: ReapedCq) {
    this.#cq = cq;
    this.#loop = this.#run();
  }

  /** The completion of work request `wrId`; rejects with ERR_CLOSED once the reaper stops. */
  expect(wrId: number): Promise<Wc> {
    const { promise, settle } = this.#life.owe<Wc>();
    if (!this.#life.ended) this.#waiters.set(wrId, settle);
    // A pair that fails to post drops the promise unawaited: its ERR_CLOSED at stop() must not
    // surface as an unhandled rejection and take the worker down. Awaiting it still throws.
    promise.catch(() => {});
    return promise;
  }

  async #run(): Promise<void> {
    while (!this.#life.closing) {
      try {
        await this.#cq.wait(100);
      } catch {
        /* timeout: look at the stop flag */
      }
      for (const wc of this.#cq.poll(256)) {
        const id = Number(wc.wrId);
        const w = this.#waiters.get(id);
        if (w) {
          this.#waiters.delete(id);
          w.resolve(wc);
        }
      }
    }
  }

  /** Stop polling; every call returns the first call's promise. */
  stop(): Promise<void> {
    return this.#life.close(async () => {
      await this.#loop;
      this.#waiters.clear();
      this.#life.end();
    });
  }
}
