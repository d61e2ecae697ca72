// XXH3-64 kernel against @node-rs/xxhash (Rust xxhash-rust, native): one-shot on many lengths
// and alignments (every short-input branch and the long path), seeded, the streaming digest
// over the shared record, and the gather-list hasher the UDP trailer uses.
import { xxh3 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import { createSharedMemory, instantiateKernels } from '../../src/dataplane/wasm.js';
import { Xxh3Parts, xxh3_64 } from '../../src/kernels/xxh3-64.js';

function bytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed | 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

const memory = createSharedMemory(64, 64);
const k = await instantiateKernels(memory);
const u8 = new Uint8Array(memory.buffer);
const view = new DataView(memory.buffer);
const base = Math.ceil(Number(k.heapBase()) / 64) * 64;
const OUT = base;
const STATE = base + 64;
const STAGE = base + 1024;
const DATA = base + 128 * 1024;

const LENGTHS = [
  ...Array.from({ length: 258 }, (_, i) => i), // 0..257: every short branch and both edges of 240
  300, 511, 512, 513, 1023, 1024, 1025, 4095, 4096, 8191, 9000, 16384, 65000, 65536, 200_001,
];

describe('XXH3-64 kernel', () => {
  it('one-shot equals @node-rs/xxhash xxh3.xxh64 at every length and alignment', () => {
    for (const len of LENGTHS) {
      const src = bytes(len, len + 7);
      for (const align of len < 1024 ? [0, 1, 3, 7, 13] : [0, 5]) {
        u8.set(src, DATA + align);
        k.xxh3_64(DATA + align, len, 0n, OUT);
        expect(view.getBigUint64(OUT, true), `len ${len} align ${align}`).toBe(xxh3.xxh64(Buffer.from(src)));
      }
    }
  });

  it('seeded one-shot equals the reference (short and long inputs)', () => {
    for (const seed of [1n, 0x9e3779b97f4a7c15n, (1n << 64n) - 1n]) {
      for (const len of [0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1000, 5000]) {
        const src = bytes(len, 99 + len);
        u8.set(src, DATA);
        k.xxh3_64(DATA, len, seed, OUT);
        expect(view.getBigUint64(OUT, true), `len ${len} seed ${seed}`).toBe(xxh3.xxh64(Buffer.from(src), seed));
      }
    }
  });

  it('the streaming digest over updates of any split equals the one-shot', () => {
    for (const len of [0, 5, 100, 240, 241, 256, 257, 1024, 1100, 4096, 65536 + 17]) {
      const src = bytes(len, 3 * len + 1);
      u8.set(src, DATA);
      for (const step of [1, 7, 64, 255, 256, 1460, 100_000]) {
        if (step === 1 && len > 4096) continue;
        k.xxh128Reset(STATE, 0n);
        for (let o = 0; o < len; o += step) k.xxh128Update(STATE, DATA + o, Math.min(step, len - o));
        k.xxh3_64Digest(STATE, OUT);
        expect(view.getBigUint64(OUT, true), `len ${len} step ${step}`).toBe(xxh3.xxh64(Buffer.from(src)));
      }
    }
  });

  it('Xxh3Parts hashes a gather list (in memory, outside it, mixed) as one buffer', () => {
    const mem = { u8: () => u8, kernels: k };
    const h = new Xxh3Parts(mem, STATE, OUT, STAGE, 4096);
    const out = new Uint8Array(8);
    for (const shape of [[40], [40, 65000], [40, 65000, 4], [36, 100, 200, 3000], [36, 9000], [10_000], [5, 0, 5]]) {
      const parts: Uint8Array[] = [];
      let at = DATA;
      shape.forEach((n, i) => {
        const b = bytes(n, n + i);
        if (i % 2 === 1) {
          u8.set(b, at); // odd parts in memory, even ones in ordinary arrays
          parts.push(u8.subarray(at, at + n));
          at += n + 3;
        } else parts.push(b);
      });
      const joined = Buffer.concat(parts);
      h.hash(parts, 0, parts.length, out, 0);
      expect(Buffer.from(out).readBigUInt64LE(0), shape.join(',')).toBe(xxh3.xxh64(joined));
      // check(): the datagram with its trailer appended verifies; any flipped bit does not.
      const dg = Buffer.concat([joined, out]);
      expect(h.check(dg)).toBe(true);
      dg[dg.length >> 1] ^= 0x10;
      expect(h.check(dg)).toBe(false);
    }
  });

  it('the user-facing xxh3_64 equals the reference, beyond the scratch window too', () => {
    for (const len of [0, 17, 300, 70_000, 600_000]) {
      const src = bytes(len, len);
      expect(xxh3_64(src)).toBe(xxh3.xxh64(Buffer.from(src)));
    }
  });
});
