// The one loop that drains a completion queue in event mode, for the code above the verbs that
// owns a CQ (the CM agent, the channel hub, the file server and client): wait until the CQ holds
// completions, hand them over in batches, say when it is empty again, and end once — when the
// CQ stops (its device closed: ERR_CLOSED; an overrun: ERR_INVALID_STATE) or a handler throws.
// Internal: not part of the public API.
import type { WorkCompletion } from '../core/work.js';
import type { CompletionQueue } from './cq.js';

export interface CqHandlers {
  /** Completions in the CQ's order, at most `batch` at a time. */
  onBatch(wcs: WorkCompletion[]): void;
  /** The CQ is empty again after one or more batches: act on what they changed. */
  afterDrain?(): void;
  /**
   * The loop ended: the CQ stopped, or a handler threw (`err` either way). Called once; the
   * loop polls nothing after it.
   */
  onEnd(err: unknown): void;
}

/** Drain `cq` until it stops; resolves after `onEnd`. */
export async function driveCq(cq: CompletionQueue, batch: number, h: CqHandlers): Promise<void> {
  try {
    for (;;) {
      await cq.wait();
      for (let wcs = cq.poll(batch); wcs.length > 0; wcs = cq.poll(batch)) h.onBatch(wcs);
      h.afterDrain?.();
    }
  } catch (e) {
    h.onEnd(e);
  }
}
