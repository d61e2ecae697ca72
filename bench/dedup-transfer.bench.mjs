// The throughput cost of a dedup transfer on data with no duplicates, against a plain transfer of
// the same bytes over the same link, alternating in the same run. Both go over one rc QP pair of
// two devices (udp or tcp on 127.0.0.1) through the same QpLink (src/dedup/qp-link.ts):
//   plain: stage the object in registered memory, RDMA WRITE all of it (1 MiB writes) into a
//          registered region of the receiver, copy it out to a Uint8Array there;
//   dedup: DedupSender.send / DedupReceiver: chunk (FastCDC) + XXH3-128 on the sender, OFFER
//          pages, NEED, every chunk RDMA-written into landing-zone slots, verified, copied into
//          the target and the store, delivered as a Uint8Array.
// Every object is fresh random bytes, so the receiver's store never holds a chunk (the worst case
// for dedup: all of its work, none of its saving). Also: the sender's chunk + hash pass alone.
// Both devices live in this process (one event loop does the work of both ends, for both cases).
//
//   npx tsc -p tsconfig.build.json && node bench/dedup-transfer.bench.mjs
//   env: DEDUP_BENCH_MB (object size, default 64), DEDUP_BENCH_REPS (default 5),
//        DEDUP_BENCH_TRANSPORT (udp | tcp, default udp), DEDUP_BENCH_SLOTS (landing-zone slots of 2 MiB, default 8),
//        DEDUP_BENCH_POOL=1 (the sender chunks and hashes on a one-thread KernelPool over its device memory)
import { randomBytes } from 'node:crypto';
import { DedupReceiver, DedupSender } from '../dist/dedup/endpoint.js';
import { DeviceChunker } from '../dist/dedup/chunker.js';
import { ChunkHasher } from '../dist/dedup/hash.js';
import { dedupMemoryOf } from '../dist/dedup/memory.js';
import { QP_LINK_CQ_DEPTH, QpLink, qpLinkQpInit, regLandingZone } from '../dist/dedup/qp-link.js';
import { ChunkStore } from '../dist/dedup/store.js';
import { KernelPool } from '../dist/dataplane/pool.js';
import { Access, openDevice } from '../dist/index.js';

const MB = Number(process.env.DEDUP_BENCH_MB ?? 64);
const REPS = Number(process.env.DEDUP_BENCH_REPS ?? 5);
const TRANSPORT = process.env.DEDUP_BENCH_TRANSPORT ?? 'udp';
const N = MB << 20;
const SLOTS = Number(process.env.DEDUP_BENCH_SLOTS ?? 8);
const SLOT_LEN = 2 << 20; // a 16 MiB landing zone: 16 MiB in flight, as the plain case's 1 MiB writes posted at once allow

const opts = { transport: TRANSPORT, host: '127.0.0.1', port: 0, maximumMemoryBytes: 2 ** 31 };
const server = await openDevice(opts);
const client = await openDevice(opts);
const side = (dev) => {
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: QP_LINK_CQ_DEPTH });
  return { pd, cq, qp: pd.createQp({ type: 'rc', ...qpLinkQpInit(cq) }) };
};
const s = side(server);
const c = side(client);
const sLink = QpLink.open(s.qp, s.cq, s.pd);
const cLink = QpLink.open(c.qp, c.cq, c.pd);
await Promise.all([c.qp.connect({ address: server.address, qpn: s.qp.qpn }), s.qp.connect({ address: client.address, qpn: c.qp.qpn })]);

const sMem = dedupMemoryOf(s.pd);
const cMem = dedupMemoryOf(c.pd);
// The default 64 MiB store: fresh data never hits, every received chunk is inserted, and after
// the first objects each insert evicts (steady state: the store's memory is reused, not grown).
const store = new ChunkStore(sMem);
const zone = regLandingZone(s.pd, SLOTS, SLOT_LEN);
const rx = new DedupReceiver({ pipe: sLink, mem: sMem, store, scope: 'bench', zone: { addr: zone.addr, rkey: zone.rkey, length: zone.length }, slots: SLOTS, key: randomBytes(32), maxTotal: N });
const POOL = process.env.DEDUP_BENCH_POOL === '1';
const pool = POOL ? new KernelPool(cMem, { threads: 1 }) : undefined;
const tx = new DedupSender({ pipe: cLink, rdma: cLink, mem: cMem, ...(pool ? { pool } : {}) });
const hello = await tx.ready();
const target = s.pd.regMr(N, Access.LocalWrite | Access.RemoteWrite);

async function plain(bytes) {
  const src = cLink.stage(bytes);
  const pieces = [];
  for (let off = 0; off < bytes.length; off += 1 << 20) pieces.push({ src: src + off, len: Math.min(1 << 20, bytes.length - off), remoteAddr: target.addr + off });
  await cLink.write(pieces, target.rkey);
  return target.buffer.slice(0, bytes.length);
}

async function dedup(bytes) {
  const [, got] = await Promise.all([tx.send(bytes), rx.next()]);
  return got.bytes;
}

function chunkHashOnly(bytes) {
  const src = cLink.stage(bytes);
  const ch = new DeviceChunker(cMem, { avg: hello.avg, min: hello.min, max: hello.max, key: hello.key });
  const h = new ChunkHasher(cMem, 'xxh3-128', hello.seed);
  const lens = ch.chunkAll(src, bytes.length);
  h.hashRun(src, lens);
  ch.free();
  h.free();
}

const rows = { plain: [], dedup: [], chunkHash: [] };
// CPU time too: on a shared machine wall time swings with other load, CPU time per byte much
// less; both ends live in this process, so process CPU is the whole cost of a case.
const cpu = { plain: [], dedup: [], chunkHash: [] };
let lastCpu = 0;
const dgrams = { plain: [], dedup: [], chunkHash: [] };
let lastDgrams = 0;
const linkDatagrams = () => [server, client].reduce((a, d) => a + (d.stats().link?.txDatagrams ?? 0), 0);
const time = async (f) => {
  const d0 = linkDatagrams();
  const c0 = process.cpuUsage();
  const t = performance.now();
  await f();
  const c = process.cpuUsage(c0);
  lastCpu = (c.user + c.system) / 1e3 / MB; // CPU ms per MiB
  lastDgrams = (linkDatagrams() - d0) / MB; // datagrams per MiB, both directions (udp)
  return N / ((performance.now() - t) / 1e3) / 1e6; // MB/s
};
// Warm-up (JIT, memory growth), then alternate so drift hits both alike. The store is filled to
// its budget first: a long-lived store evicts and reuses its memory, while a young one grows into
// fresh pages, and first touch of a page costs ~5 ms/MiB on this VM (docs/bench/dedup.md).
await plain(new Uint8Array(randomBytes(N)));
for (let i = 0; i < 10 && store.stats().evictions === 0; i++) await dedup(new Uint8Array(randomBytes(N)));
for (let r = 0; r < REPS; r++) {
  const a = new Uint8Array(randomBytes(N));
  const b = new Uint8Array(randomBytes(N));
  // DEDUP_BENCH_ONLY=dedup (profiling aid): skip the plain case.
  if (process.env.DEDUP_BENCH_ONLY !== 'dedup') {
    rows.plain.push(await time(async () => {
      const got = await plain(a);
      if (Buffer.compare(got, a) !== 0) throw new Error('plain: bytes differ');
    }));
    cpu.plain.push(lastCpu);
    dgrams.plain.push(lastDgrams);
  }
  rows.dedup.push(await time(async () => {
    const got = await dedup(b);
    if (Buffer.compare(got, b) !== 0) throw new Error('dedup: bytes differ');
  }));
  cpu.dedup.push(lastCpu);
  dgrams.dedup.push(lastDgrams);
  rows.chunkHash.push(await time(() => chunkHashOnly(a)));
  cpu.chunkHash.push(lastCpu);
  dgrams.chunkHash.push(lastDgrams);
}
const med = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
console.log(`\ndedup transfer cost, no duplicates, ${TRANSPORT}${POOL ? ', sender chunk + hash on a pool thread' : ''}, ${MB} MiB objects, ${REPS} alternating runs (median; all runs in brackets)`);
console.log('| case | MB/s | × plain | CPU ms per MiB (both ends) | × plain |');
console.log('|---|---:|---:|---:|---:|');
const onlyDedup = rows.plain.length === 0;
if (onlyDedup) {
  // DEDUP_BENCH_ONLY=dedup: nothing to compare against; report the dedup runs alone.
  rows.plain.push(NaN);
  cpu.plain.push(NaN);
  dgrams.plain.push(NaN);
}
for (const [k, name] of [['plain', 'plain RDMA WRITE + copy out'], ['dedup', 'dedup transfer (chunk, hash, offer, write, verify, store, deliver)'], ['chunkHash', 'sender chunk + hash pass alone']]) {
  if (onlyDedup && k === 'plain') continue;
  console.log(`| ${name} | ${med(rows[k]).toFixed(0)} [${rows[k].map((x) => x.toFixed(0)).join(', ')}] | ${(med(rows[k]) / med(rows.plain)).toFixed(2)} | ${med(cpu[k]).toFixed(2)} [${cpu[k].map((x) => x.toFixed(2)).join(', ')}] | ${(med(cpu[k]) / med(cpu.plain)).toFixed(2)} |`);
}
if (TRANSPORT === 'udp') console.log(`datagrams per MiB (both ways, median): plain ${med(dgrams.plain).toFixed(1)}, dedup ${med(dgrams.dedup).toFixed(1)}`);
console.log(`cost of dedup on data with no duplicates: throughput ${((1 - med(rows.dedup) / med(rows.plain)) * 100).toFixed(1)}%, CPU ${((med(cpu.dedup) / med(cpu.plain) - 1) * 100).toFixed(1)}% (target ≤ 15%)`);
console.log('store', JSON.stringify(store.stats()));
rx.close();
tx.close();
await pool?.close();
sLink.close();
cLink.close();
await server.close();
await client.close();
