// One CQ fed by several NIC threads (src/nic/fan-in-cq.ts): completions from every thread reach
// the CQ in the order they are offered, each completion the application takes is told to the
// thread it came from (each thread counts a CQ's room from its own), and what is offered while
// the device closes reaches the CQ together at the end.
import { describe, expect, it } from 'vitest';
import { FanInCq } from '../../src/nic/fan-in-cq.js';
import { CompletionQueue } from '../../src/verbs/cq.js';
import type { WorkCompletion } from '../../src/core/work.js';

const wc = (wrId: number): WorkCompletion => ({ wrId, status: 0, opcode: 0, byteLen: 0, qpn: 1 }) as WorkCompletion;

function setup() {
  const cq = new CompletionQueue(16);
  const fan = new FanInCq(cq, 2);
  const took = [0, 0];
  const drained = [0, 0];
  fan.parts.forEach((p, i) => p.bind!({ drain: () => drained[i]!++, took: (n) => (took[i]! += n) }, 1));
  cq.bind(fan.source);
  return { cq, fan, took, drained };
}

describe('FanInCq', () => {
  it('poll drains every thread and tells each thread what was taken of its own', () => {
    const { cq, fan, took, drained } = setup();
    fan.parts[1]!.offer(wc(10));
    fan.parts[0]!.offer(wc(20));
    fan.parts[1]!.offer(wc(11));
    expect(cq.poll(2).map((w) => w.wrId)).toEqual([10, 20]);
    expect(took).toEqual([1, 1]);
    expect(cq.poll(4).map((w) => w.wrId)).toEqual([11]);
    // A poll wanting more than the CQ holds drains every thread's ring first.
    expect(drained).toEqual([1, 1]);
    expect(took).toEqual([1, 2]);
  });

  it('holds what is offered while the device closes, and hands it over in order at release', () => {
    const { cq, fan } = setup();
    fan.hold();
    const shared = wc(1);
    expect(fan.parts[0]!.offer(shared)).toBe(true);
    (shared as { wrId: number }).wrId = 2; // the port refills its record: the held one is a copy
    fan.parts[1]!.offer(shared);
    expect(cq.count).toBe(0);
    fan.release();
    expect(cq.poll(4).map((w) => w.wrId)).toEqual([1, 2]);
  });
});
