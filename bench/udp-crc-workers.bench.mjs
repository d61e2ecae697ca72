// Hand-off of the transmit CRC of one UDP flush (8 datagrams of 64 886 B, cycling through a 4 MiB
// region) to 1 or 2 data-plane workers (Crc32cBatch ring jobs) vs inline on the main thread, p50.
// Run: npx tsc -p tsconfig.build.json && node bench/udp-crc-workers.bench.mjs
import { DeviceMemory } from '../dist/dataplane/device-memory.js';
import { DataPlaneWorkers } from '../dist/dataplane/workers.js';
import { JobOp } from '../dist/dataplane/jobs.js';
const dm = await DeviceMemory.create({ maximumBytes: 1 << 28, workerSlots: 2 });
const N = 8, L = 64886, REGION = 4 << 20;
const base = dm.alloc(REGION, 64), desc = dm.alloc(16 * N, 16);
const u8 = dm.u8(); for (let i = 0; i < REGION; i++) u8[base + i] = i * 13;
const dv = () => dm.dataView();
let slot = 0;
const fill = () => { const d = dv(); for (let i = 0; i < N; i++) { d.setUint32(desc + 16 * i, base + ((slot++ % 60) * 65536), true); d.setUint32(desc + 16 * i + 4, L, true); d.setUint32(desc + 16 * i + 8, 0, true); d.setUint32(desc + 16 * i + 12, desc + 16 * i + 12, true); } };
const pct = (a) => a.sort((x, y) => x - y)[a.length >> 1];
const inline = [];
for (let r = 0; r < 2000; r++) { fill(); const t = performance.now(); for (let i = 0; i < N; i++) dm.kernels.crc32c(dv().getUint32(desc + 16 * i, true), L, 0); inline.push(performance.now() - t); }
for (const count of [1, 2]) {
  const w = await DataPlaneWorkers.start(dm, count);
  const lat = [];
  for (let r = 0; r < 2000; r++) {
    fill(); const t = performance.now();
    if (count === 1) await w.submit({ op: JobOp.Crc32cBatch, args: [desc, N] }, 0);
    else await Promise.all([w.submit({ op: JobOp.Crc32cBatch, args: [desc, N / 2] }, 0), w.submit({ op: JobOp.Crc32cBatch, args: [desc + 16 * N / 2, N / 2] }, 1)]);
    lat.push(performance.now() - t);
  }
  console.log(`${count} worker(s): p50 ${(pct(lat) * 1000).toFixed(0)} µs per flush of ${N} × ${L} B`);
  await w.close?.();
}
console.log(`inline: p50 ${(pct(inline) * 1000).toFixed(0)} µs per flush of ${N} × ${L} B`);
process.exit(0);
