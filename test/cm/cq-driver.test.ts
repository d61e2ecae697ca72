// The one CQ loop the CM agent, the channel hub and the file server and client share: batches in
// order, one afterDrain per drained wake-up, and one onEnd however the loop stops.
import { describe, expect, it } from 'vitest';
import { ErrorCode, SabreError } from '../../src/core/errors.js';
import type { WorkCompletion } from '../../src/core/work.js';
import type { CompletionQueue } from '../../src/verbs/cq.js';
import { driveCq } from '../../src/verbs/cq-driver.js';

/** A CQ that hands out `rounds` (one array per wake-up), then rejects its wait with `end`. */
function fakeCq(rounds: number[][], end: Error): CompletionQueue {
  let queued: number[] = [];
  return {
    wait: async () => {
      const next = rounds.shift();
      if (!next) throw end;
      queued = next;
    },
    poll: (max: number) => queued.splice(0, max).map((n) => ({ wrId: n }) as unknown as WorkCompletion),
  } as unknown as CompletionQueue;
}

describe('driveCq', () => {
  it('batches of at most `batch` in order, afterDrain once per wake-up, onEnd once with the CQ\'s error', async () => {
    const seen: number[][] = [];
    const events: string[] = [];
    const ends: unknown[] = [];
    const closed = new SabreError(ErrorCode.Closed, 'device closed');
    await driveCq(fakeCq([[1, 2, 3], [4]], closed), 2, {
      onBatch: (wcs) => seen.push(wcs.map((w) => Number(w.wrId))),
      afterDrain: () => events.push('drained'),
      onEnd: (e) => ends.push(e),
    });
    expect(seen).toEqual([[1, 2], [3], [4]]);
    expect(events).toEqual(['drained', 'drained']);
    expect(ends).toEqual([closed]);
  });

  it('a handler that throws ends the loop: onEnd once with its error, nothing polled after', async () => {
    const boom = new Error('handler failed');
    const ends: unknown[] = [];
    let batches = 0;
    await driveCq(fakeCq([[1, 2], [3]], new Error('not reached')), 1, {
      onBatch: () => {
        batches++;
        throw boom;
      },
      onEnd: (e) => ends.push(e),
    });
    expect(batches).toBe(1);
    expect(ends).toEqual([boom]);
  });
});
