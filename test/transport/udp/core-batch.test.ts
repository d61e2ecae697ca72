// The udp link core's receive batches: each engine step sees exactly the frames of its
// deliveries, in order, with the sender's address — also when the core reuses its per-step
// records across steps and when a delivery arrives while a step runs (a nested step).
import { describe, expect, it } from 'vitest';
import type { Frame, Inbound } from '../../../src/core/frame.js';
import { UdpCore } from '../../../src/transport/udp/core.js';
import { frameBytes } from '../../../src/transport/udp/frame-codec.js';

const peer = { host: '127.0.0.1', port: 4791 };
const other = { host: '127.0.0.1', port: 4792 };

/** Per step: the port and ssn of its ack frames, copied during the step, and the array itself. */
function collect(): { steps: { port: number; ssn: number }[][]; seen: Inbound[][] } {
  return { steps: [], seen: [] };
}

function ack(ssn: number): Uint8Array {
  return frameBytes({ kind: 'ack', srcQpn: 7, dstQpn: 9, ssn });
}

describe('UdpCore receive batches', () => {
  it('hands each step its own frames, in order, across reused records and a nested step', () => {
    const released: [number, number][] = [];
    const core = new UdpCore(60_000, { send: () => {}, release: (ctx, n) => released.push([ctx, n]), room: () => Infinity, incarnationOf: () => 1 });
    const got = collect();
    let nestOnce = true;
    core.start({
      frames(batch: Inbound[]) {
        got.seen.push(batch);
        const step = batch.map((b) => ({ port: (b.from as unknown as { port: number }).port, ssn: (b.frame as Frame & { ssn: number }).ssn }));
        got.steps.push(step);
        if (nestOnce && step.length === 3) {
          // A delivery while this step runs: its own step, which must not disturb this batch.
          nestOnce = false;
          core.delivery({ from: other, ctx: 2, payload: ack(100), dstQpn: 9, srcQpn: 7 });
          core.deliveriesDone();
          // This step's records still name this step's frames after the nested one.
          const again = batch.map((b) => (b.frame as Frame & { ssn: number }).ssn);
          expect(again).toEqual(step.map((s) => s.ssn));
        }
      },
      peerLost() {},
      qpUp() {},
      qpDown() {},
    });
    for (let round = 0; round < 4; round++) {
      const n = round === 1 ? 3 : round + 1;
      for (let i = 0; i < n; i++) core.delivery({ from: i % 2 === 0 ? peer : other, ctx: 1, payload: ack(round * 10 + i), dstQpn: 9, srcQpn: 7 });
      core.deliveriesDone();
    }
    expect(got.steps).toEqual([
      [{ port: 4791, ssn: 0 }],
      [{ port: 4791, ssn: 10 }, { port: 4792, ssn: 11 }, { port: 4791, ssn: 12 }],
      [{ port: 4792, ssn: 100 }],
      [{ port: 4791, ssn: 20 }, { port: 4792, ssn: 21 }, { port: 4791, ssn: 22 }],
      [{ port: 4791, ssn: 30 }, { port: 4792, ssn: 31 }, { port: 4791, ssn: 32 }, { port: 4792, ssn: 33 }],
    ]);
    // Every delivery's credit came back, once.
    const byCtx = new Map<number, number>();
    for (const [ctx, n] of released) byCtx.set(ctx, (byCtx.get(ctx) ?? 0) + n);
    expect(Object.fromEntries(byCtx)).toEqual({ 1: 1 + 3 + 3 + 4, 2: 1 });
    // The arrays of finished outer steps are emptied (the nested step's was its own).
    expect(new Set(got.seen.filter((b) => b.length > 0)).size).toBe(1);
  });
});
