// The chunk size of file dedup transfers follows the basis size (src/files/dedup.ts
// fileDedupAvg): 4 KiB up to 16 MiB (edits in small files cost few bytes), larger above (fewer
// chunks: less per-chunk work on both ends of a large file).
import { describe, expect, it } from 'vitest';
import { FILE_DEDUP_AVG, fileDedupAvg } from '../../src/files/dedup.js';

describe('file dedup chunk size', () => {
  it('is 4 KiB up to 16 MiB, 16 KiB above', () => {
    expect(FILE_DEDUP_AVG).toBe(4096);
    for (const [size, avg] of [[0, 4096], [4 << 20, 4096], [16 << 20, 4096], [(16 << 20) + 1, 16384], [48 << 20, 16384], [64 << 20, 16384], [(64 << 20) + 1, 16384], [256 << 20, 16384]] as const) {
      expect(fileDedupAvg(size), `size ${size}`).toBe(avg);
    }
  });
});
