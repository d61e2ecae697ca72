import { crc32c as nodeCrc32c } from '@node-rs/crc32';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32cShort } from '../../src/kernels/crc32c-short.js';

describe('crc32cShort (JS table path for short headers)', () => {
  it('agrees with @node-rs/crc32 for any bytes and any previous value', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat({ max: 0xffffffff }), (b, prev) => {
        expect(crc32cShort(b, prev)).toBe(nodeCrc32c(Buffer.from(b), prev) >>> 0);
      }),
      { numRuns: 500 },
    );
  });

  it('agrees on any sub-range [from, to) of a buffer (any alignment, any tail length)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), fc.nat(), fc.nat(), fc.nat({ max: 0xffffffff }), (b, x, y, prev) => {
        const from = x % (b.length + 1);
        const to = from + (y % (b.length - from + 1));
        expect(crc32cShort(b, prev, from, to)).toBe(nodeCrc32c(Buffer.from(b.subarray(from, to)), prev) >>> 0);
      }),
      { numRuns: 500 },
    );
  });

  it('has the standard check value and chains', () => {
    const s = new TextEncoder().encode('123456789');
    expect(crc32cShort(s)).toBe(0xe3069283);
    expect(crc32cShort(s.subarray(4), crc32cShort(s.subarray(0, 4)))).toBe(0xe3069283);
  });
});
