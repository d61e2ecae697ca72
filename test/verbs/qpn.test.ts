// QPN allocation (src/verbs/qpn.ts): random draws that keep the thread rule, never a live number,
// no number of a QP destroyed recently, and a clear error when no draw finds a free one.
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/index.js';
import { QPN_LIMIT, QPN_RECENT, QpnSpace } from '../../src/verbs/qpn.js';

/** A rand that returns `ks` in turn (then the last forever), recording the bounds it was asked for. */
function scripted(ks: number[]) {
  const asked: Array<[number, number]> = [];
  let i = 0;
  return { asked, rand: (lo: number, hi: number) => (asked.push([lo, hi]), ks[Math.min(i++, ks.length - 1)]!) };
}

describe('QpnSpace', () => {
  it('maps a draw k to thread + n·k, the thread turning with each QP, within 24 bits', () => {
    const r = scripted([5, 9, 11]);
    const s = new QpnSpace(() => 3, () => false, r.rand);
    expect([s.draw(), s.draw(), s.draw()]).toEqual([0 + 3 * 5, 1 + 3 * 9, 2 + 3 * 11]);
    // The largest k each draw may return still gives a QPN below the limit, and one more would not.
    r.asked.forEach(([lo, hi], thread) => {
      expect(lo).toBe(1);
      expect(thread + 3 * (hi - 1)).toBeLessThan(QPN_LIMIT);
      expect(thread + 3 * hi).toBeGreaterThanOrEqual(QPN_LIMIT);
    });
  });

  it('names the thread the device places a QP on, without moving the turn of the others', () => {
    const r = scripted([5]);
    const s = new QpnSpace(() => 4, () => false, r.rand);
    expect(s.draw()).toBe(0 + 4 * 5);
    expect(s.draw(0)).toBe(0 + 4 * 5);
    expect(s.draw(3)).toBe(3 + 4 * 5);
    expect(s.draw()).toBe(1 + 4 * 5);
    expect(s.draw(9)).toBe(2 + 4 * 5); // not a thread of this device: the turn decides
  });

  it('skips live numbers and numbers of QPs destroyed recently', () => {
    const live = new Set([7]);
    const r = scripted([7, 8, 8, 9]);
    const s = new QpnSpace(() => 1, (q) => live.has(q), r.rand);
    expect(s.draw()).toBe(8); // 7 is live
    s.retire(8);
    expect(s.draw()).toBe(9); // 8 was just destroyed
  });

  it('forgets the oldest destroyed number past its bound', () => {
    const r = scripted([1]);
    const s = new QpnSpace(() => 1, () => false, r.rand);
    for (let q = 1; q <= QPN_RECENT; q++) s.retire(q);
    expect(() => s.draw()).toThrow(expect.objectContaining({ code: ErrorCode.LimitExceeded }));
    s.retire(QPN_RECENT + 1); // 1 is now the oldest past the bound
    expect(s.draw()).toBe(1);
  });

  it('draws from a CSPRNG by default: 1000 live QPNs, distinct, within 24 bits, spread over the space', () => {
    const live = new Set<number>();
    const s = new QpnSpace(() => 1, (q) => live.has(q));
    for (let i = 0; i < 1000; i++) live.add(s.draw());
    const qs = [...live];
    expect(qs).toHaveLength(1000);
    expect(qs.every((q) => q >= 1 && q < QPN_LIMIT)).toBe(true);
    // A quarter of the space either side: 1000 uniform draws all inside the middle half is 2^-1000.
    expect(qs.some((q) => q < QPN_LIMIT / 4) && qs.some((q) => q > (QPN_LIMIT * 3) / 4)).toBe(true);
  });
});
