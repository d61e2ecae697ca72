// The protection matrix of the placement kernel (M3) and the sgCopy bounds property, checked
// against an independent JS model, with every byte of the device memory outside the granted
// range compared before and after.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { PLACE_DESC_BYTES, PLACE_OUT_BYTES, PlaceStatus, readPlaceOut, SG_DESC_BYTES, SgStatus, writePlaceDesc, writeSgDesc, type PlaceDesc, type SgDesc } from '../../src/dataplane/descriptors.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { PLACE_SRC_CALLER } from '../../src/wire/spec.js';

const LocalWrite = 1;
const RemoteWrite = 2;
const RemoteRead = 4;
const PD = 7;

let dm: DeviceMemory;
let region: number; // registered target, 4096 bytes
let stag: number;
let idx: number;
let ext: number; // EXTERNAL entry
let extStag: number;
let payload: number;
let descs: number;
let outs: number;

beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 2 << 20, maximumBytes: 2 << 20, regionEntries: 64, workerSlots: 0 });
  region = dm.alloc(4096);
  idx = dm.regions.allocIndex();
  stag = dm.regions.nextStag(idx);
  dm.regions.write(idx, { base: region, length: 4096, stag, pd: PD, access: LocalWrite | RemoteWrite });
  ext = dm.regions.allocIndex();
  extStag = dm.regions.nextStag(ext);
  dm.regions.write(ext, { base: 0x1000_0000, length: 4096, stag: extStag, pd: PD, access: RemoteWrite, external: true });
  payload = dm.alloc(8192);
  const u8 = dm.u8();
  for (let i = 0; i < 8192; i++) u8[payload + i] = (i * 31 + 7) & 0xff;
  descs = dm.alloc(64 * PLACE_DESC_BYTES);
  outs = dm.alloc(64 * PLACE_OUT_BYTES);
});

/** Run one batch; return results and verify that only granted bytes changed, exactly as the model says. */
function runPlace(batch: PlaceDesc[], expected: number[]): void {
  const dv = dm.dataView();
  batch.forEach((d, i) => writePlaceDesc(dv, descs + i * PLACE_DESC_BYTES, d));
  const before = dm.u8().slice();
  const model = before.slice();
  batch.forEach((d, i) => {
    if (expected[i] === PlaceStatus.Placed) model.copyWithin(Number(d.to), d.src, d.src + d.len);
  });
  const placed = dm.kernels.place(descs, batch.length, dm.regions.base, dm.regions.capacity, outs);
  const after = dm.u8();
  const results = batch.map((_, i) => readPlaceOut(dm.dataView(), outs + i * PLACE_OUT_BYTES));
  expect(results.map((r) => r.status)).toEqual(expected);
  expect(placed).toBe(expected.filter((s) => s === PlaceStatus.Placed).length);
  batch.forEach((d, i) => {
    expect(results[i]).toEqual({ tag: d.tag, status: expected[i], len: d.len, stag: d.stag });
  });
  // Every byte except the out records must equal the model.
  for (const r of [[outs, outs + batch.length * PLACE_OUT_BYTES]] as const) model.set(after.subarray(r[0], r[1]), r[0]);
  expect(Buffer.compare(Buffer.from(after.buffer, 0, after.length), Buffer.from(model.buffer, 0, model.length))).toBe(0);
}

const base = (o: Partial<PlaceDesc> = {}): PlaceDesc => ({ src: payload, len: 256, stag, pd: PD, to: region, access: RemoteWrite, tag: 0xabc, ...o });

/** Reference checks written independently of the kernel (bigint math, no overflow tricks). */
function modelStatus(d: PlaceDesc): number {
  const index = d.stag >>> 8;
  if (index >= dm.regions.capacity || d.stag === 0) return PlaceStatus.InvalidStag;
  const e = dm.regions.read(index);
  if (e.stag !== d.stag) return PlaceStatus.InvalidStag;
  if (e.pd !== d.pd) return PlaceStatus.PdMismatch;
  if ((e.access & d.access) !== d.access) return PlaceStatus.Access;
  const to = BigInt(d.to);
  if (to < BigInt(e.base) || to + BigInt(d.len) > BigInt(e.base) + BigInt(e.length)) return PlaceStatus.Bounds;
  if (e.external) return PlaceStatus.Indirect;
  if (d.src === PLACE_SRC_CALLER) return dm.regions.hashDir(index) !== 0 ? PlaceStatus.CallerCopiesHashed : PlaceStatus.CallerCopies;
  if (d.src + d.len > dm.memory.buffer.byteLength) return PlaceStatus.SrcFault;
  return PlaceStatus.Placed;
}

describe('place (M3 direct placement)', () => {
  it('places a valid segment and echoes tag/len/stag', () => {
    runPlace([base(), base({ to: region + 4096 - 100, len: 100, src: payload + 1000, tag: 1 })], [0, 0]);
  });

  it('protection matrix: every failing check writes nothing', () => {
    const cap = dm.regions.capacity;
    const cases: Array<[string, PlaceDesc, number]> = [
      ['wrong key byte', base({ stag: (stag & ~0xff) | ((stag + 1) & 0xff) }), PlaceStatus.InvalidStag],
      ['stag 0', base({ stag: 0 }), PlaceStatus.InvalidStag],
      ['free entry', base({ stag: (((idx + 5) << 8) | 0x11) >>> 0 }), PlaceStatus.InvalidStag],
      ['index out of range', base({ stag: ((cap << 8) | (stag & 0xff)) >>> 0 }), PlaceStatus.InvalidStag],
      ['max index', base({ stag: 0xffff_ffff }), PlaceStatus.InvalidStag],
      ['pd mismatch', base({ pd: PD + 1 }), PlaceStatus.PdMismatch],
      ['missing access', base({ access: RemoteWrite | RemoteRead }), PlaceStatus.Access],
      ['before base', base({ to: region - 1 }), PlaceStatus.Bounds],
      ['past end by one', base({ to: region + 4096 - 255 }), PlaceStatus.Bounds],
      ['len > region', base({ len: 4097 }), PlaceStatus.Bounds],
      ['len 2^32-1', base({ len: 0xffff_ffff }), PlaceStatus.Bounds],
      ['to = 2^64-1', base({ to: 2n ** 64n - 1n, len: 1 }), PlaceStatus.Bounds],
      ['to = 2^64-1, len 0', base({ to: 2n ** 64n - 1n, len: 0 }), PlaceStatus.Bounds],
      ['to = base + 2^32 (high word aliasing)', base({ to: BigInt(region) + 2n ** 32n }), PlaceStatus.Bounds],
      ['to = 2^64 - 2^32 + base', base({ to: 2n ** 64n - 2n ** 32n + BigInt(region) }), PlaceStatus.Bounds],
      ['zero length past end', base({ to: region + 4097, len: 0 }), PlaceStatus.Bounds],
      ['external region', base({ stag: extStag, to: 0x1000_0000 }), PlaceStatus.Indirect],
      ['src outside memory', base({ src: dm.memory.buffer.byteLength - 10, len: 100 }), PlaceStatus.SrcFault],
    ];
    for (const [name, d, want] of cases) {
      expect(modelStatus(d), name).toBe(want);
      runPlace([d], [want]);
    }
  });

  it('a payload outside device memory (PLACE_SRC_CALLER): every check still runs, nothing is written, a valid one comes back for the caller to copy', () => {
    const caller = (o: Partial<PlaceDesc>) => base({ src: PLACE_SRC_CALLER, ...o });
    const cases: Array<[string, PlaceDesc, number]> = [
      ['valid', caller({}), PlaceStatus.CallerCopies],
      ['valid, last byte of the region', caller({ to: region + 4095, len: 1 }), PlaceStatus.CallerCopies],
      ['wrong key byte', caller({ stag: (stag & ~0xff) | ((stag + 1) & 0xff) }), PlaceStatus.InvalidStag],
      ['pd mismatch', caller({ pd: PD + 1 }), PlaceStatus.PdMismatch],
      ['missing access', caller({ access: RemoteWrite | RemoteRead }), PlaceStatus.Access],
      ['past end by one', caller({ to: region + 4096 - 255 }), PlaceStatus.Bounds],
      ['len 2^32-1', caller({ len: 0xffff_ffff }), PlaceStatus.Bounds],
      ['to = base + 2^32 (high word aliasing)', caller({ to: BigInt(region) + 2n ** 32n }), PlaceStatus.Bounds],
      ['external region', caller({ stag: extStag, to: 0x1000_0000 }), PlaceStatus.Indirect],
    ];
    for (const [name, d, want] of cases) {
      expect(modelStatus(d), name).toBe(want);
      runPlace([d], [want]);
    }
  });

  it('a hash-tracked landing zone: PLACE_SRC_CALLER comes back CallerCopiesHashed; placedHash checks the stag again', () => {
    const i = dm.regions.allocIndex();
    const r = dm.alloc(512);
    const s = dm.regions.nextStag(i);
    dm.regions.write(i, { base: r, length: 512, stag: s, pd: PD, access: RemoteWrite });
    // Only the entry's hashDir field matters to place(); a nonzero one marks the zone (its
    // directory is never read here: the caller copies, and placedHash is not called).
    dm.regions.setHashDir(i, r);
    runPlace([base({ stag: s, to: r, len: 64, src: PLACE_SRC_CALLER })], [PlaceStatus.CallerCopiesHashed]);
    // A stale stag or one without a directory hashes nothing.
    expect(dm.kernels.placedHash(dm.regions.base, dm.regions.capacity, (s & ~0xff) | ((s + 1) & 0xff), r, 64)).toBe(0);
    expect(dm.kernels.placedHash(dm.regions.base, dm.regions.capacity, stag, region, 64)).toBe(0);
    dm.regions.clear(i);
    dm.regions.freeIndex(i);
    dm.free(r);
  });

  it('zero-length segments at either edge are placed (nothing to copy)', () => {
    runPlace([base({ len: 0 }), base({ to: region + 4096, len: 0 })], [0, 0]);
  });

  it('a cleared or freed STag stops working at once; a new key for the same index does not revive the old one', () => {
    const i = dm.regions.allocIndex();
    const r = dm.alloc(512);
    const s1 = dm.regions.nextStag(i);
    dm.regions.write(i, { base: r, length: 512, stag: s1, pd: PD, access: RemoteWrite });
    runPlace([base({ stag: s1, to: r, len: 512 })], [0]);
    dm.regions.clear(i);
    runPlace([base({ stag: s1, to: r, len: 1 })], [PlaceStatus.InvalidStag]);
    const s2 = dm.regions.nextStag(i);
    dm.regions.write(i, { base: r, length: 512, stag: s2, pd: PD, access: RemoteWrite });
    runPlace([base({ stag: s1, to: r, len: 1 }), base({ stag: s2, to: r, len: 1 })], [PlaceStatus.InvalidStag, 0]);
    dm.regions.freeIndex(i);
    runPlace([base({ stag: s2, to: r, len: 1 })], [PlaceStatus.InvalidStag]);
    dm.free(r);
  });

  it('property: random batches match the model, byte for byte', () => {
    const toArb = fc.oneof(
      fc.integer({ min: region - 300, max: region + 4400 }).map((n) => n as number | bigint),
      fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
      fc.constantFrom<number | bigint>(2n ** 64n - 1n, 2n ** 32n + BigInt(region), 0),
    );
    const lenArb = fc.oneof(fc.integer({ min: 0, max: 4200 }), fc.constantFrom(0xffff_ffff, 0x8000_0000));
    // Half the descriptors sit within a few bytes of the region's edges, where off-by-ones live.
    const descArb = fc
      .record({
        src: fc.oneof({ arbitrary: fc.integer({ min: payload, max: payload + 4096 }), weight: 4 }, { arbitrary: fc.constant(PLACE_SRC_CALLER), weight: 1 }),
        len: lenArb,
        stag: fc.constantFrom(stag, extStag, stag ^ 1, 0, (stag & 0xff) | (60 << 8), 0xffff_ffff),
        pd: fc.constantFrom(PD, PD, PD + 1),
        to: toArb,
        edge: fc.option(fc.tuple(fc.boolean(), fc.integer({ min: -2, max: 2 })), { freq: 2 }),
        access: fc.constantFrom(RemoteWrite, LocalWrite, RemoteRead, 0, RemoteWrite | LocalWrite),
        tag: fc.nat({ max: 0xffff_ffff }),
      })
      .map(({ edge, ...d }): PlaceDesc => {
        if (edge === null) return d;
        const [atEnd, delta] = edge;
        const len = d.len % 4097;
        return { ...d, len, to: Math.max(0, (atEnd ? region + 4096 - len : region) + delta) };
      });
    fc.assert(
      fc.property(fc.array(descArb, { minLength: 1, maxLength: 16 }), (batch) => {
        runPlace(batch, batch.map(modelStatus));
      }),
      { numRuns: 300 },
    );
  });
});

describe('sgCopy', () => {
  let regs: Array<{ idx: number; base: number; length: number }>;
  let sgDescs: number;
  let sgOut: number;

  beforeAll(() => {
    regs = [1000, 4096, 333].map((length) => {
      const i = dm.regions.allocIndex();
      const b = dm.alloc(length);
      dm.regions.write(i, { base: b, length, stag: dm.regions.nextStag(i), pd: PD, access: 0 });
      const u8 = dm.u8();
      for (let k = 0; k < length; k++) u8[b + k] = (k * 13 + i) & 0xff;
      return { idx: i, base: b, length };
    });
    sgDescs = dm.alloc(64 * SG_DESC_BYTES);
    sgOut = dm.alloc(64 * 4);
  });

  function modelSg(d: SgDesc): number {
    const ok = (i: number) => i >= 1 && i < dm.regions.capacity && dm.regions.read(i).stag !== 0;
    const inside = (i: number, p: number) => {
      const e = dm.regions.read(i);
      return p >= e.base && p + d.len <= e.base + e.length;
    };
    if (!ok(d.srcIdx)) return SgStatus.SrcEntry;
    if (!ok(d.dstIdx)) return SgStatus.DstEntry;
    if (!inside(d.srcIdx, d.src)) return SgStatus.SrcBounds;
    if (!inside(d.dstIdx, d.dst)) return SgStatus.DstBounds;
    return SgStatus.Ok;
  }

  it('property: every out-of-bounds descriptor is rejected and the rest execute exactly, in order', () => {
    const addrArb = fc.oneof(
      fc.constantFrom(0, 1, 2).chain((r) => fc.integer({ min: regs[r]!.base - 50, max: regs[r]!.base + regs[r]!.length + 50 })),
      fc.nat({ max: 0xffff_ffff }),
    );
    const edgeArb = fc.option(fc.tuple(fc.constantFrom(0, 1, 2), fc.boolean(), fc.integer({ min: -2, max: 2 })), { freq: 2 });
    const descArb = fc
      .record({
        src: addrArb,
        dst: addrArb,
        len: fc.oneof(fc.integer({ min: 0, max: 1200 }), fc.constantFrom(0xffff_ffff, 0xffff_ff00)),
        srcIdx: fc.oneof(fc.constantFrom(...regs.map((r) => r.idx)), fc.constantFrom(0, 50, 64, 0xffff_ffff)),
        dstIdx: fc.oneof(fc.constantFrom(...regs.map((r) => r.idx)), fc.constantFrom(0, 50, 64, 0xffff_ffff)),
        srcEdge: edgeArb,
        dstEdge: edgeArb,
      })
      .map(({ srcEdge, dstEdge, ...d }): SgDesc => {
        // Pin src/dst to within a few bytes of a region's first or last byte.
        const len = srcEdge || dstEdge ? d.len % 1201 : d.len;
        const at = (e: [number, boolean, number] | null, p: number) => {
          if (e === null) return p;
          const r = regs[e[0]]!;
          return Math.max(0, (e[1] ? r.base + r.length - len : r.base) + e[2]);
        };
        return { ...d, len, src: at(srcEdge, d.src), dst: at(dstEdge, d.dst) };
      });
    fc.assert(
      fc.property(fc.array(descArb, { minLength: 1, maxLength: 24 }), (batch) => {
        const dv = dm.dataView();
        batch.forEach((d, i) => writeSgDesc(dv, sgDescs + i * SG_DESC_BYTES, d));
        const model = dm.u8().slice();
        const want = batch.map((d) => {
          const s = modelSg(d);
          if (s === SgStatus.Ok) model.copyWithin(d.dst, d.src, d.src + d.len);
          return s;
        });
        const done = dm.kernels.sgCopy(sgDescs, batch.length, dm.regions.base, dm.regions.capacity, sgOut);
        const got = batch.map((_, i) => dm.dataView().getUint32(sgOut + i * 4, true));
        expect(got).toEqual(want);
        expect(done).toBe(want.filter((s) => s === 0).length);
        const after = dm.u8();
        model.set(after.subarray(sgOut, sgOut + batch.length * 4), sgOut);
        expect(Buffer.compare(Buffer.from(after.buffer, 0, after.length), Buffer.from(model.buffer, 0, model.length))).toBe(0);
      }),
      { numRuns: 300 },
    );
  });
});
