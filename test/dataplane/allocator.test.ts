import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Allocator } from '../../src/dataplane/allocator.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { ErrorCode, SabreError } from '../../src/core/errors.js';

const BASE = 64 * 1024;

/** Every invariant the policy promises, checked from the outside. */
function checkInvariants(a: Allocator, live: Map<number, number>): void {
  const blocks = a.freeBlocks();
  const st = a.stats();
  // Free blocks: sorted, 64-aligned, inside the arena, never adjacent (coalesced).
  for (let i = 0; i < blocks.length; i++) {
    const [s, n] = blocks[i]!;
    expect(s % 64).toBe(0);
    expect(n % 64).toBe(0);
    expect(n).toBeGreaterThan(0);
    expect(s).toBeGreaterThanOrEqual(a.base);
    expect(s + n).toBeLessThanOrEqual(a.end);
    if (i > 0) expect(blocks[i - 1]![0] + blocks[i - 1]![1]).toBeLessThan(s);
  }
  // Live allocations vs the model: disjoint from each other and from free blocks; accounting adds up.
  const spans = [...live].map(([addr]) => [addr, a.sizeOf(addr)!] as [number, number]);
  const all = [...spans, ...blocks].sort((x, y) => x[0] - y[0]);
  for (let i = 1; i < all.length; i++) expect(all[i - 1]![0] + all[i - 1]![1]).toBeLessThanOrEqual(all[i]![0]);
  let used = 0;
  for (const [addr, len] of live) {
    const size = a.sizeOf(addr)!;
    expect(size).toBeGreaterThanOrEqual(len);
    expect(size - Math.max(len, 1)).toBeLessThan(64);
    used += size;
  }
  expect(st.used).toBe(used);
  // Alignment padding returns to the free list, so used + free is the whole arena.
  expect(st.used + st.free).toBe(st.capacity);
  expect(st.largestFree).toBe(Math.max(0, ...blocks.map((b) => b[1])));
}

describe('Allocator', () => {
  it('aligns to 64 by default and to any power of two on request', () => {
    const a = new Allocator(BASE, BASE + 1 << 20);
    for (const align of [1, 8, 64, 128, 4096, 65536]) {
      a.alloc(3); // disturb the next address
      const p = a.alloc(100, align);
      expect(p % Math.max(align, 64)).toBe(0);
    }
    expect(() => a.alloc(10, 3)).toThrow(SabreError);
    expect(() => a.alloc(-1)).toThrow(SabreError);
  });

  it('reuses freed space and coalesces neighbours both ways', () => {
    const a = new Allocator(BASE, BASE + 64 * 1024);
    const x = a.alloc(1000);
    const y = a.alloc(1000);
    const z = a.alloc(1000);
    a.free(y);
    expect(a.alloc(1000)).toBe(y); // exact-fit hole reused
    a.free(x);
    a.free(z);
    a.free(y); // y merges with x (left) and z (right) and the tail
    expect(a.freeBlocks()).toEqual([[BASE, 64 * 1024]]);
    expect(a.stats().used).toBe(0);
  });

  it('best fit picks the smallest hole that fits', () => {
    const a = new Allocator(BASE, BASE + 64 * 1024);
    const big = a.alloc(4096);
    a.alloc(64);
    const small = a.alloc(256);
    a.alloc(64);
    a.free(big);
    a.free(small);
    expect(a.alloc(200)).toBe(small);
  });

  it('rejects a double free and a foreign address', () => {
    const a = new Allocator(BASE, BASE + 4096);
    const p = a.alloc(64);
    a.free(p);
    const err = (() => { try { a.free(p); } catch (e) { return e; } })();
    expect(err).toBeInstanceOf(SabreError);
    expect((err as SabreError).code).toBe(ErrorCode.InvalidArgument);
    expect(() => a.free(p + 64)).toThrow(SabreError);
  });

  it('NoMemory when full and no growth', () => {
    const a = new Allocator(BASE, BASE + 4096);
    a.alloc(4096);
    try {
      a.alloc(1);
      expect.unreachable();
    } catch (e) {
      expect((e as SabreError).code).toBe(ErrorCode.NoMemory);
    }
  });

  it('random alloc/free workload keeps the invariants, bounded fragmentation, and never grows while a hole fits', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ op: fc.nat(99), len: fc.integer({ min: 0, max: 20000 }), alignLog: fc.integer({ min: 0, max: 12 }), pick: fc.nat() }), { minLength: 50, maxLength: 400 }),
        (ops) => {
          let grows = 0;
          let end = BASE + 32 * 1024;
          const a = new Allocator(BASE, end, (minEnd) => {
            grows++;
            end = Math.max(minEnd, end + 16 * 1024);
            return end;
          });
          const live = new Map<number, number>();
          let peakLive = 0;
          for (const o of ops) {
            if (o.op < 60 || live.size === 0) {
              const before = a.freeBlocks();
              const align = 2 ** o.alignLog;
              const g0 = grows;
              const p = a.alloc(o.len, align);
              // Growth only when no free block could hold the request, alignment padding included.
              if (grows > g0) {
                const size = Math.ceil(Math.max(o.len, 1) / 64) * 64;
                const a2 = Math.max(align, 64);
                for (const [s, n] of before) expect(Math.ceil(s / a2) * a2 + size).toBeGreaterThan(s + n);
              }
              expect(p % Math.max(align, 64)).toBe(0);
              expect(live.has(p)).toBe(false);
              live.set(p, o.len);
            } else {
              const keys = [...live.keys()];
              const p = keys[o.pick % keys.length]!;
              a.free(p);
              live.delete(p);
            }
            let liveBytes = 0;
            for (const addr of live.keys()) liveBytes += a.sizeOf(addr)!;
            peakLive = Math.max(peakLive, liveBytes);
            checkInvariants(a, live);
          }
          // Fragmentation bound: the arena never exceeds twice the peak live bytes plus the
          // largest request and the growth step (alignment padding up to 4 KiB included).
          expect(a.stats().capacity).toBeLessThanOrEqual(2 * peakLive + 32 * 1024 + 20032 + 4096 + 16 * 1024);
          for (const p of [...live.keys()]) a.free(p);
          expect(a.freeBlocks()).toEqual([[BASE, a.end - BASE]]);
        },
      ),
      { numRuns: 25 },
    );
  });
});

describe('DeviceMemory growth', () => {
  it('grows the shared memory, rebuilds views, and throws NoMemory past the maximum', async () => {
    const dm = await DeviceMemory.create({ initialBytes: 1 << 20, maximumBytes: 4 << 20, regionEntries: 16, workerSlots: 1 });
    const u0 = dm.u8();
    const cap0 = dm.stats().capacity;
    const a = dm.alloc(cap0 - 4096); // nearly all the arena
    const b = dm.alloc(1 << 20); // must grow
    expect(dm.stats().grows).toBeGreaterThan(0);
    expect(dm.memory.buffer.byteLength).toBeGreaterThan(u0.length);
    const u1 = dm.u8();
    expect(u1).not.toBe(u0);
    expect(u1.length).toBe(dm.memory.buffer.byteLength);
    expect(dm.dataView().byteLength).toBe(dm.memory.buffer.byteLength);
    // The new view reaches the grown bytes, and the kernels see the same bytes.
    u1.fill(0xab, b, b + (1 << 20));
    const dst = dm.alloc(64);
    const t = dm.regions;
    const si = t.allocIndex();
    t.write(si, { base: b, length: 1 << 20, stag: t.nextStag(si), pd: 1, access: 0 });
    const di = t.allocIndex();
    t.write(di, { base: dst, length: 64, stag: t.nextStag(di), pd: 1, access: 0 });
    const desc = dm.alloc(64);
    const dv = dm.dataView();
    for (const [o, v] of [[0, b + 100], [4, dst], [8, 64], [12, si], [16, di]] as const) dv.setUint32(desc + o, v, true);
    expect(dm.kernels.sgCopy(desc, 1, t.base, t.capacity, desc + 32)).toBe(1);
    expect(dm.u8().subarray(dst, dst + 64).every((x) => x === 0xab)).toBe(true);
    // Past the maximum: NoMemory, and nothing was lost.
    try {
      dm.alloc(8 << 20);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(SabreError);
      expect((e as SabreError).code).toBe(ErrorCode.NoMemory);
    }
    expect(dm.memory.buffer.byteLength).toBeLessThanOrEqual(4 << 20);
    dm.free(a);
    dm.free(b);
    expect(dm.sizeOf(dst)).toBe(64);
  });

  it('rejects a maximum below the map or above 4 GiB', async () => {
    await expect(DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 1 << 20 })).rejects.toThrow(SabreError);
    await expect(DeviceMemory.create({ maximumBytes: 2 ** 33 })).rejects.toThrow(SabreError);
  });
});
