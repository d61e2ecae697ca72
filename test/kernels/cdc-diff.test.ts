// The FastCDC kernel (assembly/cdc.ts) against the byte-at-a-time reference, aimed at what its
// multi-byte loop could get wrong: a cut at every offset inside a turn of the loop and in the
// byte-at-a-time tail, restarts (fp = 0 at `min`), the normalization point and `max` falling
// anywhere relative to a buffer's end, chunks cut at max, empty and tiny buffers, parameter sets
// that are not powers of two, many keys, and the kernel called directly with room for one to
// three lengths (so it stops and resumes mid-buffer).
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { createSharedMemory, instantiateKernels, type Kernels } from '../../src/dataplane/wasm.js';
import { type CdcOptions, cdcParams, createChunker, gearTable, writeCdcState } from '../../src/kernels/cdc.js';
import { mixed, reference } from './cdc-reference.js';

type Kind = 'random' | 'mixed' | 'zeros' | 'constant' | 'periodic' | 'sparse';
const KINDS: Kind[] = ['random', 'mixed', 'zeros', 'constant', 'periodic', 'sparse'];

/** Seeded bytes of a kind: no-cut data (zeros, a constant, short periods) gives chunks at max. */
function bytes(kind: Kind, n: number, seed: number): Uint8Array {
  if (kind === 'mixed') return mixed(n, seed);
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  const next = (): number => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return x;
  };
  if (kind === 'constant') out.fill(seed & 0xff);
  if (kind === 'periodic') {
    const period = 1 + (seed % 70);
    for (let i = 0; i < n; i++) out[i] = i < period ? next() & 0xff : out[i - period]!;
  }
  if (kind === 'random') for (let i = 0; i < n; i++) out[i] = next() & 0xff;
  if (kind === 'sparse') for (let i = 0; i < n; i++) out[i] = next() % 8 === 0 ? 0 : next() & 0xff;
  return out;
}

/**
 * Split points for a stream whose whole-stream chunks are `lens`: random ones, a run of tiny
 * buffers, and points a few bytes either side of each chunk's restart (`min`), normalization
 * point and end, so restarts and range ends fall near buffer ends.
 */
function splits(n: number, lens: number[], o: CdcOptions, seed: number, mode: number): number[] {
  const p = cdcParams(o);
  let x = seed >>> 0 || 7;
  const rnd = (k: number): number => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return x % k;
  };
  const pts: number[] = [];
  if (mode === 0) for (let i = rnd(20); i > 0; i--) pts.push(rnd(n + 1));
  if (mode === 1) for (let at = 0; at < Math.min(n, 3000); at += rnd(18)) pts.push(at); // tiny, and empty, buffers
  if (mode === 2) {
    let start = 0;
    for (const len of lens) {
      for (const k of [p.min, p.avg, len]) pts.push(start + k + rnd(37) - 18);
      start += len;
    }
  }
  return [...pts.filter((q) => q >= 0 && q <= n), n].sort((a, b) => a - b);
}

function viaChunker(data: Uint8Array, o: CdcOptions, points: number[]): number[] {
  const c = createChunker(o);
  const got: number[] = [];
  let at = 0;
  for (const q of points) {
    got.push(...c.push(data.subarray(at, q)));
    at = q;
  }
  return [...got, ...c.finish()];
}

const params = fc.record({
  avg: fc.constantFrom(256, 512, 1024, 2048, 4096, 8192),
  minPart: fc.double({ min: 0, max: 1, noNaN: true }),
  maxPart: fc.double({ min: 0, max: 1, noNaN: true }),
  normalization: fc.integer({ min: 0, max: 3 }),
  key: fc.uint8Array({ minLength: 0, maxLength: 32 }),
});
type P = { avg: number; minPart: number; maxPart: number; normalization: number; key: Uint8Array };
/** min anywhere in 64..avg, max anywhere in avg..8 avg (not only the defaults' powers of two). */
const options = (q: P): CdcOptions => ({
  avg: q.avg,
  min: Math.round(64 + q.minPart * (q.avg - 64)),
  max: Math.round(q.avg + q.maxPart * 7 * q.avg),
  normalization: q.normalization,
  key: q.key,
});

describe('cdc kernel against the reference', () => {
  let k: Kernels;
  let u8: Uint8Array;
  let dv: DataView;
  let base: number;
  const DATA_BYTES = 1 << 20;

  beforeAll(async () => {
    const memory = createSharedMemory(24, 24);
    k = await instantiateKernels(memory);
    u8 = new Uint8Array(memory.buffer);
    dv = new DataView(memory.buffer);
    base = Math.ceil(Number(k.heapBase()) / 64) * 64;
  });

  /** The kernel called directly with room for only `cap` lengths a call, over the pieces. */
  function viaKernel(data: Uint8Array, o: CdcOptions, points: number[], cap: number): number[] {
    const TABLE = base, ST = base + 4096, OUT = base + 4160, DATA = base + 8192;
    u8.set(data, DATA);
    u8.set(gearTable(o.key), TABLE);
    k.cdcPrepareTable(TABLE);
    writeCdcState(dv, ST, cdcParams(o), TABLE);
    const got: number[] = [];
    let at = 0;
    for (const q of points) {
      while (at < q) {
        const n = k.cdcChunk(ST, DATA + at, q - at, OUT, cap);
        for (let i = 0; i < n; i++) got.push(dv.getUint32(OUT + 4 * i, true));
        at += dv.getUint32(ST + 12, true);
      }
    }
    const last = k.cdcFinish(ST);
    return last > 0 ? [...got, last] : got;
  }

  it('cuts where the reference does, for any data, parameters, key and buffer split', () => {
    fc.assert(
      fc.property(
        params,
        fc.constantFrom(...KINDS),
        fc.integer({ min: 0, max: 120_000 }),
        fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        fc.integer({ min: 0, max: 2 }),
        fc.integer({ min: 1, max: 3 }),
        (q, kind, size, seed, mode, cap) => {
          const o = options(q);
          const n = Math.min(size, 40 * o.max!);
          const data = bytes(kind, n, seed);
          const want = reference(data, o);
          const points = splits(n, want, o, seed, mode);
          expect(viaChunker(data, o, points)).toEqual(want);
          expect(viaKernel(data, o, points, cap)).toEqual(want);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('covers a cut at every offset of the loop, in the tail before `normal`, and at max', () => {
    // Small chunks, so thousands of cuts: record where each fell relative to the scan that found
    // it, and check every case was met (the random test above relies on the same spread).
    const offsets = new Set<number>();
    let tailCuts = 0;
    let maxCuts = 0;
    for (let seed = 1; seed <= 24; seed++) {
      const o: CdcOptions = { avg: 256 << (seed % 3), min: 64 + seed, max: (256 << (seed % 3)) * 2 + seed, normalization: seed % 4, key: new Uint8Array([seed]) };
      const p = cdcParams(o);
      const data = bytes(seed % 4 === 0 ? 'sparse' : seed % 4 === 1 ? 'mixed' : 'random', 60_000, seed);
      const want = reference(data, o);
      for (const len of want.slice(0, -1)) {
        if (len === p.max) maxCuts++;
        else if (len <= p.avg) {
          offsets.add((len - p.min) % 16);
          if (p.avg - len < 16) tailCuts++;
        } else offsets.add((len - p.avg) % 16);
      }
      for (let mode = 0; mode < 3; mode++) {
        const points = splits(data.length, want, o, seed * 31 + mode, mode);
        expect(viaChunker(data, o, points)).toEqual(want);
        expect(viaKernel(data, o, points, 1 + (mode % 3))).toEqual(want);
      }
    }
    expect(offsets.size).toBe(16);
    expect(tailCuts).toBeGreaterThan(10);
    expect(maxCuts).toBeGreaterThan(10);
  });

  it('meets a buffer end at every step of the loop and of its tail (inputs of 0..80 bytes)', () => {
    // Each length alternates with one-byte inputs, so every input starts from a carried state.
    const o: CdcOptions = { avg: 256, min: 64, max: 300, normalization: 3, key: new Uint8Array([9]) };
    const data = bytes('random', DATA_BYTES >> 6, 5);
    const want = reference(data, o);
    for (let len = 0; len <= 80; len++) {
      const points: number[] = [];
      for (let at = 0; at + len < data.length; at += len + 1) points.push(at, at + len);
      points.push(data.length);
      expect(viaChunker(data, o, points)).toEqual(want);
    }
  });
});
