// Content-defined chunking throughput, one core, same run: sabre's FastCDC kernel (keyed gear
// table) on bytes already in shared memory (the dedup data path) and through sabre/kernels
// chunkLengths(Uint8Array) (copy into scratch + kernel), against two published npm chunkers —
// @dstanesc/wasm-chunking-fastcdc-node (the Rust fastcdc crate compiled to WASM) and rabin-wasm
// (Rabin fingerprinting in AssemblyScript, as IPFS used it) — on the same bytes with the same
// min / avg / max. Every chunker also reports its mean chunk size, so a fast one cannot win by
// cutting less carefully.
//
//   node bench/cdc.bench.mjs [MiB]        (default 16 MiB of random bytes; build first)
import { compute_chunks as fastcdcRs } from '@dstanesc/wasm-chunking-fastcdc-node';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { Bench } from 'tinybench';
import { createSharedMemory, instantiateKernels } from '../dist/dataplane/wasm.js';
import { cdcParams, chunkLengths, gearTable, writeCdcState } from '../dist/kernels/cdc.js';

const require = createRequire(import.meta.url);
const rabinWasm = require('rabin-wasm');

const MIB = Number(process.argv[2] ?? 16);
const N = MIB << 20;
const AVG = 16 * 1024, MIN = 4 * 1024, MAX = 64 * 1024;
const key = randomBytes(32);

const pages = Math.ceil((N + (1 << 20)) / 65536) + 2;
const memory = createSharedMemory(pages, pages);
const k = await instantiateKernels(memory);
const u8 = new Uint8Array(memory.buffer);
const dv = new DataView(memory.buffer);
const base = Math.ceil(Number(k.heapBase()) / 64) * 64;
const TABLE = base, ST = base + 4096, OUT = base + 8192, OUT_CAP = 30_000, DATA = base + (1 << 20);
const data = randomBytes(N);
u8.set(data, DATA);
u8.set(gearTable(key), TABLE);
k.cdcPrepareTable(TABLE);
const p = cdcParams({ avg: AVG, min: MIN, max: MAX, key });
writeCdcState(dv, ST, p, TABLE);

function sabreKernel() {
  let n = 0;
  for (let at = 0; at < N; ) {
    n += k.cdcChunk(ST, DATA + at, N - at, OUT, OUT_CAP);
    at += dv.getUint32(ST + 12, true);
  }
  return n + (k.cdcFinish(ST) > 0 ? 1 : 0);
}
const sabreUser = () => chunkLengths(data, { avg: AVG, min: MIN, max: MAX, key }).length;
const fastcdc = () => fastcdcRs(data, MIN, AVG, MAX).length;
const rabin = await rabinWasm.create(14, MIN, MAX, 64);
const rabinRun = () => rabin.fingerprint(data).length;

const cases = [
  ['sabre cdc kernel (shared memory, keyed)', sabreKernel],
  ['sabre chunkLengths(Uint8Array) (copy + kernel)', sabreUser],
  ['@dstanesc/wasm-chunking-fastcdc-node', fastcdc],
  ['rabin-wasm', rabinRun],
];
const counts = Object.fromEntries(cases.map(([name, fn]) => [name, fn()]));
const bench = new Bench({ name: `chunking ${MIB} MiB, avg ${AVG >> 10} KiB`, time: 1500, warmupTime: 300, iterations: 3 });
for (const [name, fn] of cases) bench.add(name, fn);
await bench.run();

const gbs = {};
for (const t of bench.tasks) gbs[t.name] = N / (t.result.latency.mean / 1e3) / 1e9;
const baseline = gbs['@dstanesc/wasm-chunking-fastcdc-node'];
console.log(`\n${bench.name}`);
console.log('| chunker | GB/s | × fastcdc-rs wasm | chunks | mean size |');
console.log('|---|---:|---:|---:|---:|');
for (const [name] of cases) {
  console.log(`| ${name} | ${gbs[name].toFixed(2)} | ${(gbs[name] / baseline).toFixed(2)} | ${counts[name]} | ${Math.round(N / counts[name])} |`);
}
