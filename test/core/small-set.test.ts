// SmallSet (src/core/small-set.ts): one member inline, a Set from the second on; the same
// answers as a Set throughout.
import { describe, expect, it } from 'vitest';
import { SmallSet } from '../../src/core/small-set.js';

describe('SmallSet', () => {
  it('answers as a Set through empty, one, many, and back down', () => {
    const s = new SmallSet<{ n: number }>();
    const [a, b, c] = [{ n: 1 }, { n: 2 }, { n: 3 }];
    expect(s.size).toBe(0);
    expect([...s]).toEqual([]);
    expect(s.delete(a)).toBe(false);
    s.add(a).add(a);
    expect(s.size).toBe(1);
    expect(s.has(a)).toBe(true);
    expect(s.has(b)).toBe(false);
    expect(s.delete(b)).toBe(false);
    expect([...s]).toEqual([a]);
    s.add(b).add(c);
    expect(s.size).toBe(3);
    expect([...s]).toEqual([a, b, c]);
    expect(s.delete(b)).toBe(true);
    expect(s.has(b)).toBe(false);
    expect([...s]).toEqual([a, c]);
    s.delete(a);
    s.delete(c);
    expect(s.size).toBe(0);
    expect([...s]).toEqual([]);
    s.add(b);
    expect([...s]).toEqual([b]);
  });

  it('an inline member deleted while iterating: the iteration still visits it once (a snapshot)', () => {
    const s = new SmallSet<{ n: number }>();
    const a = { n: 1 };
    s.add(a);
    const seen: unknown[] = [];
    for (const v of s) {
      s.delete(v);
      seen.push(v);
    }
    expect(seen).toEqual([a]);
    expect(s.size).toBe(0);
  });
});
