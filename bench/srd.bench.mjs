// srd (M5: reliable datagrams, no connection) between two processes on 127.0.0.1: Sends of
// 64 B and 4 KiB from one srd QP to another, 32 in flight, the receiver keeping receives posted
// ahead (as perftest's rx depth) and posting each again as it completes; against raw
// node:dgram datagrams of the same size between the same two processes in the same run,
// ack-clocked so the receiver is never overrun (src/cli/baseline/raw-dgram.ts, the baseline of
// udp-rdma.bench.mjs and `sabre perf --baseline`). Messages per second, MB/s and CPU per GB of
// both processes (user + system, every thread). Each Send completes Success at the sender only
// once placed into a receive at the peer; a failed one ends the run.
// A plain timed script: a streaming transfer does not fit tinybench's per-iteration model.
// Run: npm run build:ts && node bench/srd.bench.mjs
//   SRD_MSGS: Sends per size (default 50000); SRD_SIZES: sizes in bytes (default "64,4096");
//   SRD_WORKERS: NIC threads of both devices (default 1; 0 runs the data path inline).
import { fileURLToPath } from 'node:url';
import { keepInFlight } from './lib/in-flight.mjs';
import { forkPeer, rawSinkOps, servePeer } from './lib/peer.mjs';
import { Access, Opcode, openDevice, WcStatus } from '../dist/index.js';
import { RawDgramSink, sendRawDgram } from '../dist/cli/baseline/raw-dgram.js';
import { keepFreedHeapMapped } from '../dist/core/heap-reuse.js';

// Baselines and sabre under the same malloc thresholds in both processes (udp-rdma.bench.mjs).
await keepFreedHeapMapped();

const MSGS = Number(process.env.SRD_MSGS ?? 50_000);
const SIZES = (process.env.SRD_SIZES ?? '64,4096').split(',').map(Number);
const WORKERS = Number(process.env.SRD_WORKERS ?? 1);
const WINDOW = 32;
const RX_DEPTH = 512;
const SLOT = 4096;

/** An srd QP on a fresh udp device, with a CQ and one region of `slots` slots. */
async function srdSide(slots) {
  const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: WORKERS });
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 1 << 14 });
  // RNR retries as perftest's rnr_retry 7 (ibverbs: for ever): a receiver whose thread is late
  // reposting (a busy machine) makes Sends wait, not fail (sabre's default is 7 retries of 1 ms).
  const qp = pd.createQp({ type: 'srd', sendCq: cq, recvCq: cq, maxSendWr: 4096, maxRecvWr: 4096, maxSge: 1, rnrRetry: 1000 });
  const mr = pd.regMr(slots * SLOT, Access.LocalWrite);
  return { dev, pd, cq, qp, mr };
}

if (process.argv[2] === '--peer') {
  let side;
  let got = 0;
  const ops = {
    /** The receiving srd QP: RX_DEPTH receives posted, each posted again as it completes. */
    async open() {
      got = 0;
      side = await srdSide(RX_DEPTH);
      const { qp, cq, mr } = side;
      const post = (i) => qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + i * SLOT, length: SLOT, lkey: mr.lkey }] });
      for (let i = 0; i < RX_DEPTH; i++) post(i);
      side.running = true;
      (async () => {
        while (side?.running) {
          await cq.wait(1000).catch(() => {});
          for (const w of cq.poll(256)) {
            if (w.status !== WcStatus.Success) continue;
            got++;
            post(Number(w.wrId));
          }
        }
      })();
      return { address: side.dev.address, qpn: qp.qpn };
    },
    /** Once `expect` receives completed (their completions may trail the sender's), or 5 s. */
    async close({ expect }) {
      for (let t = 0; got < expect && t < 500; t++) await new Promise((r) => setTimeout(r, 10));
      side.running = false;
      await side.dev.close();
      side = undefined;
      return got;
    },
    cpu() {
      return process.cpuUsage();
    },
    ...rawSinkOps(RawDgramSink),
    exit() {
      setImmediate(() => process.exit(0));
    },
  };
  servePeer(ops);
} else {
  const { call } = forkPeer(fileURLToPath(import.meta.url));
  const cpuSince = async (c0, p0) => {
    const c = process.cpuUsage(c0);
    const p1 = await call('cpu');
    return c.user + c.system + (p1.user - p0.user) + (p1.system - p0.system);
  };

  async function raw(size) {
    const { port, rcvbuf } = await call('sinkOpen');
    const c0 = process.cpuUsage();
    const p0 = await call('cpu');
    const t0 = performance.now();
    const r = await sendRawDgram({ host: '127.0.0.1', port, rcvbuf, size, messages: MSGS });
    const secs = (r.completed[r.acked - 1] - t0) / 1000;
    const cpu = await cpuSince(c0, p0);
    const st = await call('sinkClose');
    return { perSec: st.datagrams / secs, mbps: st.bytes / secs / 1e6, cpuPerGB: cpu / 1e6 / (st.bytes / 1e9), lossPct: 100 * (1 - st.datagrams / r.datagrams) };
  }

  async function srd(size) {
    const peer = await call('open');
    const me = await srdSide(WINDOW);
    me.mr.buffer.fill(0x5a);
    const ah = me.pd.createAh({ address: peer.address });
    const post = (i) => {
      const slot = i % WINDOW;
      me.qp.postSend({ wrId: i, opcode: Opcode.Send, sgList: [{ addr: me.mr.addr + slot * SLOT, length: size, lkey: me.mr.lkey }], ah, remoteQpn: peer.qpn });
    };
    const c0 = process.cpuUsage();
    const p0 = await call('cpu');
    const t0 = performance.now();
    await keepInFlight(me.cq, MSGS, WINDOW, post, 'Send');
    const secs = (performance.now() - t0) / 1000;
    const cpu = await cpuSince(c0, p0);
    const received = await call('close', { expect: MSGS });
    await me.dev.close();
    if (received !== MSGS) throw new Error(`the peer received ${received} of ${MSGS}`);
    return { perSec: MSGS / secs, mbps: (MSGS * size) / secs / 1e6, cpuPerGB: cpu / 1e6 / ((MSGS * size) / 1e9) };
  }

  const r2 = (x) => Math.round(x * 100) / 100;
  for (const size of SIZES) {
    const b = await raw(size);
    const s = await srd(size);
    console.log(`${size} B, ${MSGS} messages, workers ${WORKERS}:`);
    console.log(`  raw node:dgram (ack-clocked)  ${Math.round(b.perSec)} msg/s  ${r2(b.mbps)} MB/s  ${r2(b.cpuPerGB)} s/GB  loss ${r2(b.lossPct)} %`);
    console.log(`  srd Send, ${WINDOW} in flight     ${Math.round(s.perSec)} msg/s  ${r2(s.mbps)} MB/s  ${r2(s.cpuPerGB)} s/GB`);
    console.log(`  ratio: rate ${r2(s.perSec / b.perSec)}×, CPU per GB ${r2(s.cpuPerGB / b.cpuPerGB)}×`);
  }
  await call('exit').catch(() => {});
  process.exit(0);
}
