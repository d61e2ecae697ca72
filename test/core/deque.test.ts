import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Deque } from '../../src/core/deque.js';

type Op = { k: 'push'; v: number } | { k: 'shift' } | { k: 'removeAt'; i: number } | { k: 'clear' } | { k: 'takeAll' };

describe('Deque', () => {
  it('behaves as an array under any sequence of push/shift/removeAt/clear/takeAll (model check)', () => {
    const op: fc.Arbitrary<Op> = fc.oneof(
      { weight: 6, arbitrary: fc.integer().map((v) => ({ k: 'push' as const, v })) },
      { weight: 4, arbitrary: fc.constant({ k: 'shift' as const }) },
      { weight: 2, arbitrary: fc.nat(40).map((i) => ({ k: 'removeAt' as const, i })) },
      { weight: 1, arbitrary: fc.constant({ k: 'clear' as const }) },
      { weight: 1, arbitrary: fc.constant({ k: 'takeAll' as const }) },
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const d = new Deque<number>();
        let m: number[] = [];
        for (const o of ops) {
          if (o.k === 'push') {
            d.push(o.v);
            m.push(o.v);
          } else if (o.k === 'shift') expect(d.shift()).toBe(m.shift());
          else if (o.k === 'removeAt') {
            d.removeAt(o.i);
            if (o.i < m.length) m.splice(o.i, 1);
          } else if (o.k === 'clear') {
            d.clear();
            m = [];
          } else {
            expect(d.takeAll()).toEqual(m);
            m = [];
          }
          expect(d.length).toBe(m.length);
          expect([...d]).toEqual(m);
          for (let i = -1; i <= m.length; i++) expect(d.at(i)).toBe(m[i]);
          if (m.length > 0) {
            expect(d.indexOf(m[m.length - 1]!)).toBe(m.indexOf(m[m.length - 1]!));
            expect(d.find((x) => x === m[0])).toBe(m[0]);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
