// XXH3-128 throughput, one core: sabre's WASM kernel on bytes already in shared memory (the
// device data path) against hash-wasm's xxhash128 (the baseline; hasher created once, then
// init/update/digest per hash) and native @node-rs/xxhash, each on the same bytes. Also the
// streaming kernel fed packet-sized updates (mechanism M4: a chunk hashed as its packets land)
// and the user-facing sabre/kernels xxh128(Uint8Array) (copy into scratch + kernel).
// Run `npx tsc -p tsconfig.build.json` and `npx asc assembly/index.ts --target release` first.
import { xxh3 } from '@node-rs/xxhash';
import { createXXHash128 } from 'hash-wasm';
import { Bench } from 'tinybench';
import { createSharedMemory, instantiateKernels } from '../dist/dataplane/wasm.js';
import { xxh128 as userXxh128 } from '../dist/kernels/xxh128.js';

const SIZES = [1024, 64 * 1024, 1024 * 1024];
const PACKET = 1460; // a TCP MSS worth of payload per streaming update
const memory = createSharedMemory(64, 64); // 4 MiB
const k = await instantiateKernels(memory);
const u8 = new Uint8Array(memory.buffer);
const view = new DataView(memory.buffer);
const base = Math.ceil(Number(k.heapBase()) / 64) * 64;
const OUT = base;
const STATE = base + 64;
const DATA = base + 4096;
const hw = await createXXHash128();
const hashWasm = (buf) => {
  hw.init();
  hw.update(buf);
  return hw.digest('binary');
};
const result = () => (view.getBigUint64(OUT + 8, true) << 64n) | view.getBigUint64(OUT, true);

let seed = 0x9e3779b9;
for (let i = 0; i < 2 * 1024 * 1024; i++) {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  u8[DATA + i] = seed & 0xff;
}

function streamPackets(size) {
  k.xxh128Reset(STATE, 0n);
  for (let off = 0; off < size; off += PACKET) k.xxh128Update(STATE, DATA + off, Math.min(PACKET, size - off));
  k.xxh128Digest(STATE, OUT);
}

const rows = [];
for (const size of SIZES) {
  const buf = Buffer.from(u8.subarray(DATA, DATA + size)); // the same bytes, in ordinary memory
  const want = xxh3.xxh128(buf);
  k.xxh128(DATA, size, 0n, OUT);
  const fromKernel = result();
  streamPackets(size);
  const fromStream = result();
  const fromHashWasm = BigInt('0x' + Buffer.from(hashWasm(buf)).toString('hex'));
  for (const got of [fromKernel, fromStream, fromHashWasm, userXxh128(buf)]) {
    if (got !== want) throw new Error(`XXH128 mismatch at ${size}: ${got.toString(16)} vs ${want.toString(16)}`);
  }

  // Repeat small inputs inside one sample so each sample is well above the timer's resolution.
  const reps = Math.max(1, (256 * 1024) / size);
  const bench = new Bench({ name: `xxh128 ${size} B`, time: 700, warmupTime: 200 });
  const sink = { v: 0 };
  bench
    .add('sabre kernel (shared memory)', () => {
      for (let r = 0; r < reps; r++) k.xxh128(DATA, size, 0n, OUT);
    })
    .add(`sabre stream, ${PACKET} B updates`, () => {
      for (let r = 0; r < reps; r++) streamPackets(size);
    })
    .add('hash-wasm xxhash128', () => {
      for (let r = 0; r < reps; r++) sink.v ^= hashWasm(buf)[0];
    })
    .add('@node-rs/xxhash (native)', () => {
      for (let r = 0; r < reps; r++) sink.v ^= Number(xxh3.xxh128(buf) & 0xffn);
    })
    .add('sabre xxh128(Uint8Array) (copy + kernel)', () => {
      for (let r = 0; r < reps; r++) sink.v ^= Number(userXxh128(buf) & 0xffn);
    });
  await bench.run();
  const gbs = {};
  for (const t of bench.tasks) {
    const r = t.result;
    if (r.state !== 'completed') throw new Error(`${t.name}: ${r.state} ${r.error ?? ''}`);
    gbs[t.name] = (reps * size) / (r.latency.p50 * 1e6);
  }
  const baseline = gbs['hash-wasm xxhash128'];
  for (const [name, v] of Object.entries(gbs)) {
    rows.push({ size, impl: name, 'GB/s': v.toFixed(2), '÷ hash-wasm': (v / baseline).toFixed(2) });
  }
}
console.table(rows);
