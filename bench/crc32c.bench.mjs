// CRC32C throughput, one core: sabre's WASM kernel on bytes already in shared memory (the
// device data path) against hash-wasm's CRC32 with the Castagnoli polynomial (the baseline it
// must beat) and native @node-rs/crc32, each on the same bytes. Run `npx tsc -p
// tsconfig.build.json` and `npx asc assembly/index.ts --target release` first.
import { crc32c as nativeCrc32c } from '@node-rs/crc32';
import { createCRC32 } from 'hash-wasm';
import { Bench } from 'tinybench';
import { createSharedMemory, instantiateKernels } from '../dist/dataplane/wasm.js';
import { crc32c as userCrc32c } from '../dist/kernels/crc32c.js';

const SIZES = [1024, 64 * 1024, 1024 * 1024];
const memory = createSharedMemory(64, 64); // 4 MiB
const k = await instantiateKernels(memory);
const u8 = new Uint8Array(memory.buffer);
const base = Math.ceil(Number(k.heapBase()) / 64) * 64;
const hw = await createCRC32(0x82f63b78);
const hashWasm = (buf) => {
  hw.init();
  hw.update(buf);
  return hw.digest('binary');
};

let seed = 0x9e3779b9;
for (let i = 0; i < 2 * 1024 * 1024; i++) {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  u8[base + i] = seed & 0xff;
}

const rows = [];
for (const size of SIZES) {
  const buf = Buffer.from(u8.subarray(base, base + size)); // the same bytes, in ordinary memory
  const want = nativeCrc32c(buf);
  const got = [k.crc32c(base, size, 0), Buffer.from(hashWasm(buf)).readUInt32BE(0), userCrc32c(buf)];
  if (got.some((v) => v !== want)) throw new Error(`CRC mismatch at ${size}: ${got} vs ${want}`);

  // Repeat small inputs inside one sample so each sample is well above the timer's resolution.
  const reps = Math.max(1, (256 * 1024) / size);
  const bench = new Bench({ name: `crc32c ${size} B`, time: 700, warmupTime: 200 });
  const sink = { v: 0 };
  bench
    .add('sabre kernel (shared memory)', () => {
      for (let r = 0; r < reps; r++) sink.v ^= k.crc32c(base, size, 0);
    })
    .add('hash-wasm CRC32C', () => {
      for (let r = 0; r < reps; r++) sink.v ^= hashWasm(buf)[0];
    })
    .add('@node-rs/crc32 (native)', () => {
      for (let r = 0; r < reps; r++) sink.v ^= nativeCrc32c(buf);
    })
    .add('sabre crc32c(Uint8Array) (copy + kernel)', () => {
      for (let r = 0; r < reps; r++) sink.v ^= userCrc32c(buf);
    });
  await bench.run();
  const gbs = {};
  for (const t of bench.tasks) {
    const r = t.result;
    if (r.state !== 'completed') throw new Error(`${t.name}: ${r.state} ${r.error ?? ''}`);
    gbs[t.name] = (reps * size) / (r.latency.p50 * 1e6);
  }
  const kernel = gbs['sabre kernel (shared memory)'];
  for (const [name, v] of Object.entries(gbs)) {
    rows.push({ size, impl: name, 'GB/s': v.toFixed(2), 'kernel ÷ this': (kernel / v).toFixed(2) });
  }
}
console.table(rows);

// Data not in cache: 64 KiB pieces taken in turn from a 64 MiB region (the send path's
// situation when the registered region is far larger than the caches), kernel in place vs
// native on views of the same bytes.
{
  const big = createSharedMemory(1040, 1040); // 65 MiB
  const kb = await instantiateKernels(big);
  const b8 = new Uint8Array(big.buffer);
  const b0 = Math.ceil(Number(kb.heapBase()) / 64) * 64;
  const PIECE = 64 * 1024;
  const N = 1024;
  for (let i = 0; i < N * PIECE; i++) b8[b0 + i] = (i * 2654435761) >>> 24;
  const views = Array.from({ length: N }, (_, i) => Buffer.from(big.buffer, b0 + i * PIECE, PIECE));
  if (kb.crc32c(b0 + 7 * PIECE, PIECE, 0) !== nativeCrc32c(views[7])) throw new Error('CRC mismatch (sweep)');
  let i = 0;
  const sink = { v: 0 };
  const bench = new Bench({ name: 'crc32c 64 KiB, 64 MiB sweep', time: 700, warmupTime: 200 });
  bench
    .add('sabre kernel, 64 MiB sweep', () => {
      sink.v ^= kb.crc32c(b0 + (i++ % N) * PIECE, PIECE, 0);
    })
    .add('@node-rs/crc32 (native), 64 MiB sweep', () => {
      sink.v ^= nativeCrc32c(views[i++ % N]);
    });
  await bench.run();
  const us = {};
  for (const t of bench.tasks) us[t.name] = t.result.latency.p50 * 1000;
  const kern = us['sabre kernel, 64 MiB sweep'];
  console.table(Object.entries(us).map(([impl, v]) => ({ size: PIECE, impl, 'µs per 64 KiB': v.toFixed(1), 'GB/s': (PIECE / v / 1000).toFixed(2), 'kernel ÷ this': (v / kern).toFixed(2) })));
}
