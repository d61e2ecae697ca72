// Several QPs between two processes against the number of NIC threads (openDevice `workers`):
// QPS rc QPs (default 4), each keeping DEPTH 64 KiB RdmaWrites in flight into one region of the
// target (which only has the region registered and its QPs connected), udp and tcp, the
// `workers` values alternated in the same run. Reports goodput (MB/s) and CPU per GB (user +
// system of both processes, all threads), and how the target's placed bytes split over its NIC
// threads (dev.nic.threads: each thread's own stats), which shows the QPs spread, and the
// requester's thread wake-ups per MB (dev.stats().nic, summed over its NIC threads).
// With workers n, QP q runs on NIC thread q mod n on both sides (docs/nic.md).
// Run: npm run build:ts && node bench/multi-qp.bench.mjs
//   (MQ_BYTES: bytes per case, default 256 MiB; MQ_QPS: default 4; MQ_WORKERS: default "1,2,4";
//    MQ_TRANSPORTS: default "udp,tcp"; MQ_REPS: alternations, default 3; MQ_DEPTH: default 32 per QP;
//    MQ_RAW: udp raw baselines in the same alternation, default "1,4": that many worker-thread
//    pairs of ack-clocked node:dgram, each sink copying every datagram into shared memory
//    (./lib/raw-pairs.mjs; 1 pair is single-socket node:dgram); "" for none)
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { forkPeer, isPeer, servePeer } from './lib/peer.mjs';
import { runSenders, startSinks } from './lib/raw-pairs.mjs';
import { keepFreedHeapMapped } from '../dist/core/heap-reuse.js';
import { Access, Opcode, openDevice } from '../dist/index.js';

await keepFreedHeapMapped();

const BYTES = Number(process.env.MQ_BYTES ?? 256 << 20);
const QPS = Number(process.env.MQ_QPS ?? 4);
const WORKERS = (process.env.MQ_WORKERS ?? '1,2,4').split(',').map(Number);
const TRANSPORTS = (process.env.MQ_TRANSPORTS ?? 'udp,tcp').split(',');
const REPS = Number(process.env.MQ_REPS ?? 3);
const DEPTH = Number(process.env.MQ_DEPTH ?? 32);
const RAW = (process.env.MQ_RAW ?? '1,4').split(',').filter((x) => x !== '').map(Number);
const MSG = 64 << 10;
const cpuSecs = (u) => (u.user + u.system) / 1e6;

async function side(transport, workers) {
  const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: QPS * (DEPTH + 8) });
  const mr = pd.regMr(MSG * QPS, Access.LocalWrite | Access.RemoteWrite);
  const qps = Array.from({ length: QPS }, () => pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: DEPTH, maxRecvWr: 4, maxSge: 1 }));
  return { dev, cq, mr, qps };
}

/** Bytes each NIC thread of `dev` placed (one entry with workers ≤ 1). */
function perThread(dev) {
  const t = dev.nic.threads;
  return t ? t.map((x) => x.stats(0).counters.directBytes) : [dev.stats().directBytes];
}

if (isPeer) {
  let s;
  let cpu0;
  let sinks;
  servePeer({
    async rawSinks({ n }) {
      sinks = await startSinks(n);
      return sinks.ports;
    },
    async rawClose() {
      return sinks.close();
    },
    async open({ transport, workers }) {
      s = await side(transport, workers);
      return { address: s.dev.address, qpns: s.qps.map((q) => q.qpn), addr: s.mr.addr, rkey: s.mr.rkey };
    },
    async connect({ address, qpns }) {
      await Promise.all(s.qps.map((q, i) => q.connect({ address, qpn: qpns[i], timeoutMs: 20_000 })));
      return null;
    },
    async begin() {
      cpu0 = process.cpuUsage();
      return s ? perThread(s.dev) : [];
    },
    async end() {
      return { cpu: cpuSecs(process.cpuUsage(cpu0)), placed: s ? perThread(s.dev) : [] };
    },
    async close() {
      await s.dev.close();
      s = undefined;
      return null;
    },
  });
} else {
  const { call, child } = forkPeer(fileURLToPath(import.meta.url));
  const rows = [];
  const raws = [];
  for (let rep = 0; rep < REPS; rep++) {
    if (TRANSPORTS.includes('udp')) {
      for (const n of RAW) {
        const ports = await call('rawSinks', { n });
        await call('begin');
        const cpu0 = process.cpuUsage();
        const r = await runSenders(ports, Math.ceil(BYTES / n));
        const mine = cpuSecs(process.cpuUsage(cpu0));
        const theirs = await call('end');
        const bytes = await call('rawClose');
        const row = { rep, n, mbps: bytes / r.secs / 1e6, cpuPerGb: (mine + theirs.cpu) / (bytes / 1e9), lost: 1 - bytes / r.bytes };
        raws.push(row);
        console.log(`udp raw node:dgram, ${n} worker-thread pair${n > 1 ? 's' : ''} rep ${rep}: ${row.mbps.toFixed(0)} MB/s, ${row.cpuPerGb.toFixed(2)} CPU s/GB${row.lost > 0 ? `, ${(row.lost * 100).toFixed(2)} % lost` : ''}`);
      }
    }
    for (const transport of TRANSPORTS) {
      for (const workers of WORKERS) {
        const t = await call('open', { transport, workers });
        const s = await side(transport, workers);
        await Promise.all([
          ...s.qps.map((q, i) => q.connect({ address: t.address, qpn: t.qpns[i], timeoutMs: 20_000 })),
          call('connect', { address: s.dev.address, qpns: s.qps.map((q) => q.qpn) }),
        ]);
        const per = Math.ceil(BYTES / MSG / QPS);
        const post = (q, i) => q.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: s.mr.addr, length: MSG, lkey: s.mr.lkey }], remoteAddr: t.addr + i * MSG, rkey: t.rkey });
        // Warm-up: a few writes per QP.
        s.qps.forEach((q, i) => { for (let k = 0; k < 4; k++) post(q, i); });
        for (let got = 0; got < 4 * QPS; ) { await s.cq.wait(20_000); got += s.cq.poll(64).length; }
        const before = await call('begin');
        const nic0 = s.dev.stats().nic;
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        const left = s.qps.map(() => per);
        s.qps.forEach((q, i) => { for (let k = 0; k < DEPTH && left[i] > 0; k++, left[i]--) post(q, i); });
        let done = 0;
        while (done < per * QPS) {
          await s.cq.wait(20_000);
          for (const w of s.cq.poll(256)) {
            if (w.status !== 0) throw new Error(`write failed: status ${w.status}`);
            done++;
            const i = w.wrId;
            if (left[i] > 0) { left[i]--; post(s.qps[i], i); }
          }
        }
        const secs = (performance.now() - t0) / 1000;
        const nic1 = s.dev.stats().nic;
        const mine = cpuSecs(process.cpuUsage(cpu0));
        const theirs = await call('end');
        const bytes = per * QPS * MSG;
        const split = theirs.placed.map((x, i) => ((x - (before[i] ?? 0)) / bytes).toFixed(2)).join('/');
        // The requester's thread wake-ups per MB: its NIC threads woken by a post, its own thread by completions.
        const wakes = ((nic1.wakes - nic0.wakes) / (bytes / 1e6)).toFixed(2);
        const appWakes = ((nic1.appWakes - nic0.appWakes) / (bytes / 1e6)).toFixed(2);
        const row = { rep, transport, workers, mbps: bytes / secs / 1e6, cpuPerGb: (mine + theirs.cpu) / (bytes / 1e9), split, wakes, appWakes };
        rows.push(row);
        console.log(`${transport} workers ${workers} rep ${rep}: ${row.mbps.toFixed(0)} MB/s, ${row.cpuPerGb.toFixed(2)} CPU s/GB, target placed per thread ${split}, requester wake-ups/MB: NIC threads ${wakes}, app ${appWakes}`);
        await call('close');
        await s.dev.close();
      }
    }
  }
  console.log('\nmedians (min-max) over reps:');
  const med = (a) => { const b = [...a].sort((x, y) => x - y); return b[Math.floor(b.length / 2)]; };
  const rawMed = new Map(RAW.map((n) => [n, med(raws.filter((x) => x.n === n).map((x) => x.mbps))]));
  for (const n of RAW) {
    const r = raws.filter((x) => x.n === n);
    const m = r.map((x) => x.mbps);
    const c = r.map((x) => x.cpuPerGb);
    console.log(`udp raw ${n} pair${n > 1 ? 's' : ''}: ${med(m).toFixed(0)} MB/s (${Math.min(...m).toFixed(0)}-${Math.max(...m).toFixed(0)}), ${med(c).toFixed(2)} CPU s/GB (${Math.min(...c).toFixed(2)}-${Math.max(...c).toFixed(2)})`);
  }
  for (const transport of TRANSPORTS) for (const workers of WORKERS) {
    const r = rows.filter((x) => x.transport === transport && x.workers === workers);
    const m = r.map((x) => x.mbps);
    const c = r.map((x) => x.cpuPerGb);
    // Same-run ratios against each raw case (medians over reps), udp only.
    const vs = transport === 'udp' ? RAW.map((n) => `, ${(med(m) / rawMed.get(n)).toFixed(2)}× raw ${n} pair${n > 1 ? 's' : ''}`).join('') : '';
    console.log(`${transport} workers ${workers}: ${med(m).toFixed(0)} MB/s (${Math.min(...m).toFixed(0)}-${Math.max(...m).toFixed(0)})${vs}, ${med(c).toFixed(2)} CPU s/GB (${Math.min(...c).toFixed(2)}-${Math.max(...c).toFixed(2)}), split ${r[0].split}`);
  }
  child.kill();
}
