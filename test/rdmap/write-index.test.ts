// The index of an rc flow's pending Writes (rdmap/write-index.ts): what overlapping() reports is
// exactly what a scan of every entry finds, through any order of adds and removes; and a query
// costs O(log k) beyond what it reports — k parked Writes elsewhere are not visited, which made
// every lower segment of a peer that parks Writes cost k visits (bench/write-parked.bench.mjs
// measures the engine with it).
import { describe, expect, it } from 'vitest';
import { PendingWrites } from '../../src/rdmap/write-index.js';
import { rng } from '../sim/random.js';

interface W {
  ssn: number;
  stag: number;
  base: number;
  len: number;
}

describe('PendingWrites', () => {
  it('reports exactly the entries whose extent meets the query, through random adds and removes', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const r = rng(seed);
      const idx = new PendingWrites<W>();
      const live = new Map<number, W>();
      let ssn = 0;
      for (let step = 0; step < 600; step++) {
        const x = r();
        if (x < 0.45 || live.size === 0) {
          const w: W = { ssn: ++ssn, stag: 1 + Math.floor(r() * 3), base: Math.floor(r() * 200), len: r() < 0.05 ? Infinity : Math.floor(r() * 30) };
          idx.add(w, w.stag, w.base, w.len);
          live.set(w.ssn, w);
        } else if (x < 0.75) {
          const keys = [...live.keys()];
          // Mostly the lowest (completions go in ssn order), sometimes any.
          const k = r() < 0.7 ? Math.min(...keys) : keys[Math.floor(r() * keys.length)]!;
          idx.remove(live.get(k)!);
          live.delete(k);
        } else {
          const stag = 1 + Math.floor(r() * 3);
          const to = Math.floor(r() * 220);
          const end = to + 1 + Math.floor(r() * 40);
          const got: number[] = [];
          idx.overlapping(stag, to, end, (w) => got.push(w.ssn));
          const want = [...live.values()].filter((w) => w.stag === stag && w.base < end && w.base + w.len > to).map((w) => w.ssn);
          expect(got.sort((a, b) => a - b)).toEqual(want.sort((a, b) => a - b));
        }
        expect(idx.size).toBe(live.size);
        if (live.size === 0) expect(idx.maxSsn).toBe(0);
        else expect(idx.maxSsn).toBeGreaterThanOrEqual(Math.max(...live.keys()));
      }
    }
  });

  it('3,000 parked entries elsewhere: a query that meets none of them looks at O(log k) nodes, not k', () => {
    const idx = new PendingWrites<W>();
    const K = 3000;
    for (let i = 0; i < K; i++) {
      const w: W = { ssn: 100_000 + i, stag: 7, base: 1_000_000 + 4 * i, len: 2 };
      idx.add(w, w.stag, w.base, w.len);
    }
    // One huge parked Write too (a peer chooses lengths): it must not widen every query.
    idx.add({ ssn: 200_000, stag: 7, base: 500_000, len: 1e9 }, 7, 500_000, 1e9);
    let walked = 0;
    let hits = 0;
    for (let q = 0; q < 1000; q++) {
      const before = idx.walked;
      idx.overlapping(7, 100 + 4 * q, 104 + 4 * q, () => hits++);
      walked = Math.max(walked, idx.walked - before);
    }
    expect(hits).toBe(0);
    expect(walked).toBeLessThan(64);
    // A query over the parked ones reports each it meets.
    let met = 0;
    idx.overlapping(7, 1_000_000, 1_000_000 + 4 * 10, () => met++);
    expect(met).toBe(11);
  });
});
