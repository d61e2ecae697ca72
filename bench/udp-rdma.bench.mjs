// sabre RDMA over UDP between two processes on 127.0.0.1, against raw node:dgram between the
// same two processes in the same run:
//   1. 64 KiB RdmaWrite goodput (a window of writes in flight, each completion = placed at the
//      responder) vs raw node:dgram moving the same bytes ack-clocked (issue #18: a window sized
//      from the receiver's socket buffer, an ack every few datagrams, so the receiver is never
//      overrun; src/cli/baseline/raw-dgram.ts, shared with `sabre perf --baseline`), with its
//      loss; both with CPU per GB moved (user + system of both processes, all threads);
//   2. 64 B message rate: RdmaWrite with 32 in flight vs raw 64 B datagrams, ack-clocked the same
//      way (UDP_RDMA_RATE_MSGS each, default 100000);
//   3. 64 B round trips: RdmaWriteWithImm ping-pong and RdmaRead vs a raw dgram ping-pong (p50);
//   4. 64 KiB RdmaWrite goodput under 1% and 5% receive-side loss (seeded drop hook on the
//      responder's socket) as a fraction of lossless;
//   5. the same goodput with the CRC32C on 1 and 2 data-plane workers per device
//      (UDP_RDMA_WORKERS, default "1,2") as a fraction of inline (integrity crc32c: the workers
//      only ever compute CRCs).
//   6. case 1 again (raw, then integrity none and xxh3) with both processes holding a
//      service-sized live heap (UDP_RDMA_HEAP_MB, default 32; 0 skips it): a bench process's
//      ~9 MiB heap makes V8 run a full collection every ~30 ms at the receiver
//      (bench/lib/service-heap.mjs); an embedding service's larger heap does not.
// Integrity (docs/integrity.md): case 1 runs once per mode in UDP_RDMA_INTEGRITY (default
// "none,xxh3,crc32c", both devices asking the same); the other cases use the first of them
// that is xxh3 (the default), else the first.
// A plain timed script: a streaming transfer does not fit tinybench's per-iteration model.
// Run: npx tsc -p tsconfig.build.json && node bench/udp-rdma.bench.mjs
//   (UDP_RDMA_BYTES: bytes per goodput case, default 1 GiB; UDP_RDMA_RTTS: round trips, 4000, after UDP_RDMA_WARM untimed ones, 6000;
//   profiling aids: UDP_RDMA_CASES=bwonly | latonly runs one part and prints link counters and
//   CPU per round trip; UDP_RDMA_PROBE=1 samples the requester's transport context every 2 ms)
import dgram from 'node:dgram';
import { fileURLToPath } from 'node:url';
import { forkPeer, pong, rawSinkOps, servePeer } from './lib/peer.mjs';
import { holdServiceHeapBoth, serviceHeapOps } from './lib/service-heap.mjs';
import { DeviceMemory } from '../dist/dataplane/device-memory.js';
import { DataPlaneWorkers } from '../dist/dataplane/workers.js';
import { Access, Opcode, WcStatus } from '../dist/index.js';
import { keepInFlight } from './lib/in-flight.mjs';
import { RawDgramSink, sendRawDgram } from '../dist/cli/baseline/raw-dgram.js';
import { UdpLink } from '../dist/transport/udp/link.js';
import { Device } from '../dist/verbs/device.js';
import { keepFreedHeapMapped } from '../dist/core/heap-reuse.js';

// Baselines and sabre under the same malloc thresholds in both processes, whichever case runs
// first (sabre's links raise them after 16 MiB received: src/core/heap-reuse.ts).
await keepFreedHeapMapped();

const BYTES = Number(process.env.UDP_RDMA_BYTES ?? 1024 << 20);
const RTTS = Number(process.env.UDP_RDMA_RTTS ?? 4000);
const WARM = Number(process.env.UDP_RDMA_WARM ?? 6000);
const MSG = 64 << 10;
const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic;
const MTU = Number(process.env.UDP_RDMA_MTU ?? 65000);
const RATE_MSGS = Number(process.env.UDP_RDMA_RATE_MSGS ?? 100_000);
const MODES = (process.env.UDP_RDMA_INTEGRITY ?? 'none,xxh3,crc32c').split(',').filter(Boolean);
const MAIN_MODE = MODES.includes('xxh3') ? 'xxh3' : MODES[0];
const HEAP_MB = Number(process.env.UDP_RDMA_HEAP_MB ?? 32);

/** A device from its parts exactly as openDevice builds it, plus a bench-only receive filter (loss). */
async function openUdp(loss = 0, seed = 12345, workers = 0, integrity = MAIN_MODE) {
  let s = seed;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 4294967296);
  const mem = await DeviceMemory.create({ maximumBytes: 1 << 30, workerSlots: workers });
  const t = await UdpLink.open({
    host: '127.0.0.1', port: 0, mtu: MTU, deviceMemory: mem, integrity, ...(loss > 0 ? { rxFilter: () => rnd() >= loss } : {}),
    ...(workers > 0 ? { workers: await DataPlaneWorkers.start(mem, workers) } : {}),
  });
  const dev = new Device(mem, t, { mss: t.mss });
  return { dev, t };
}

function rcSide(dev) {
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 1 << 14 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4096, maxRecvWr: 4096, maxSge: 4 });
  return { pd, cq, qp };
}

async function drain(cq, n) {
  const out = [];
  while (out.length < n) {
    await cq.wait(30_000);
    for (const w of cq.poll(n - out.length)) {
      if (w.status !== WcStatus.Success) throw new Error(`completion ${w.wrId} failed: status ${w.status}`);
      out.push(w);
    }
  }
  return out;
}

if (process.argv[2] === '--peer') {
  let side;
  let raw;
  const ops = {
    async open({ loss, workers, integrity }) {
      if (side) await side.dev.close();
      const { dev, t } = await openUdp(loss, 12345, workers, integrity);
      side = { dev, t, ...rcSide(dev) };
      side.mr = side.pd.regMr(MSG * 64, ALL);
      return { address: dev.address, qpn: side.qp.qpn, addr: side.mr.addr, rkey: side.mr.rkey };
    },
    async connect({ address, qpn }) {
      await side.qp.connect({ address, qpn });
    },
    pong({ n }) {
      pong(side, n, Opcode);
      return true;
    },
    peerMr({ addr, rkey }) {
      side.peerAddr = addr;
      side.peerRkey = rkey;
    },
    stats() {
      const c = side.t.udp.endpoint.counters;
      return { rx: c.rxDatagrams, tx: c.txDatagrams, badCrc: c.badCrc, badHash: c.badHash, link: side.t.stats(), cpu: process.cpuUsage() };
    },
    cpu() {
      return process.cpuUsage();
    },
    ...serviceHeapOps,
    /** The ack-clocked raw baseline's receiving end. */
    ...rawSinkOps(RawDgramSink),
    /** The raw ping-pong's echo socket. */
    async raw() {
      raw = dgram.createSocket('udp4');
      raw.on('message', (msg, rinfo) => raw.send(msg, rinfo.port, rinfo.address));
      await new Promise((r) => raw.bind(0, '127.0.0.1', r));
      return raw.address().port;
    },
    rawReport() {
      raw.close();
    },
    exit() {
      setImmediate(() => process.exit(0));
    },
  };
  servePeer(ops);
} else {
  const { call, child } = forkPeer(fileURLToPath(import.meta.url));
  // The peer exits by itself after 'exit' (a --cpu-prof profile of it is written then; the
  // kill on our own exit would lose it).
  const peerExit = async () => {
    const gone = new Promise((r) => child.once('exit', r));
    await call('exit').catch(() => {});
    await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
  };

  /** User + system µs of both processes (this one and the peer, every thread) since `c0`/`p0`. */
  const cpuSince = async (c0, p0) => {
    const c = process.cpuUsage(c0);
    const p1 = await call('cpu');
    return c.user + c.system + (p1.user - p0.user) + (p1.system - p0.system);
  };
  const secPerGB = (cpuUs, bytes) => cpuUs / 1e6 / (bytes / 1e9);

  /**
   * Raw node:dgram moving `n` datagrams of `size` bytes, ack-clocked so the receiver is never
   * overrun (window from its socket buffer, an ack every few datagrams): the path, not its
   * collapse. Loss is what the sink did not count; CPU is both processes'.
   */
  async function rawAckClocked(size = MTU - 76, n = Math.ceil(BYTES / size)) {
    const { port, rcvbuf } = await call('sinkOpen');
    const c0 = process.cpuUsage();
    const p0 = await call('cpu');
    const t0 = performance.now();
    const r = await sendRawDgram({ host: '127.0.0.1', port, rcvbuf, size, messages: n });
    const secs = (r.completed[r.acked - 1] - t0) / 1000;
    const cpu = await cpuSince(c0, p0);
    const st = await call('sinkClose');
    return {
      mbps: st.bytes / secs / 1e6, perSec: st.datagrams / secs, lossPct: 100 * (1 - st.datagrams / r.datagrams),
      cpuPerGB: secPerGB(cpu, st.bytes), window: r.window, ackEvery: r.ackEvery,
    };
  }

  async function rawPingPong() {
    const port = await call('raw');
    const s = dgram.createSocket('udp4');
    await new Promise((r) => s.bind(0, '127.0.0.1', r));
    s.connect(port, '127.0.0.1');
    await new Promise((r) => s.once('connect', r));
    const buf = new Uint8Array(64);
    const lat = [];
    let t0 = 0;
    let n = 0;
    await new Promise((resolve) => {
      s.on('message', () => {
        if (n++ >= WARM) lat.push(performance.now() - t0);
        if (lat.length === RTTS) return resolve();
        t0 = performance.now();
        s.send(buf);
      });
      t0 = performance.now();
      s.send(buf);
    });
    await call('rawReport');
    s.close();
    return lat;
  }

  /** A fresh pair: our device and the child's, rc-connected; returns our side + the peer's MR. */
  async function rdmaPair(loss, workers = 0, integrity = MAIN_MODE) {
    const p = await call('open', { loss, workers, integrity });
    const { dev, t } = await openUdp(0, 777, workers, integrity);
    const me = { dev, t, ...rcSide(dev) };
    await Promise.all([me.qp.connect({ address: p.address, qpn: p.qpn }), call('connect', { address: dev.address, qpn: me.qp.qpn })]);
    me.src = me.pd.regMr(MSG * 64, ALL);
    me.src.buffer.fill(0x5a);
    return { me, p };
  }

  async function writeGoodput(loss, bytes = BYTES, workers = 0, msg = MSG, integrity = workers > 0 ? 'crc32c' : MAIN_MODE) {
    const { me, p } = await rdmaPair(loss, workers, integrity);
    const settled = me.t.udp.endpoint.integrityOf({ host: p.address.host, port: p.address.port });
    const n = Math.ceil(bytes / msg);
    const WINDOW = 32;
    const count = { posted: 0, done: 0 };
    const post = (i) => {
      const slot = i % 64;
      me.qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: me.src.addr + slot * MSG, length: msg, lkey: me.src.lkey }], remoteAddr: p.addr + slot * MSG, rkey: p.rkey });
    };
    const c0 = process.cpuUsage();
    const p0 = await call('cpu');
    const t0 = performance.now();
    let probe;
    if (process.env.UDP_RDMA_PROBE) {
      const c = me.t.udp.endpoint.context({ host: p.address.host, port: p.address.port });
      const samples = [];
      probe = setInterval(() => samples.push({ t: (performance.now() - t0).toFixed(1), inflightWr: count.posted - count.done, ...c.stats, q: c.outstanding }), 2);
      probe.samples = samples;
    }
    await keepInFlight(me.cq, n, WINDOW, post, 'write', count);
    const secs = (performance.now() - t0) / 1000;
    const cpuPerGB = secPerGB(await cpuSince(c0, p0), n * msg);
    if (probe) {
      clearInterval(probe);
      for (const x of probe.samples.slice(0, 80)) console.log(JSON.stringify(x, (k, v) => (typeof v === "number" ? Math.round(v * 100) / 100 : v)));
    }
    const ctx = me.t.udp.endpoint.context({ host: p.address.host, port: p.address.port })?.counters;
    const peer = await call('stats');
    const mine = me.t.stats();
    await me.dev.close();
    return { mbps: (n * msg) / secs / 1e6, perSec: n / secs, retx: ctx?.retransmits ?? 0, timeouts: ctx?.timeouts ?? 0, cpuPerGB, peer, me: mine, settled };
  }

  /**
   * WARM untimed round trips first, then RTTS timed ones (same for reads). Tier-up is per
   * function by invocation budget (V8's interrupt budget), and every function on this path runs
   * about once per round trip: the first ~3000 round trips run mostly unoptimised code at 5-10x
   * the steady cost (p50 per 1000: 713, 295, 161, 93 ... 65 µs). `cold` keeps the first 1000 of
   * the warm-up: what a fresh device sees.
   */
  async function rdmaLatency() {
    const { me, p } = await rdmaPair(0);
    const dst = me.pd.regMr(4096, ALL);
    await call('peerMr', { addr: dst.addr, rkey: dst.rkey });
    const total = WARM + RTTS;
    await call('pong', { n: total });
    const wlat = [];
    const coldW = [];
    for (let i = 0; i < Math.min(total, 64); i++) me.qp.postRecv({ wrId: i, sgList: [] });
    let recvPosted = Math.min(total, 64);
    let cpu0;
    let peerCpu0;
    for (let i = 0; i < total; i++) {
      if (i === WARM) {
        cpu0 = process.cpuUsage();
        peerCpu0 = (await call('stats')).cpu;
      }
      const t0 = performance.now();
      me.qp.postSend({ wrId: i, opcode: Opcode.RdmaWriteWithImm, imm: i, signaled: false, sgList: [{ addr: me.src.addr, length: 64, lkey: me.src.lkey }], remoteAddr: p.addr, rkey: p.rkey });
      for (;;) {
        await me.cq.wait(10_000);
        const ws = me.cq.poll(4);
        if (ws.some((w) => w.imm !== undefined)) break;
      }
      const dt = performance.now() - t0;
      if (i >= WARM) wlat.push(dt);
      else if (i < 1000) coldW.push(dt);
      if (recvPosted < total) me.qp.postRecv({ wrId: recvPosted++, sgList: [] });
    }
    const cpu1 = process.cpuUsage(cpu0);
    const peerCpu1 = (await call('stats')).cpu;
    const cpuPerPing = { me: (cpu1.user + cpu1.system) / RTTS, peer: (peerCpu1.user + peerCpu1.system - peerCpu0.user - peerCpu0.system) / RTTS };
    const rlat = [];
    const coldR = [];
    for (let i = 0; i < total; i++) {
      const t0 = performance.now();
      me.qp.postSend({ wrId: i, opcode: Opcode.RdmaRead, sgList: [{ addr: dst.addr, length: 64, lkey: dst.lkey }], remoteAddr: p.addr, rkey: p.rkey });
      await drain(me.cq, 1);
      const dt = performance.now() - t0;
      if (i >= WARM) rlat.push(dt);
      else if (i < 1000) coldR.push(dt);
    }
    const c = me.t.udp.endpoint.counters;
    const stats = { cpuPerPing, me: { rx: c.rxDatagrams, tx: c.txDatagrams, flushes: me.t.udp.counters.flushes, link: me.t.counters }, peer: await call('stats') };
    await me.dev.close();
    return { wlat, rlat, coldW, coldR, stats };
  }

  const pct = (a, q) => [...a].sort((x, y) => x - y)[Math.floor(q * (a.length - 1))];
  const us = (ms) => (ms * 1000).toFixed(1);

  const rows = [];
  const CASES = new Set((process.env.UDP_RDMA_CASES ?? 'bw,lat,loss').split(','));
  // The profiling runs hold the service heap only when UDP_RDMA_HEAP_MB is given.
  if ((CASES.has('latonly') || CASES.has('bwonly')) && process.env.UDP_RDMA_HEAP_MB) await holdServiceHeapBoth(call, HEAP_MB);
  if (CASES.has('latonly')) {
    const rp = await rawPingPong();
    const { wlat, rlat, coldW, coldR, stats } = await rdmaLatency();
    const r50 = pct(rp, 0.5);
    console.log({ raw: us(r50), wimm: us(pct(wlat, 0.5)), read: us(pct(rlat, 0.5)), coldWimm: us(pct(coldW, 0.5)), coldRead: us(pct(coldR, 0.5)), stats });
    await peerExit();
    process.exit(0);
  }
  if (CASES.has('bwonly')) {
    await writeGoodput(0, 32 << 20);
    const w = await writeGoodput(0);
    console.log({ mbps: w.mbps.toFixed(0), retx: w.retx, cpuPerGB: w.cpuPerGB.toFixed(2), peer: w.peer, me: w.me });
    await peerExit();
    process.exit(0);
  }
  const cpuNote = (x, raw) => `CPU ${x.cpuPerGB.toFixed(2)} s/GB${raw ? ` (${(x.cpuPerGB / raw.cpuPerGB).toFixed(2)}× raw)` : ''}`;
  const raw = await rawAckClocked();
  rows.push({ case: `raw node:dgram, ${MTU - 76} B datagrams, ack-clocked`, result: `${raw.mbps.toFixed(0)} MB/s`, note: `window ${raw.window}, ack every ${raw.ackEvery}; ${raw.lossPct.toFixed(2)}% lost; ${cpuNote(raw)}` });
  // Warm-up: JIT both processes' paths and let the heaps settle before timing (with 32 MiB
  // the first timed run came out 20-30% below the later, lossy ones).
  await writeGoodput(0, Math.min(BYTES, 256 << 20));
  let w0;
  const byMode = {};
  for (const mode of MODES) {
    const w = await writeGoodput(0, BYTES, 0, MSG, mode);
    if (w.settled !== mode) throw new Error(`integrity ${mode} asked, ${w.settled} settled`);
    if (mode === MAIN_MODE) w0 = w;
    byMode[mode] = w;
    rows.push({ case: `sabre rc RdmaWrite 64 KiB, 32 in flight, integrity ${mode}`, result: `${w.mbps.toFixed(0)} MB/s`, note: `${(w.mbps / raw.mbps).toFixed(2)}× raw; retx ${w.retx}; ${cpuNote(w, raw)}` });
  }
  // Message rate: 64 B writes, 32 in flight, against raw 64 B datagrams, ack-clocked.
  await writeGoodput(0, 64 * 10_000, 0, 64);
  const rr = await rawAckClocked(64, RATE_MSGS);
  const sr = await writeGoodput(0, 64 * RATE_MSGS, 0, 64);
  rows.push({ case: 'raw node:dgram 64 B datagrams, ack-clocked', result: `${(rr.perSec / 1e3).toFixed(1)} k/s arrived`, note: `window ${rr.window}, ack every ${rr.ackEvery}; ${rr.lossPct.toFixed(2)}% lost; ${cpuNote(rr)}` });
  rows.push({ case: `sabre rc RdmaWrite 64 B, 32 in flight, integrity ${MAIN_MODE}`, result: `${(sr.perSec / 1e3).toFixed(1)} k ops/s`, note: `${(sr.perSec / rr.perSec).toFixed(2)}× raw; ${cpuNote(sr, rr)}` });
  const rp = await rawPingPong();
  const { wlat, rlat, coldW, coldR, stats: latStats } = await rdmaLatency();
  const r50 = pct(rp, 0.5);
  rows.push({ case: 'raw node:dgram 64 B ping-pong', result: `p50 ${us(r50)} µs`, note: `p99 ${us(pct(rp, 0.99))} µs` });
  rows.push({ case: `sabre RdmaWriteWithImm 64 B ping-pong, integrity ${MAIN_MODE}`, result: `p50 ${us(pct(wlat, 0.5))} µs`, note: `${(pct(wlat, 0.5) / r50).toFixed(2)}× raw; p99 ${us(pct(wlat, 0.99))} µs; CPU µs per round trip ${latStats.cpuPerPing.me.toFixed(0)} + ${latStats.cpuPerPing.peer.toFixed(0)}; cold (first 1000 of a fresh pair) p50 ${us(pct(coldW, 0.5))} µs` });
  rows.push({ case: 'sabre RdmaRead 64 B', result: `p50 ${us(pct(rlat, 0.5))} µs`, note: `${(pct(rlat, 0.5) / r50).toFixed(2)}× raw; p99 ${us(pct(rlat, 0.99))} µs; cold p50 ${us(pct(coldR, 0.5))} µs` });
  for (const loss of [0.01, 0.05]) {
    const r = await writeGoodput(loss);
    rows.push({ case: `sabre rc RdmaWrite 64 KiB, ${loss * 100}% rx loss`, result: `${r.mbps.toFixed(0)} MB/s`, note: `${(r.mbps / w0.mbps).toFixed(2)} of lossless; retx ${r.retx}, RTOs ${r.timeouts}; ${cpuNote(r, raw)}` });
  }
  // The CRC32C of every datagram on data-plane workers (both ends, both directions) instead of
  // the event loop: openDevice({ workers }).
  for (const workers of (process.env.UDP_RDMA_WORKERS ?? '1,2').split(',').map(Number).filter((n) => n > 0)) {
    await writeGoodput(0, Math.min(BYTES, 64 << 20), workers);
    const r = await writeGoodput(0, BYTES, workers);
    rows.push({ case: `sabre rc RdmaWrite 64 KiB, integrity crc32c, workers: ${workers} per device`, result: `${r.mbps.toFixed(0)} MB/s`, note: `${(r.mbps / (byMode.crc32c ?? w0).mbps).toFixed(2)} of inline ${byMode.crc32c ? 'crc32c' : MAIN_MODE}; ${(r.mbps / raw.mbps).toFixed(2)}× raw; ${cpuNote(r, raw)}` });
  }
  // Case 1 again with a service-sized live heap in both processes (see the header).
  if (HEAP_MB > 0 && CASES.has('bw')) {
    await holdServiceHeapBoth(call, HEAP_MB);
    const hraw = await rawAckClocked();
    rows.push({ case: `raw node:dgram, ack-clocked, ${HEAP_MB} MiB live heap`, result: `${hraw.mbps.toFixed(0)} MB/s`, note: `${hraw.lossPct.toFixed(2)}% lost; ${cpuNote(hraw)}` });
    for (const mode of MODES.filter((m) => m !== 'crc32c')) {
      const w = await writeGoodput(0, BYTES, 0, MSG, mode);
      rows.push({ case: `sabre rc RdmaWrite 64 KiB, integrity ${mode}, ${HEAP_MB} MiB live heap`, result: `${w.mbps.toFixed(0)} MB/s`, note: `${(w.mbps / hraw.mbps).toFixed(2)}× raw; retx ${w.retx}; ${cpuNote(w, hraw)}` });
    }
    await holdServiceHeapBoth(call, 0);
  }
  console.log(`sabre RDMA over UDP, mtu ${MTU}, ${BYTES >> 20} MiB per goodput case, ${RTTS} round trips, 2 processes on 127.0.0.1; integrity per row (goodput: ${MODES.join(', ')}; others: ${MAIN_MODE})`);
  console.table(rows);
  await call('exit').catch(() => {});
}
