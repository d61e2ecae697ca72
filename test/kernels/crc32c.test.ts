// The CRC32C kernel against two independent implementations (@node-rs/crc32, native; and
// hash-wasm's C-compiled CRC32 with the Castagnoli polynomial) and the RFC 3720 B.4 vectors.
import { crc32c as nativeCrc32c } from '@node-rs/crc32';
import { createCRC32 } from 'hash-wasm';
import { beforeAll, describe, expect, it } from 'vitest';
import { createSharedMemory, instantiateKernels, type Kernels, PAGE } from '../../src/dataplane/wasm.js';
import { ErrorCode, SabreError } from '../../src/core/errors.js';
import { crc32c } from '../../src/kernels/crc32c.js';

const MAX = 300 * 1024;
const PAGES = 16; // 1 MiB: module statics + an arena of 2 * MAX + slack

let k: Kernels;
let u8: Uint8Array;
let arena: number; // 64-byte aligned, above the module's static data
let hashWasm: Awaited<ReturnType<typeof createCRC32>>;

beforeAll(async () => {
  const memory = createSharedMemory(PAGES, PAGES);
  k = await instantiateKernels(memory);
  u8 = new Uint8Array(memory.buffer);
  arena = Math.ceil(Number(k.heapBase()) / 64) * 64;
  expect(arena + 2 * MAX + 4096).toBeLessThan(PAGES * PAGE);
  hashWasm = await createCRC32(0x82f63b78);
});

/** mulberry32: seeded, so a failure names a reproducible case. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

function randomBytes(n: number, seed: number): Uint8Array {
  const r = prng(seed);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = r() & 0xff;
  return out;
}

function viaHashWasm(data: Uint8Array): number {
  hashWasm.init();
  hashWasm.update(data);
  return parseInt(hashWasm.digest('hex'), 16) >>> 0;
}

/** The raw kernel on `data` copied to arena + offset. */
function kernelAt(data: Uint8Array, offset: number, previous = 0): number {
  u8.set(data, arena + offset);
  return k.crc32c(arena + offset, data.length, previous);
}

const hex = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s, 'hex'));
const ascending = Uint8Array.from({ length: 32 }, (_, i) => i);

// RFC 3720 appendix B.4. The read PDU is the 48-byte SCSI Read (10) command PDU listed there.
const VECTORS: [string, Uint8Array, number][] = [
  ['32 bytes of zeroes', new Uint8Array(32), 0x8a9136aa],
  ['32 bytes of 0xFF', new Uint8Array(32).fill(0xff), 0x62a8ab43],
  ['32 bytes ascending 0x00..0x1F', ascending, 0x46dd794e],
  ['32 bytes descending 0x1F..0x00', ascending.slice().reverse(), 0x113fdb5c],
  [
    'iSCSI SCSI Read (10) command PDU',
    hex('01c00000000000000000000000000000' + '14000000000004000000001400000018' + '28000000000000000200000000000000'),
    0xd9963a56,
  ],
  ['"123456789" (check value)', new TextEncoder().encode('123456789'), 0xe3069283],
  ['empty', new Uint8Array(0), 0],
];

describe('crc32c kernel', () => {
  it.each(VECTORS)('RFC vector: %s', (_name, data, expected) => {
    expect(kernelAt(data, 0)).toBe(expected);
    expect(kernelAt(data, 3)).toBe(expected);
    expect(crc32c(data)).toBe(expected);
    expect(nativeCrc32c(data)).toBe(expected); // the references agree with the RFC too
    expect(viaHashWasm(data)).toBe(expected);
  });

  it('every length 0..300 at every offset 0..7 matches @node-rs/crc32', () => {
    const data = randomBytes(300 + 8, 1);
    for (let off = 0; off < 8; off++) {
      u8.set(data, arena + off);
      for (let len = 0; len <= 300; len++) {
        const want = nativeCrc32c(data.subarray(0, len));
        const got = k.crc32c(arena + off, len, 0);
        if (got !== want) expect({ off, len, got }).toEqual({ off, len, got: want });
      }
    }
  });

  it('lengths around every path boundary (8-byte steps, 256, 1024 and 16384-byte blocks)', () => {
    const data = randomBytes(5 * 16384 + 64, 2);
    u8.set(data, arena + 1);
    const lens = new Set<number>();
    for (const b of [8, 256, 1024, 16384]) {
      for (let m = 1; m <= 5; m++) for (let d = -9; d <= 9; d++) lens.add(m * b + d);
    }
    for (const len of lens) {
      if (len < 0 || len > data.length) continue;
      const want = nativeCrc32c(data.subarray(0, len));
      expect(k.crc32c(arena + 1, len, 0), `len ${len}`).toBe(want);
    }
  });

  it('random sizes up to 300 KB at random offsets match @node-rs/crc32 and hash-wasm', () => {
    const r = prng(3);
    const data = randomBytes(MAX + 64, 4);
    u8.set(data, arena);
    for (let i = 0; i < 120; i++) {
      const off = r() % 64;
      const len = i < 60 ? r() % (MAX + 1) : r() % 20000;
      const slice = data.subarray(off, off + len);
      const got = k.crc32c(arena + off, len, 0);
      expect(got, `off ${off} len ${len}`).toBe(nativeCrc32c(slice));
      if (i % 4 === 0) expect(got, `off ${off} len ${len}`).toBe(viaHashWasm(slice));
    }
  });

  it('chains: crc(b, crc(a)) == crc(a ‖ b) at random split points', () => {
    const r = prng(5);
    const data = randomBytes(70000, 6);
    u8.set(data, arena + 5);
    for (let i = 0; i < 200; i++) {
      const len = i < 100 ? r() % 600 : r() % data.length;
      const cut = len === 0 ? 0 : r() % (len + 1);
      const whole = nativeCrc32c(data.subarray(0, len));
      const first = k.crc32c(arena + 5, cut, 0);
      expect(k.crc32c(arena + 5 + cut, len - cut, first), `len ${len} cut ${cut}`).toBe(whole);
    }
    // previous above 2^31 goes through the binding as a wrapped i32 and must come back intact.
    const p = 0xdeadbeef;
    expect(k.crc32c(arena + 5, 1000, p)).toBe(nativeCrc32c(data.subarray(0, 1000), p));
  });

  it('crc32cBatch writes the same results as single calls into each descriptor', () => {
    const r = prng(7);
    const data = randomBytes(200000, 8);
    const dataBase = arena + 4096;
    u8.set(data, dataBase);
    const dv = new DataView(u8.buffer);
    for (const count of [0, 1, 3, 64]) {
      const descs: [number, number, number][] = [];
      for (let i = 0; i < count; i++) {
        const ptr = dataBase + (r() % 100000);
        const len = i % 3 === 0 ? r() % 1500 : r() % 90000;
        descs.push([ptr, len, r()]);
        dv.setUint32(arena + 16 * i, ptr, true);
        dv.setUint32(arena + 16 * i + 4, len, true);
        dv.setUint32(arena + 16 * i + 8, descs[i]![2], true);
        dv.setUint32(arena + 16 * i + 12, 0x5a5a5a5a, true);
      }
      dv.setUint32(arena + 16 * count + 12, 0x12345678, true); // the descriptor past the end stays untouched
      k.crc32cBatch(arena, count);
      for (let i = 0; i < count; i++) {
        const [ptr, len, prev] = descs[i]!;
        const want = nativeCrc32c(data.subarray(ptr - dataBase, ptr - dataBase + len), prev);
        expect(dv.getUint32(arena + 16 * i + 12, true), `desc ${i}`).toBe(want);
        expect(k.crc32c(ptr, len, prev)).toBe(want);
        expect([dv.getUint32(arena + 16 * i, true), dv.getUint32(arena + 16 * i + 4, true)]).toEqual([ptr, len]);
      }
      expect(dv.getUint32(arena + 16 * count + 12, true)).toBe(0x12345678);
    }
  });
});

describe('crc32c user API (sabre/kernels)', () => {
  it('matches @node-rs/crc32 on inputs that cross the 256 KiB scratch window', () => {
    for (const [len, seed] of [
      [256 * 1024 - 1, 10],
      [256 * 1024, 11],
      [256 * 1024 + 1, 12],
      [3 * 256 * 1024 + 777, 13],
    ] as const) {
      const data = randomBytes(len, seed);
      expect(crc32c(data), `len ${len}`).toBe(nativeCrc32c(data));
      expect(crc32c(data.subarray(7)), `len ${len} at offset 7`).toBe(nativeCrc32c(data.subarray(7)));
    }
  });

  it('chains across calls and accepts any uint32 previous', () => {
    const data = randomBytes(600000, 14);
    const cut = 300001;
    expect(crc32c(data.subarray(cut), crc32c(data.subarray(0, cut)))).toBe(nativeCrc32c(data));
    for (const prev of [0, 1, 0x7fffffff, 0x80000000, 0xffffffff]) {
      expect(crc32c(data.subarray(0, 999), prev)).toBe(nativeCrc32c(data.subarray(0, 999), prev));
    }
    expect(crc32c(new Uint8Array(0), 0x12345678)).toBe(0x12345678);
  });

  it('accepts Buffers (a Uint8Array subclass)', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
  });

  it('rejects a non-Uint8Array and a previous that is not a uint32', () => {
    const bad = (f: () => unknown): void => {
      expect(f).toThrow(SabreError);
      try {
        f();
      } catch (e) {
        expect((e as SabreError).code).toBe(ErrorCode.InvalidArgument);
      }
    };
    bad(() => crc32c('123456789' as unknown as Uint8Array));
    bad(() => crc32c(new Uint16Array(4) as unknown as Uint8Array));
    bad(() => crc32c([1, 2, 3] as unknown as Uint8Array));
    bad(() => crc32c(null as unknown as Uint8Array));
    bad(() => crc32c(new Uint8Array(1), -1));
    bad(() => crc32c(new Uint8Array(1), 2 ** 32));
    bad(() => crc32c(new Uint8Array(1), 1.5));
    bad(() => crc32c(new Uint8Array(1), NaN));
    bad(() => crc32c(new Uint8Array(1), '1' as unknown as number));
  });
});
