// The arithmetic behind the tables: perftest's peak and average, margins, the speed ratio.
import { describe, expect, it } from 'vitest';
import { bwRow, latRow, MIB, peakSecondsPerOp, speedRatio, sumBw, withinMargins } from '../../src/cli/perf/results.js';

const stamps = (posted: number[], completed: number[]) => ({ posted: Float64Array.from(posted), completed: Float64Array.from(completed), n: posted.length });

describe('bandwidth rows', () => {
  it('peak is perftest\'s: the shortest time per operation over any run of consecutive operations', () => {
    // 4 ops of 1 MiB: posted at 0,1,2,3 ms; completions at 10, 11, 11.5, 30 ms. The run 0..2 takes
    // (11.5 - 0) / 3 ms per op; 1..2 takes (11.5 - 1) / 2; the fastest stretch is ops 0..2.
    const s = stamps([0, 1, 2, 3], [10, 11, 11.5, 30]);
    expect(peakSecondsPerOp(s.posted, s.completed, 4)).toBeCloseTo(11.5 / 3 / 1000, 12);
    const row = bwRow('sabre', { size: MIB, ...s, noPeak: false });
    expect(row.bwAvgMiBs).toBeCloseTo(4 / 0.03, 6); // 4 MiB over 30 ms
    expect(row.bwPeakMiBs).toBeCloseTo(1 / (11.5 / 3 / 1000), 6);
    expect(row.bwPeakGbs).toBeCloseTo((row.bwPeakMiBs * MIB * 8) / 1e9, 9);
    expect(row.msgRateMpps).toBeCloseTo(4 / 0.03 / 1e6, 12);
    expect(bwRow('sabre', { size: MIB, ...s, noPeak: true }).bwPeakMiBs).toBe(0);
  });

  it('peak is never below the average, and a large run is sampled on a grid', () => {
    const n = 20_000;
    const posted = Float64Array.from({ length: n }, (_, i) => i * 0.01);
    const completed = Float64Array.from({ length: n }, (_, i) => i * 0.01 + 0.5);
    const row = bwRow('sabre', { size: 4096, posted, completed, n, noPeak: false });
    expect(row.bwPeakMiBs).toBeGreaterThanOrEqual(row.bwAvgMiBs);
    // Steady 100 ops/ms: the best stretch is the whole run.
    expect(row.bwPeakMiBs / row.bwAvgMiBs).toBeCloseTo(1, 2);
  });

  it('margins keep only operations posted after start + m and completed before end - m', () => {
    const s = stamps([0, 100, 200, 300, 400], [50, 150, 250, 350, 450]);
    const w = withinMargins({ size: 1, ...s, noPeak: true }, 0, 450, 0.1);
    expect(w.n).toBe(3);
    expect(Array.from(w.posted)).toEqual([100, 200, 300]);
  });

  it('-b sums both directions', () => {
    const a = bwRow('sabre', { size: MIB, ...stamps([0], [10]), noPeak: false });
    const b = bwRow('sabre', { size: MIB, ...stamps([0], [20]), noPeak: false });
    const s = sumBw(a, b);
    expect(s.iterations).toBe(2);
    expect(s.bwAvgMiBs).toBeCloseTo(100 + 50, 6);
  });
});

describe('speedRatio', () => {
  it('is > 1 when sabre is faster, for bandwidth and latency alike', () => {
    const fast = bwRow('sabre', { size: MIB, ...stamps([0], [10]), noPeak: true });
    const slow = bwRow('node:net', { size: MIB, ...stamps([0], [20]), noPeak: true });
    expect(speedRatio(fast, slow)).toBeCloseTo(2, 9);
    expect(speedRatio(latRow('sabre', 2, [10, 10, 10]), latRow('node:dgram', 2, [20, 20, 20]))).toBeCloseTo(2, 9);
    expect(speedRatio(latRow('sabre', 2, [40]), latRow('node:dgram', 2, [20]))).toBeCloseTo(0.5, 9);
  });
});

describe('the server\'s check of a client hello', () => {
  it('takes what parsePerf makes and refuses what would size our memory or QPs beyond the bounds', async () => {
    const { checkPeerParams, parsePerf, peerParams } = await import('../../src/cli/perf/options.js');
    const good = JSON.parse(JSON.stringify(peerParams(parsePerf(['write_bw', '-a', '-q', '4', '-b']))));
    expect(checkPeerParams(good).sizes).toHaveLength(23);
    for (const [k, v] of [['qps', 100_000], ['sizes', [1 << 30]], ['sizes', []], ['txDepth', 1e9], ['test', 'rm_rf'], ['inline', -1], ['durationS', 1e9], ['imm', 'yes'], ['verb', 'read']] as const) {
      expect(() => checkPeerParams({ ...good, [k]: v }), `${k}=${JSON.stringify(v)}`).toThrow(/bad hello/);
    }
    expect(() => checkPeerParams(null)).toThrow(/bad hello/);
  });
});
