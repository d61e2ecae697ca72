// The cost of the in-band dedup hook inside place() (docs/dedup.md "Hooking into place()").
//
// - Every region that is not a dedup landing zone pays one load and a branch per descriptor.
//   With PLACE_HOOK_BASELINE_WASM=<a build of place() without the hook> the same descriptors run
//   through both modules over the same memory, alternating, and the ratio is printed:
//     git archive <commit> assembly asconfig.json | tar -x -C /tmp/base && (cd /tmp/base &&
//       npx asc assembly/index.ts --target release --outFile /tmp/base/base.wasm)
//     PLACE_HOOK_BASELINE_WASM=/tmp/base/base.wasm node bench/place-hook.bench.mjs
// - A hash-tracked zone pays the XXH3-128 update over the bytes just placed: place() into an
//   armed zone vs the same place() into an untracked region.
// Build first (npm run build). Rows: ns per descriptor and GB/s, median of ROUNDS alternations.
import { readFileSync } from 'node:fs';
import { DeviceMemory } from '../dist/dataplane/device-memory.js';
import { writePlaceDesc } from '../dist/dataplane/descriptors.js';
import { instantiateKernels } from '../dist/dataplane/wasm.js';
import { ChunkMap } from '../dist/dedup/chunk-map.js';
import { DEDUP_ZONE_DIR, DEDUP_ZONE_MAGIC } from '../dist/wire/spec.js';

const ROUNDS = Number(process.env.PLACE_HOOK_ROUNDS ?? 7);
const dm = await DeviceMemory.create({ initialBytes: 64 << 20, maximumBytes: 128 << 20, workerSlots: 0 });
const t = dm.regions;
const baselinePath = process.env.PLACE_HOOK_BASELINE_WASM;
const baseline = baselinePath ? await instantiateKernels(dm.memory, new WebAssembly.Module(readFileSync(baselinePath))) : undefined;
const ZONE = 4 << 20;
const src = dm.alloc(ZONE);
const u8 = dm.u8();
for (let i = 0; i < ZONE; i++) u8[src + i] = (i * 2654435761) >>> 24;
const region = (len) => {
  const base = dm.alloc(len);
  const i = t.allocIndex();
  const stag = t.nextStag(i);
  t.write(i, { base, length: len, stag, pd: 1, access: 7 });
  return { base, i, stag };
};
const plain = region(ZONE);
const tracked = region(ZONE);
// The tracked zone: one slot, armed with chunks of 16 KiB whose expected hash does not matter
// (the cost is the hashing, not the verdict).
const dir = dm.alloc(DEDUP_ZONE_DIR.size + 4);
const map = new ChunkMap(dm, tracked.base, ZONE, ZONE / 16384 + 1);
const arm = () => map.arm(Array.from({ length: ZONE / 16384 }, () => ({ len: 16384, hash: 0n })));
{
  const D = DEDUP_ZONE_DIR.fields;
  const dv = dm.dataView();
  dv.setUint32(dir + D.slots.offset, 1, true);
  dv.setUint32(dir + D.slotLen.offset, ZONE, true);
  dv.setUint32(dir + D.zoneBase.offset, tracked.base, true);
  dv.setUint32(dir + DEDUP_ZONE_DIR.size, map.addr, true);
  dv.setUint32(dir + D.magic.offset, DEDUP_ZONE_MAGIC, true);
  t.setHashDir(tracked.i, dir);
}

/** Descriptors covering the zone in segments of `seg` bytes (at most `max` of them). */
function descs(r, seg, max) {
  const n = Math.min(max, Math.floor(ZONE / seg));
  const d = dm.alloc(n * 32);
  const dv = dm.dataView();
  for (let b = 0; b < n; b++) writePlaceDesc(dv, d + b * 32, { src: src + b * seg, len: seg, stag: r.stag, pd: 1, to: r.base + b * seg, access: 2, tag: b });
  return { d, n, bytes: n * seg };
}
const out = dm.alloc(4096 * 16);

/** ns per descriptor of `k.place` over `x`, repeated for ~20 ms; `before` runs untimed first each rep. */
function time(k, x, before) {
  let reps = 0;
  let ns = 0n;
  const end = performance.now() + 20;
  while (performance.now() < end) {
    before?.();
    const t0 = process.hrtime.bigint();
    if (k.place(x.d, x.n, t.base, t.capacity, out) !== x.n) throw new Error('place');
    ns += process.hrtime.bigint() - t0;
    reps++;
  }
  return Number(ns) / reps / x.n;
}
const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];

const rows = [];
for (const [label, seg, max] of [['16 B segments × 1024', 16, 1024], ['1400 B (MTU) × 1024', 1400, 1024], ['8972 B (jumbo) × 256', 8972, 256]]) {
  const x = descs(plain, seg, max);
  const y = descs(tracked, seg, max);
  const a = [], b = [], h = [];
  for (let r = 0; r < ROUNDS; r++) {
    a.push(time(dm.kernels, x));
    if (baseline) b.push(time(baseline, x));
    h.push(time(dm.kernels, y, arm));
  }
  const gbs = (ns) => (seg / ns).toFixed(2);
  rows.push({ descriptors: label, 'untracked ns/desc': median(a).toFixed(1), 'GB/s': gbs(median(a)),
    ...(baseline ? { 'no-hook build ns/desc': median(b).toFixed(1), 'hook ÷ no-hook': (median(a) / median(b)).toFixed(3) } : {}),
    'tracked zone ns/desc': median(h).toFixed(1), 'tracked GB/s': gbs(median(h)) });
}
console.table(rows);
