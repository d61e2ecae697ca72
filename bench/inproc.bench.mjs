// inproc verbs benchmarks: what the engine costs on top of the bytes it moves.
//  1. 64 KiB RdmaWrite goodput (post 64, await all completions) vs Uint8Array.set of the same
//     bytes between the same two device memories (the copy an in-process transfer cannot avoid).
//  2. 64 B RdmaWrite: post → completion latency (one in flight) and operation rate (256 pipelined).
//  3. Direct (device-memory region, WASM place()) vs indirect (external Uint8Array region,
//     TypeScript copy) placement throughput, 64 KiB writes.
// Run: npx tsc -p tsconfig.build.json && node bench/inproc.bench.mjs
import { Bench } from 'tinybench';
import { Access, Opcode, WcStatus, openDevice } from '../dist/index.js';

const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;
const BIG = 64 * 1024;
const BATCH = 64;

async function side() {
  const dev = await openDevice({ transport: 'inproc', memoryBytes: 64 << 20 });
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 4096 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1024, maxRecvWr: 16, maxSge: 4 });
  return { dev, pd, cq, qp };
}
const a = await side();
const b = await side();
await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);

const src = a.pd.regMr(BATCH * BIG, ALL);
const dst = b.pd.regMr(BATCH * BIG, ALL);
const extBuf = new Uint8Array(BATCH * BIG);
const ext = b.pd.regMr(extBuf, ALL);
for (let i = 0; i < src.length; i++) src.buffer[i] = (i * 2654435761) >>> 24;

let wrId = 0;
let posted = 0;
let completed = 0;
// Completions are counted globally, so overlapping calls (tinybench probes a task once to see
// whether it is async) each wait for their own cumulative target rather than stealing.
async function writes(target, size, n, skew = 0) {
  for (let i = 0; i < n; i++) {
    a.qp.postSend({
      wrId: wrId++, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + skew + i * size, length: size, lkey: src.lkey }],
      remoteAddr: target.addr + i * size, rkey: target.rkey,
    });
  }
  posted += n;
  const want = posted;
  while (completed < want) {
    const w = a.cq.poll(256);
    for (const c of w) if (c.status !== WcStatus.Success) throw new Error(`completion status ${c.status}`);
    completed += w.length;
    if (completed < want) await a.cq.wait();
  }
}

// Correctness first: the bench must move the right bytes.
await writes(dst, BIG, BATCH);
if (!Buffer.from(dst.buffer).equals(Buffer.from(src.buffer))) throw new Error('direct write bytes differ');
await writes(ext, BIG, BATCH);
if (!Buffer.from(extBuf).equals(Buffer.from(src.buffer))) throw new Error('indirect write bytes differ');

const srcView = src.buffer;
const dstView = dst.buffer;
const bench = new Bench({ name: 'inproc', time: 1500, warmupTime: 300 });
bench
  .add(`Uint8Array.set 64 x 64 KiB (baseline)`, () => {
    for (let i = 0; i < BATCH; i++) dstView.set(srcView.subarray(i * BIG, (i + 1) * BIG), i * BIG);
  })
  .add(`RdmaWrite 64 x 64 KiB, direct (device memory)`, async () => writes(dst, BIG, BATCH))
  .add(`RdmaWrite 64 x 64 KiB, indirect (external Uint8Array)`, async () => writes(ext, BIG, BATCH))
  // The source 3 bytes off its target's alignment: staged (V8 copies into shared memory word
  // by word only between equally aligned addresses; src/rdmap/placement.ts).
  .add(`RdmaWrite 63 x 64 KiB, direct, source 3 bytes off alignment`, async () => writes(dst, BIG, BATCH - 1, 3))
  .add(`RdmaWrite 64 B, one in flight (latency)`, async () => writes(dst, 64, 1))
  .add(`RdmaWrite 64 B x 256 pipelined (rate)`, async () => writes(dst, 64, 256));
await bench.run();

const r = Object.fromEntries(bench.tasks.map((t) => {
  if (t.result.state !== 'completed') throw new Error(`${t.name}: ${t.result.state} ${t.result.error ?? ''}`);
  return [t.name, t.result];
}));
const names = bench.tasks.map((t) => t.name);
const gbs = (name, bytes) => bytes / (r[name].latency.p50 * 1e6);
const total = BATCH * BIG;
const base = gbs(names[0], total);
const direct = gbs(names[1], total);
const indirect = gbs(names[2], total);
const skewed = gbs(names[3], (BATCH - 1) * BIG);
const lat = r[names[4]].latency;
const rate = 256 / (r[names[5]].latency.p50 / 1000);
const rows = [
  { case: names[0], 'GB/s (p50)': base.toFixed(2), 'vs set': '1.00' },
  { case: names[1], 'GB/s (p50)': direct.toFixed(2), 'vs set': (direct / base).toFixed(2) },
  { case: names[2], 'GB/s (p50)': indirect.toFixed(2), 'vs set': (indirect / base).toFixed(2) },
  { case: names[3], 'GB/s (p50)': skewed.toFixed(2), 'vs set': (skewed / base).toFixed(2) },
];
console.table(rows);
console.log(`direct / indirect placement: ${(direct / indirect).toFixed(2)}x`);
console.log(`64 B RdmaWrite post→completion: p50 ${(lat.p50 * 1000).toFixed(1)} µs, p99 ${(lat.p99 * 1000).toFixed(1)} µs`);
console.log(`64 B RdmaWrite rate (256 in flight): ${(rate / 1000).toFixed(0)} k ops/s`);
const st = b.dev.stats();
console.log(`responder counters: direct ${st.directSegments} segs / ${(st.directBytes / 2 ** 20).toFixed(0)} MiB, indirect ${st.indirectSegments} segs / ${(st.indirectBytes / 2 ** 20).toFixed(0)} MiB, place() batches ${st.placeBatches}`);
await a.dev.close();
await b.dev.close();
