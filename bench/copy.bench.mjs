// Placement copies into device memory: the sgCopy and place kernels (memory.copy in WASM,
// after the region-table checks) against Uint8Array.set between views of the same shared
// memory (V8's copy when either side is shared) and copyWithin. Run `npx tsc -p
// tsconfig.build.json` (and the wasm build) first. Ratio = baseline time ÷ kernel time.
import { Bench } from 'tinybench';
import { DeviceMemory } from '../dist/dataplane/device-memory.js';
import { writePlaceDesc, writeSgDesc } from '../dist/dataplane/descriptors.js';

const MAX = 1024 * 1024;
const BATCH = 16;
const dm = await DeviceMemory.create({ initialBytes: 48 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
const k = dm.kernels;
const t = dm.regions;
const src = dm.alloc(MAX * BATCH);
const dst = dm.alloc(MAX * BATCH);
const si = t.allocIndex();
t.write(si, { base: src, length: MAX * BATCH, stag: t.nextStag(si), pd: 1, access: 7 });
const di = t.allocIndex();
const dstStag = t.nextStag(di);
t.write(di, { base: dst, length: MAX * BATCH, stag: dstStag, pd: 1, access: 7 });
const descs = dm.alloc(BATCH * 32);
const out = dm.alloc(BATCH * 16);
const u8 = dm.u8();
for (let i = 0; i < MAX * BATCH; i++) u8[src + i] = (i * 2654435761) >>> 24;

const rows = [];
for (const size of [4096, 64 * 1024, MAX]) {
  for (const batch of [1, BATCH]) {
    const dv = dm.dataView();
    // Descriptors for `batch` copies of `size` bytes, to distinct destinations.
    const sgDescs = descs;
    for (let b = 0; b < batch; b++) writeSgDesc(dv, sgDescs + b * 32, { src: src + b * size, dst: dst + b * size, len: size, srcIdx: si, dstIdx: di });
    const placeDescs = dm.alloc(batch * 32);
    for (let b = 0; b < batch; b++) writePlaceDesc(dv, placeDescs + b * 32, { src: src + b * size, len: size, stag: dstStag, pd: 1, to: dst + b * size, access: 2, tag: b });
    const srcViews = Array.from({ length: batch }, (_, b) => u8.subarray(src + b * size, src + (b + 1) * size));
    const reps = Math.max(1, Math.floor((256 * 1024) / (size * batch)));
    const bench = new Bench({ name: `copy ${size} B × ${batch}`, time: 500, warmupTime: 150 });
    bench
      .add('sgCopy kernel', () => {
        for (let r = 0; r < reps; r++) if (k.sgCopy(sgDescs, batch, t.base, t.capacity, out) !== batch) throw new Error('sgCopy');
      })
      .add('place kernel', () => {
        for (let r = 0; r < reps; r++) if (k.place(placeDescs, batch, t.base, t.capacity, out) !== batch) throw new Error('place');
      })
      .add('Uint8Array.set (prebuilt views)', () => {
        for (let r = 0; r < reps; r++) for (let b = 0; b < batch; b++) u8.set(srcViews[b], dst + b * size);
      })
      .add('Uint8Array.set + subarray per copy', () => {
        for (let r = 0; r < reps; r++) for (let b = 0; b < batch; b++) u8.set(u8.subarray(src + b * size, src + (b + 1) * size), dst + b * size);
      })
      .add('copyWithin', () => {
        for (let r = 0; r < reps; r++) for (let b = 0; b < batch; b++) u8.copyWithin(dst + b * size, src + b * size, src + (b + 1) * size);
      });
    await bench.run();
    const ns = {};
    for (const task of bench.tasks) {
      const res = task.result;
      if (res.state !== 'completed') throw new Error(`${task.name}: ${res.state} ${res.error ?? ''}`);
      ns[task.name] = (res.latency.p50 * 1e6) / reps; // ns per batch
    }
    const base = ns['Uint8Array.set (prebuilt views)'];
    for (const [name, v] of Object.entries(ns)) {
      rows.push({
        size,
        batch,
        impl: name,
        'ns/batch': v.toFixed(0),
        'GB/s': ((size * batch) / v).toFixed(1),
        'set ÷ this': (base / v).toFixed(2),
      });
    }
    dm.free(placeDescs);
  }
}
// Per-descriptor overhead: 1024 descriptors of 16 bytes in one call (checks dominate).
{
  const N = 1024;
  const dv = dm.dataView();
  const sd = dm.alloc(N * 32);
  const pd = dm.alloc(N * 32);
  const o = dm.alloc(N * 16);
  for (let b = 0; b < N; b++) {
    writeSgDesc(dv, sd + b * 32, { src: src + b * 16, dst: dst + b * 16, len: 16, srcIdx: si, dstIdx: di });
    writePlaceDesc(dv, pd + b * 32, { src: src + b * 16, len: 16, stag: dstStag, pd: 1, to: dst + b * 16, access: 2, tag: b });
  }
  const bench = new Bench({ name: 'tiny descriptors', time: 500, warmupTime: 150 });
  bench
    .add('sgCopy kernel', () => k.sgCopy(sd, N, t.base, t.capacity, o))
    .add('place kernel', () => k.place(pd, N, t.base, t.capacity, o))
    .add('Uint8Array.set + subarray per copy', () => {
      for (let b = 0; b < N; b++) u8.set(u8.subarray(src + b * 16, src + b * 16 + 16), dst + b * 16);
    });
  await bench.run();
  const base = bench.tasks[2].result.latency.p50;
  for (const task of bench.tasks) {
    const v = (task.result.latency.p50 * 1e6) / N;
    rows.push({ size: 16, batch: N, impl: task.name, 'ns/batch': `${v.toFixed(1)} per desc`, 'GB/s': ((16 * N) / (task.result.latency.p50 * 1e6)).toFixed(1), 'set ÷ this': (base / task.result.latency.p50).toFixed(2) });
  }
}
// What V8's copy into shared memory costs by alignment: Uint8Array.set from a node Buffer (a
// datagram, say) into device memory, the source equally aligned with the target or 13 bytes
// off. V8 (relaxed_memmove) copies word by word only in the first case: why placement copies
// a payload outside device memory itself only when it is aligned as its target, and stages
// the rest at the source's alignment (src/rdmap/placement.ts, src/rdmap/memory.ts).
{
  const SIZE = 64 * 1024;
  const heapSrc = Buffer.alloc(SIZE + 64, 7);
  const bench = new Bench({ name: 'set into shared memory by alignment', time: 500, warmupTime: 150 });
  bench
    .add('Uint8Array.set, source aligned as the target', () => u8.set(heapSrc.subarray(0, SIZE), dst + MAX))
    .add('Uint8Array.set, source 13 bytes off', () => u8.set(heapSrc.subarray(13, 13 + SIZE), dst + MAX));
  await bench.run();
  const [al, off] = bench.tasks.map((x) => x.result.latency.p50);
  for (const [task, v] of [[bench.tasks[0], al], [bench.tasks[1], off]]) {
    rows.push({ size: SIZE, batch: 1, impl: task.name, 'ns/batch': (v * 1e6).toFixed(0), 'GB/s': (SIZE / (v * 1e6)).toFixed(1), 'set ÷ this': (al / v).toFixed(2) });
  }
}
// The copies must have produced the source bytes.
if (Buffer.compare(Buffer.from(u8.subarray(src, src + MAX)), Buffer.from(u8.subarray(dst, dst + MAX))) !== 0) throw new Error('copy mismatch');
console.table(rows);
