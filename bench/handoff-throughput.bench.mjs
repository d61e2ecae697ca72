// Bulk CRC32C over 64 MiB of device memory, cut into 64 KiB pieces (one CRC per piece, as
// per-FPDU CRCs are): inline on the main thread vs 1 and 2 data-plane workers (ring jobs of
// crc32cBatch, 4 MiB per job) vs a 2-thread piscina pool. Ratio = inline time ÷ this.
// Run `npx tsc -p tsconfig.build.json` and the wasm build first.
import { crc32c as nativeCrc32c } from '@node-rs/crc32';
import { Bench } from 'tinybench';
import { DeviceMemory } from '../dist/dataplane/device-memory.js';
import { JobOp } from '../dist/dataplane/jobs.js';
import { KernelPool } from '../dist/dataplane/pool.js';
import { DataPlaneWorkers } from '../dist/dataplane/workers.js';

const TOTAL = 64 << 20;
const PIECE = 64 << 10;
const PIECES = TOTAL / PIECE;
const PER_JOB = 64; // 4 MiB per job
const dm = await DeviceMemory.create({ initialBytes: 72 << 20, maximumBytes: 96 << 20, workerSlots: 2 });
const k = dm.kernels;
const data = dm.alloc(TOTAL);
const descs = dm.alloc(PIECES * 16);
const u8 = dm.u8();
let s = 0x12345678;
for (let i = 0; i < TOTAL; i += 4) {
  s ^= s << 13;
  s ^= s >>> 17;
  s ^= s << 5;
  u8[data + i] = s;
  u8[data + i + 1] = s >>> 8;
  u8[data + i + 2] = s >>> 16;
  u8[data + i + 3] = s >>> 24;
}
const dv = dm.dataView();
for (let p = 0; p < PIECES; p++) {
  dv.setUint32(descs + p * 16, data + p * PIECE, true);
  dv.setUint32(descs + p * 16 + 4, PIECE, true);
  dv.setUint32(descs + p * 16 + 8, 0, true);
}
const check = () => {
  for (const p of [0, PIECES >> 1, PIECES - 1]) {
    const want = nativeCrc32c(Buffer.from(u8.subarray(data + p * PIECE, data + (p + 1) * PIECE)));
    if (dv.getUint32(descs + p * 16 + 12, true) !== want) throw new Error(`CRC mismatch at piece ${p}`);
    dv.setUint32(descs + p * 16 + 12, 0, true);
  }
};

const workers = await DataPlaneWorkers.start(dm, 2);
const pool = new KernelPool(dm, { threads: 2 });
const jobs = [];
for (let p = 0; p < PIECES; p += PER_JOB) jobs.push({ op: JobOp.Crc32cBatch, args: [descs + p * 16, PER_JOB] });

const bench = new Bench({ name: 'crc32c 64 MiB', time: 2500, warmupTime: 300, iterations: 10 });
bench
  .add('inline (main thread)', () => {
    k.crc32cBatch(descs, PIECES);
  })
  .add('1 data-plane worker (ring)', async () => {
    await workers.submitBatch(jobs, 0);
  })
  .add('2 data-plane workers (ring)', async () => {
    const half = jobs.length / 2;
    await Promise.all([workers.submitBatch(jobs.slice(0, half), 0), workers.submitBatch(jobs.slice(half), 1)]);
  })
  .add('piscina, 2 threads', async () => {
    await pool.crc32cChunks(data, TOTAL, PIECE);
  });
for (const t of bench.tasks) {
  await t.run();
  if (t.name !== 'piscina, 2 threads') check();
}
const rows = [];
let base;
for (const t of bench.tasks) {
  const r = t.result;
  if (r.state !== 'completed') throw new Error(`${t.name}: ${r.state} ${r.error ?? ''}`);
  const ms = r.latency.p50;
  base ??= ms;
  rows.push({ path: t.name, 'ms / 64 MiB': ms.toFixed(2), 'GB/s': (TOTAL / (ms * 1e6)).toFixed(2), 'inline ÷ this': (base / ms).toFixed(2) });
}
console.table(rows);
await Promise.all([workers.close(), pool.close()]);
