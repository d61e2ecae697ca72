// XXH3-128 against two independent implementations: hash-wasm (C reference compiled to WASM,
// returns canonical hex) and @node-rs/xxhash (Rust xxhash-rust, native, returns a bigint).
// Every comparison checks both, so a wrong byte order in either the value or the hex fails.
import { xxh3 } from '@node-rs/xxhash';
import { createXXHash128, xxhash128, type IHasher } from 'hash-wasm';
import { Worker } from 'node:worker_threads';
import { beforeAll, describe, expect, it } from 'vitest';
import { compileKernels, createSharedMemory, instantiateKernels, type Kernels, PAGE } from '../../src/dataplane/wasm.js';
import { ErrorCode, SabreError } from '../../src/core/errors.js';
import { createXxh128, xxh128 } from '../../src/kernels/xxh128.js';

const U64 = (1n << 64n) - 1n;

/** xorshift128+ so failures reproduce; `next()` is a uint32. */
function rng(seed: number): { next(): number; below(n: number): number; u64(): bigint; bytes(n: number): Uint8Array } {
  let a = seed | 1;
  let b = (seed * 0x9e3779b1) | 3;
  const next = (): number => {
    let x = a;
    const y = b;
    a = y;
    x ^= x << 23;
    x ^= x >>> 17;
    x ^= y ^ (y >>> 26);
    b = x;
    return (x + y) >>> 0;
  };
  return {
    next,
    below: (n) => next() % n,
    u64: () => (BigInt(next()) << 32n) | BigInt(next()),
    bytes: (n) => {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = next() & 0xff;
      return out;
    },
  };
}

// hash-wasm hashers are created asynchronously, one per seed; cache them.
const hashers = new Map<bigint, IHasher>();
async function hwHasher(seed: bigint): Promise<IHasher> {
  let h = hashers.get(seed);
  if (!h) {
    h = await createXXHash128(Number(seed & 0xffffffffn), Number(seed >> 32n));
    hashers.set(seed, h);
  }
  return h;
}

/** The expected value from both references; throws if they disagree with each other. */
async function expected(data: Uint8Array, seed: bigint): Promise<bigint> {
  const h = await hwHasher(seed);
  h.init();
  h.update(data);
  const fromHashWasm = BigInt('0x' + h.digest('hex'));
  const fromNodeRs = xxh3.xxh128(data, seed);
  expect(fromNodeRs).toBe(fromHashWasm);
  return fromNodeRs;
}

const SEEDS = [0n, 1n, 0x9e3779b97f4a7c15n, U64, 0x8000000000000000n, 0x00000000ffffffffn, 0x123456789n];

describe('xxh128 (sabre/kernels API)', () => {
  it('matches hash-wasm and @node-rs/xxhash for every length 0..1100, unseeded and seeded', async () => {
    const r = rng(1);
    const buf = r.bytes(1100);
    for (const seed of [0n, 0x9e3779b97f4a7c15n, 42n]) {
      for (let len = 0; len <= 1100; len++) {
        const data = buf.subarray(0, len);
        const want = await expected(data, seed);
        const got = seed === 0n ? xxh128(data) : xxh128(data, seed);
        if (got !== want) expect({ len, seed, got: got.toString(16) }).toEqual({ len, seed, got: want.toString(16) });
      }
    }
  });

  it('agrees with the one-call hash-wasm xxhash128(data, seedLow, seedHigh)', async () => {
    const r = rng(2);
    for (const seed of SEEDS) {
      for (const len of [0, 3, 8, 16, 17, 128, 129, 240, 241, 1024, 1025, 5000]) {
        const data = r.bytes(len);
        const hex = await xxhash128(data, Number(seed & 0xffffffffn), Number(seed >> 32n));
        expect(xxh128(data, seed)).toBe(BigInt('0x' + hex));
        expect(xxh128(data, seed).toString(16).padStart(32, '0')).toBe(hex);
      }
    }
  });

  it('matches for random sizes up to 300 KB (several scratch chunks) and random 64-bit seeds', async () => {
    const r = rng(3);
    const big = r.bytes(300_000);
    const sizes = [262_144, 262_145, 262_143, 300_000, 524_288 - 1];
    for (let i = 0; i < 25; i++) sizes.push(r.below(300_001));
    for (const size of sizes) {
      const data = size <= big.length ? big.subarray(big.length - size) : r.bytes(size); // odd offsets too
      const seed = r.next() & 1 ? r.u64() | 0x8000000000000000n : r.u64();
      expect(xxh128(data, seed)).toBe(await expected(data, seed));
    }
  });

  it('accepts number seeds as the same uint64', async () => {
    const data = rng(4).bytes(777);
    expect(xxh128(data, 12345)).toBe(xxh128(data, 12345n));
    expect(xxh128(data, Number.MAX_SAFE_INTEGER)).toBe(await expected(data, BigInt(Number.MAX_SAFE_INTEGER)));
    expect(xxh128(data, 0)).toBe(xxh128(data));
  });

  it('streams with random split points to the same value as one-shot', async () => {
    const r = rng(5);
    for (let round = 0; round < 60; round++) {
      const len = round < 20 ? r.below(2000) : r.below(70_000);
      const data = r.bytes(len);
      const seed = SEEDS[round % SEEDS.length]!;
      const h = createXxh128(seed);
      let off = 0;
      while (off < len) {
        const n = Math.min(len - off, r.below(4) === 0 ? r.below(5) : r.below(3000));
        h.update(data.subarray(off, off + n));
        off += n;
      }
      expect(h.digest()).toBe(await expected(data, seed));
    }
  });

  it('streams 1-byte updates and splits around stripe (64), buffer (256) and block (1024) boundaries', async () => {
    const r = rng(6);
    const data = r.bytes(5000);
    for (const seed of [0n, U64]) {
      const ones = createXxh128(seed);
      for (let i = 0; i < 2100; i++) ones.update(data.subarray(i, i + 1));
      expect(ones.digest()).toBe(await expected(data.subarray(0, 2100), seed));
    }
    const cuts = [1, 63, 64, 65, 127, 128, 129, 239, 240, 241, 255, 256, 257, 320, 511, 512, 513, 1023, 1024, 1025, 1088, 2047, 2048, 2049];
    for (const total of [240, 241, 256, 257, 300, 1024, 1025, 1088, 2048, 2049, 3000]) {
      for (const a of cuts) {
        for (const b of [0, 1, 64, 192, 256, 1024]) {
          if (a + b > total) continue;
          for (const seed of [0n, 0xfedcba9876543210n]) {
            const h = createXxh128(seed);
            h.update(data.subarray(0, a)).update(data.subarray(a, a + b)).update(data.subarray(a + b, total));
            expect(h.digest()).toBe(await expected(data.subarray(0, total), seed));
          }
        }
      }
    }
  });

  it('digest leaves the stream usable (digest-then-continue)', async () => {
    const r = rng(7);
    const data = r.bytes(10_000);
    for (const seed of [0n, 0x8000000000000001n]) {
      const h = createXxh128(seed);
      let off = 0;
      for (const step of [0, 5, 100, 135, 1, 300, 700, 64, 1024, 3000, 4571]) {
        h.update(data.subarray(off, off + step));
        off += step;
        expect(h.digest()).toBe(await expected(data.subarray(0, off), seed));
        expect(h.digest()).toBe(await expected(data.subarray(0, off), seed));
      }
    }
  });

  it('keeps interleaved streams apart (the working slot is written back and reloaded)', async () => {
    const r = rng(8);
    const streams = SEEDS.map((seed) => ({ seed, h: createXxh128(seed), data: r.bytes(20_000), off: 0 }));
    for (let i = 0; i < 300; i++) {
      const s = streams[r.below(streams.length)]!;
      const n = Math.min(r.below(400), s.data.length - s.off);
      s.h.update(s.data.subarray(s.off, s.off + n));
      s.off += n;
      if (r.below(10) === 0) expect(s.h.digest()).toBe(await expected(s.data.subarray(0, s.off), s.seed));
      // A one-shot in between must not disturb the resident stream.
      if (r.below(20) === 0) expect(xxh128(s.data.subarray(0, s.off))).toBe(await expected(s.data.subarray(0, s.off), 0n));
    }
    for (const s of streams) expect(s.h.digest()).toBe(await expected(s.data.subarray(0, s.off), s.seed));
  });

  it('rejects bad arguments with SabreError(InvalidArgument)', () => {
    const bad = (fn: () => unknown): void => {
      let err: unknown;
      try {
        fn();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SabreError);
      expect((err as SabreError).code).toBe(ErrorCode.InvalidArgument);
    };
    const d = new Uint8Array(4);
    for (const seed of [-1, -1n, 1.5, NaN, 2 ** 64, 2 ** 53, 1n << 64n, '1', null, {}] as unknown[]) {
      bad(() => xxh128(d, seed as bigint));
      bad(() => createXxh128(seed as bigint));
    }
    bad(() => xxh128([1, 2, 3] as unknown as Uint8Array));
    bad(() => xxh128('abc' as unknown as Uint8Array));
    bad(() => createXxh128().update(new ArrayBuffer(4) as unknown as Uint8Array));
  });
});

describe('xxh128 kernel on shared memory', () => {
  let memory: WebAssembly.Memory;
  let k: Kernels;
  let u8: Uint8Array;
  let view: DataView;
  let base: number;
  const DATA_MAX = 300_000;

  beforeAll(async () => {
    memory = createSharedMemory(64, 64);
    k = await instantiateKernels(memory);
    base = Math.ceil(Number(k.heapBase()) / 64) * 64;
    expect(base + 8 * 1024 + 2 * DATA_MAX).toBeLessThan(64 * PAGE);
    u8 = new Uint8Array(memory.buffer);
    view = new DataView(memory.buffer);
  });

  // [base, +4 KiB): state records; +4 KiB: output; +8 KiB: data.
  const st = (i: number): number => base + i * 640;
  const out = (): number => base + 4096;
  const dataAt = (): number => base + 8192;
  const result = (): bigint => (view.getBigUint64(out() + 8, true) << 64n) | view.getBigUint64(out(), true);

  it('has a 640-byte, 64-aligned-stride state record', () => {
    expect(k.xxh128StateSize()).toBe(640);
  });

  it('one-shot matches the references at unaligned data pointers', async () => {
    const r = rng(9);
    const buf = r.bytes(DATA_MAX);
    for (let i = 0; i < 400; i++) {
      const len = i < 300 ? r.below(1500) : r.below(DATA_MAX - 64);
      const mis = r.below(64);
      const seed = i % 3 === 0 ? 0n : r.u64();
      const data = buf.subarray(0, len);
      u8.set(data, dataAt() + mis);
      k.xxh128(dataAt() + mis, len, seed, out());
      expect(result()).toBe(await expected(data, seed));
    }
  });

  it('streams from unaligned pointers with random splits, record at several addresses', async () => {
    const r = rng(10);
    const buf = r.bytes(100_000);
    for (let round = 0; round < 40; round++) {
      const len = r.below(round < 10 ? 1200 : 100_000);
      const mis = r.below(64);
      const seed = r.below(2) ? 0n : r.u64();
      const rec = st(round % 6);
      u8.set(buf.subarray(0, len), dataAt() + mis);
      k.xxh128Reset(rec, seed);
      let off = 0;
      while (off < len) {
        const n = Math.min(len - off, r.below(3) === 0 ? r.below(70) : r.below(5000));
        k.xxh128Update(rec, dataAt() + mis + off, n);
        off += n;
      }
      k.xxh128Digest(rec, out());
      expect(result()).toBe(await expected(buf.subarray(0, len), seed));
    }
  });

  it('resumes a record moved to another address mid-stream', async () => {
    const r = rng(11);
    const data = r.bytes(50_000);
    u8.set(data, dataAt());
    for (const [cut1, cut2] of [[100, 300], [1000, 1030], [4096, 4097], [63, 64], [250, 20_000], [40_000, 49_999]] as const) {
      for (const seed of [0n, r.u64()]) {
        k.xxh128Reset(st(0), seed);
        k.xxh128Update(st(0), dataAt(), cut1);
        u8.copyWithin(st(3), st(0), st(0) + 640);
        u8.fill(0xa5, st(0), st(0) + 640); // the old copy must not be needed any more
        k.xxh128Update(st(3), dataAt() + cut1, cut2 - cut1);
        k.xxh128Digest(st(3), out());
        expect(result()).toBe(await expected(data.subarray(0, cut2), seed));
        // Move it again, to an address that is 64- but not 640-aligned, and finish there.
        u8.copyWithin(st(1) + 64, st(3), st(3) + 640);
        k.xxh128Update(st(1) + 64, dataAt() + cut2, data.length - cut2);
        k.xxh128Digest(st(1) + 64, out());
        expect(result()).toBe(await expected(data, seed));
      }
    }
  });

  it('is resumed by a second instance over the same memory, alternating per update', async () => {
    const other = await instantiateKernels(memory);
    const r = rng(12);
    const data = r.bytes(80_000);
    u8.set(data, dataAt());
    for (const seed of [0n, 0xdeadbeefcafef00dn]) {
      const insts = [k, other];
      k.xxh128Reset(st(2), seed);
      let off = 0;
      let turn = 0;
      while (off < data.length) {
        const n = Math.min(data.length - off, r.below(2500));
        insts[turn++ & 1]!.xxh128Update(st(2), dataAt() + off, n);
        off += n;
        if (r.below(8) === 0) {
          insts[turn & 1]!.xxh128Digest(st(2), out());
          expect(result()).toBe(await expected(data.subarray(0, off), seed));
        }
      }
      other.xxh128Digest(st(2), out());
      expect(result()).toBe(await expected(data, seed));
    }
  });

  it('is resumed on another thread: a worker continues the record and digests it', async () => {
    const r = rng(13);
    const data = r.bytes(90_000);
    u8.set(data, dataAt());
    const seed = 0x8badf00d12345678n;
    k.xxh128Reset(st(5), seed);
    k.xxh128Update(st(5), dataAt(), 33_333); // mid-stripe, mid-block
    // The worker gets the compiled module and the shared memory, nothing else: all stream state
    // is in the record. It runs the raw bindings the device workers use (build/sabre.js).
    const bindings = new URL('../../build/sabre.js', import.meta.url).href;
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      import(workerData.bindings).then(async ({ instantiate }) => {
        const { module, memory, rec, ptr, len, out } = workerData;
        const kw = await instantiate(module, { env: { memory, abort() { throw new Error('abort'); } } });
        kw.xxh128Update(rec, ptr, len);
        kw.xxh128Digest(rec, out);
        parentPort.postMessage('done');
      });`;
    const worker = new Worker(code, {
      eval: true,
      workerData: { bindings, module: compileKernels(), memory, rec: st(5), ptr: dataAt() + 33_333, len: data.length - 33_333, out: out() },
    });
    const msg = await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(msg).toBe('done');
    expect(result()).toBe(await expected(data, seed));
    // And back on this thread, the record carries on from where the worker left it.
    k.xxh128Update(st(5), dataAt(), 100);
    k.xxh128Digest(st(5), out());
    const more = new Uint8Array(data.length + 100);
    more.set(data);
    more.set(data.subarray(0, 100), data.length);
    expect(result()).toBe(await expected(more, seed));
  });

  it('zero-length updates change nothing, and an empty stream hashes like empty input', async () => {
    for (const seed of SEEDS) {
      k.xxh128Reset(st(4), seed);
      k.xxh128Update(st(4), dataAt(), 0);
      k.xxh128Digest(st(4), out());
      expect(result()).toBe(await expected(new Uint8Array(0), seed));
      k.xxh128(dataAt(), 0, seed, out());
      expect(result()).toBe(await expected(new Uint8Array(0), seed));
    }
  });
});
