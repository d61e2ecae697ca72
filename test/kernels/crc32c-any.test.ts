import { crc32c as nodeCrc32c } from '@node-rs/crc32';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { crc32cIn } from '../../src/kernels/crc32c-any.js';

describe('crc32cIn (one dispatch: JS table, kernel in place, kernel through scratch)', () => {
  let dm: DeviceMemory;
  let base = 0;
  beforeAll(async () => {
    dm = await DeviceMemory.create({ maximumBytes: 64 << 20 });
    base = dm.alloc(1 << 20);
  });
  afterAll(() => dm.free(base));

  it('agrees with @node-rs/crc32 on ordinary arrays and on views of device memory, short and long', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 5000 }), fc.nat({ max: 4096 }), fc.nat({ max: 0xffffffff }), (b, at, prev) => {
        const want = nodeCrc32c(Buffer.from(b), prev) >>> 0;
        expect(crc32cIn(dm, b, prev)).toBe(want);
        const view = dm.u8().subarray(base + at, base + at + b.length);
        view.set(b);
        expect(crc32cIn(dm, view, prev)).toBe(want);
      }),
      { numRuns: 300 },
    );
  });
});
