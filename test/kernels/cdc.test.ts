// The FastCDC kernel (assembly/cdc.ts) through sabre/kernels and directly: against the byte-at-a-
// time reference of cdc-reference.ts (so the kernel's multi-byte steps are proved
// exact, not assumed), boundaries independent of how the stream is split, min/max respected,
// per-key tables, content-definedness (an insertion moves only nearby boundaries), the batch
// form over descriptors, and the argument checks.
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createSharedMemory, instantiateKernels } from '../../src/dataplane/wasm.js';
import { ErrorCode } from '../../src/core/errors.js';
import { type CdcOptions, cdcParams, chunkLengths, createChunker, gearTable, writeCdcState } from '../../src/kernels/cdc.js';
import { mixed, reference } from './cdc-reference.js';

describe('cdc kernel', () => {
  it('matches the byte-at-a-time reference (normal, min, max and tail cuts)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40_000 }),
        fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        fc.constantFrom(256, 512, 1024, 4096),
        fc.integer({ min: 0, max: 3 }),
        fc.boolean(),
        fc.uint8Array({ minLength: 0, maxLength: 16 }),
        (n, seed, avg, nc, random, key) => {
          const data = random ? new Uint8Array(randomBytes(n)) : mixed(n, seed);
          const o: CdcOptions = { avg, min: Math.max(64, avg / 4), max: avg * 4, normalization: nc, key };
          expect(chunkLengths(data, o)).toEqual(reference(data, o));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('cuts at the same places however the stream is split', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200_000 }),
        fc.array(fc.integer({ min: 0, max: 200_000 }), { maxLength: 12 }),
        fc.constantFrom(1024, 4096, 16384),
        (n, cuts, avg) => {
          const data = mixed(n, n * 7919);
          const whole = chunkLengths(data, { avg });
          const points = [...new Set(cuts.map((c) => c % (n + 1)))].sort((a, b) => a - b);
          const c = createChunker({ avg });
          const got: number[] = [];
          let at = 0;
          for (const p of [...points, n]) {
            got.push(...c.push(data.subarray(at, p)));
            at = p;
          }
          got.push(...c.finish());
          expect(got).toEqual(whole);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('is deterministic, sums to the input, and respects min and max', () => {
    const data = new Uint8Array(randomBytes(3 << 20));
    for (const o of [{}, { avg: 8192 }, { avg: 65536, min: 16384, max: 131072 }, { avg: 4096, normalization: 0 }] as CdcOptions[]) {
      const a = chunkLengths(data, o);
      expect(chunkLengths(data, o)).toEqual(a);
      expect(a.reduce((s, x) => s + x, 0)).toBe(data.length);
      const p = cdcParams(o);
      for (const len of a.slice(0, -1)) {
        expect(len).toBeGreaterThanOrEqual(p.min);
        expect(len).toBeLessThanOrEqual(p.max);
      }
      expect(a.at(-1)!).toBeLessThanOrEqual(p.max);
      // The mean sits near the target (FastCDC's normalized sizes: within a factor 2 of avg).
      const mean = data.length / a.length;
      expect(mean).toBeGreaterThan(p.avg * 0.6);
      expect(mean).toBeLessThan(p.avg * 2);
    }
    // Data without a cut point anywhere (all zeros: fp stays a constant) is cut at max.
    const zeros = chunkLengths(new Uint8Array(300_000), { avg: 16384 });
    expect(zeros.slice(0, -1).every((l) => l === 65536)).toBe(true);
  });

  it('keys give unrelated tables and unrelated boundaries', () => {
    const k1 = new Uint8Array(32).fill(1);
    const k2 = new Uint8Array(32).fill(1);
    k2[31] = 2;
    const t0 = gearTable();
    const t1 = gearTable(k1);
    const t2 = gearTable(k2);
    expect(t1).toEqual(gearTable(k1.slice()));
    expect(t1).not.toEqual(t2);
    expect(t0).not.toEqual(t1);
    // ~half the bits differ between two tables (HKDF output, not a near-copy).
    let diff = 0;
    for (let i = 0; i < t1.length; i++) for (let b = t1[i]! ^ t2[i]!; b; b &= b - 1) diff++;
    expect(diff / (t1.length * 8)).toBeGreaterThan(0.45);
    expect(diff / (t1.length * 8)).toBeLessThan(0.55);
    const data = new Uint8Array(randomBytes(1 << 20));
    const ends = (ls: number[]): Set<number> => {
      const s = new Set<number>();
      let at = 0;
      for (const l of ls.slice(0, -1)) s.add((at += l));
      return s;
    };
    const e1 = ends(chunkLengths(data, { key: k1 }));
    const e2 = ends(chunkLengths(data, { key: k2 }));
    const shared = [...e1].filter((x) => e2.has(x)).length;
    expect(shared).toBeLessThan(Math.max(3, e1.size / 10));
  });

  it('is content-defined: an insertion near the start leaves later boundaries in place', () => {
    const data = new Uint8Array(randomBytes(2 << 20));
    const edited = new Uint8Array(data.length + 100);
    edited.set(data.subarray(0, 5000));
    edited.set(randomBytes(100), 5000);
    edited.set(data.subarray(5000), 5100);
    const ends = (ls: number[], shift: number): number[] => {
      const out: number[] = [];
      let at = 0;
      for (const l of ls) out.push((at += l) - shift);
      return out;
    };
    const a = new Set(ends(chunkLengths(data), 0));
    const b = ends(chunkLengths(edited), 100).filter((e) => e > 200_000);
    expect(b.length).toBeGreaterThan(50);
    expect(b.every((e) => a.has(e))).toBe(true);
  });

  it('the batch form over descriptors equals the stream, and resumes when the output fills', async () => {
    const memory = createSharedMemory(64, 64);
    const k = await instantiateKernels(memory);
    const u8 = new Uint8Array(memory.buffer);
    const dv = new DataView(memory.buffer);
    const base = Math.ceil(Number(k.heapBase()) / 64) * 64;
    const TABLE = base, ST = base + 4096, DESC = base + 4160, OUT = base + 8192, DATA = base + 65536;
    const data = mixed(1 << 20, 42);
    u8.set(data, DATA);
    const o = { avg: 1024 };
    const p = cdcParams(o);
    u8.set(gearTable(), TABLE);
    k.cdcPrepareTable(TABLE);
    writeCdcState(dv, ST, p, TABLE);
    // Eleven uneven pieces of one stream.
    const pieces: Array<[number, number]> = [];
    for (let at = 0, i = 0; at < data.length; i++) {
      const len = Math.min(data.length - at, 1 + ((i * 48271) % 190_000));
      pieces.push([DATA + at, len]);
      at += len;
    }
    pieces.forEach(([ptr, len], i) => {
      dv.setUint32(DESC + 8 * i, ptr, true);
      dv.setUint32(DESC + 8 * i + 4, len, true);
    });
    const got: number[] = [];
    let d = 0;
    let guard = 0;
    while (d < pieces.length && guard++ < 10_000) {
      const n = k.cdcChunkBatch(ST, DESC + 8 * d, pieces.length - d, OUT, 7); // tiny output: many resumes
      for (let i = 0; i < n; i++) got.push(dv.getUint32(OUT + 4 * i, true));
      const stop = k.cdcBatchStop();
      if (stop === pieces.length - d) break;
      d += stop;
      const used = dv.getUint32(ST + 12, true);
      pieces[d] = [pieces[d]![0] + used, pieces[d]![1] - used];
      dv.setUint32(DESC + 8 * d, pieces[d]![0], true);
      dv.setUint32(DESC + 8 * d + 4, pieces[d]![1], true);
    }
    const last = k.cdcFinish(ST);
    if (last) got.push(last);
    expect(got).toEqual(chunkLengths(data, o));
  });

  it('rejects bad options with ERR_INVALID_ARGUMENT', () => {
    for (const o of [{ avg: 1000 }, { avg: 128 }, { min: 32 }, { avg: 4096, min: 8192 }, { avg: 4096, max: 2048 }, { normalization: 4 }, { key: 'k' }]) {
      expect(() => createChunker(o as never)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidArgument }));
    }
    expect(() => createChunker().push('x' as never)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidArgument }));
  });
});
