// XXH3-64 throughput, one core: sabre's WASM kernel on bytes already in shared memory (the UDP
// receive path: the datagram checked in place) against the CRC32C kernel on the same bytes
// (the other integrity mode) and native @node-rs/xxhash; also the gather-list hasher the UDP
// send path uses (a 60-byte header in JS + the payload in shared memory, streamed).
// Run `npm run build` first.
import { xxh3 } from '@node-rs/xxhash';
import { Bench } from 'tinybench';
import { createSharedMemory, instantiateKernels } from '../dist/dataplane/wasm.js';
import { Xxh3Parts } from '../dist/kernels/xxh3-64.js';

const SIZES = [64, 1024, 8192, 65536];
const memory = createSharedMemory(64, 64);
const k = await instantiateKernels(memory);
const u8 = new Uint8Array(memory.buffer);
const view = new DataView(memory.buffer);
const base = Math.ceil(Number(k.heapBase()) / 64) * 64;
const OUT = base;
const STATE = base + 64;
const STAGE = base + 1024;
const DATA = base + 128 * 1024;
const parts = new Xxh3Parts({ u8: () => u8, kernels: k }, STATE, OUT, STAGE, 64 * 1024);
let x = 0x9e3779b9;
for (let i = 0; i < 1024 * 1024; i++) {
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  u8[DATA + i] = x & 0xff;
}
const head = u8.slice(DATA, DATA + 60);
const trailer = new Uint8Array(8);

const rows = [];
for (const size of SIZES) {
  const buf = Buffer.from(u8.subarray(DATA, DATA + size));
  k.xxh3_64(DATA, size, 0n, OUT);
  if (view.getBigUint64(OUT, true) !== xxh3.xxh64(buf)) throw new Error(`XXH3-64 mismatch at ${size}`);
  const reps = Math.max(1, (256 * 1024) / size);
  const payload = u8.subarray(DATA + 60, DATA + 60 + size);
  const bench = new Bench({ name: `xxh3-64 ${size} B`, time: 600, warmupTime: 150 });
  const sink = { v: 0 };
  bench
    .add('sabre xxh3_64 kernel (in place)', () => {
      for (let r = 0; r < reps; r++) k.xxh3_64(DATA, size, 0n, OUT);
    })
    .add('sabre crc32c kernel (in place)', () => {
      for (let r = 0; r < reps; r++) sink.v ^= k.crc32c(DATA, size, 0);
    })
    .add('@node-rs/xxhash xxh3 64 (native)', () => {
      for (let r = 0; r < reps; r++) sink.v ^= Number(xxh3.xxh64(buf) & 0xffn);
    })
    .add('sabre Xxh3Parts [60 B head, payload]', () => {
      for (let r = 0; r < reps; r++) parts.hash([head, payload], 0, 2, trailer, 0);
    });
  await bench.run();
  const gbs = {};
  for (const t of bench.tasks) {
    const r = t.result;
    if (r.state !== 'completed') throw new Error(`${t.name}: ${r.state} ${r.error ?? ''}`);
    gbs[t.name] = (reps * size) / (r.latency.p50 * 1e6);
  }
  const crc = gbs['sabre crc32c kernel (in place)'];
  for (const [name, v] of Object.entries(gbs)) rows.push({ size, impl: name, 'GB/s': v.toFixed(2), '÷ crc32c kernel': (v / crc).toFixed(2) });
}
console.table(rows);
