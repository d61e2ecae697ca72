// The software NIC on a thread of its own against the inline NIC (openDevice `workers: 1` vs
// `workers: 0`) and raw sockets, between two processes on 127.0.0.1, udp and tcp, same run:
//   1. 64 KiB RdmaWrite goodput with 32 in flight: MB/s; the main-thread event-loop utilization
//      (performance.eventLoopUtilization) of the target (which only has a region registered)
//      and of the requester (which keeps the 32 in flight); CPU per GB (user + system of both
//      processes, all threads). Raw baseline: node:dgram ack-clocked (udp) or node:net (tcp),
//      the same bytes, with its own CPU per GB.
//   2. 64 B RdmaWriteWithImm round trip (p50, µs) for both modes, and a raw ping-pong.
// Both processes keep freed heap mapped as sabre's links do (src/core/heap-reuse.ts), so the
// raw baselines are at their best.
// A plain timed script: a streaming transfer does not fit tinybench's per-iteration model.
// Run: npm run build:ts && node bench/nic-offload.bench.mjs
//   (NIC_BYTES: bytes per goodput case, default 256 MiB; NIC_RTTS: round trips, default 2000,
//    after NIC_RTT_WARM untimed ones, default 6000 (V8 optimises this path's functions only after
//    a few thousand round trips: the first thousand run 3-5x slower, docs/benchmarks.md);
//    NIC_TRANSPORTS: default "udp,tcp"; NIC_REPS: alternations of the modes, default 2;
//    NIC_MODES: the cases run, default "raw,0,1"; NIC_RTTS=0 skips the round trips, NIC_BYTES=0 the goodput;
//    NIC_OPTS: JSON of further openDevice options for both sides, e.g. '{"nicPollUs":50}';
//    NIC_TASKS=1: each thread's context switches and CPU per MB of a goodput case, both processes;
//    NIC_BW_WARM: untimed 64 KiB writes on the same pair before a goodput case is timed, default 256)
// With a NIC thread the goodput rows also give the wake-ups per MB across each side's two threads
// (dev.stats().nic).
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { forkPeer, isPeer, pong, servePeer } from './lib/peer.mjs';
import { RawDgramSink, sendRawDgram } from '../dist/cli/baseline/raw-dgram.js';
import { keepFreedHeapMapped } from '../dist/core/heap-reuse.js';
import { Access, Opcode, openDevice } from '../dist/index.js';

await keepFreedHeapMapped();

const BYTES = Number(process.env.NIC_BYTES ?? 256 << 20);
const RTTS = Number(process.env.NIC_RTTS ?? 2000);
const RTT_WARM = Number(process.env.NIC_RTT_WARM ?? 6000);
const REPS = Number(process.env.NIC_REPS ?? 2);
const TRANSPORTS = (process.env.NIC_TRANSPORTS ?? 'udp,tcp').split(',');
const MODES = (process.env.NIC_MODES ?? 'raw,0,1').split(',');
const BW_WARM = Number(process.env.NIC_BW_WARM ?? 256);
const OPTS = JSON.parse(process.env.NIC_OPTS ?? '{}');
const MSG = 64 << 10;
const DEPTH = 32;
const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead;

const cpuSecs = (u) => (u.user + u.system) / 1e6;
/** Context switches of this process so far (all threads): each thread wake-up is one or two. */
const switches = () => {
  const r = process.resourceUsage();
  return r.voluntaryContextSwitches + r.involuntaryContextSwitches;
};

/** Context switches (voluntary, involuntary) and ms on a CPU of each thread of this process, by thread id (NIC_TASKS=1). */
function taskSwitches() {
  if (process.env.NIC_TASKS !== '1') return undefined;
  const out = {};
  for (const t of fs.readdirSync('/proc/self/task')) {
    try {
      const st = fs.readFileSync(`/proc/self/task/${t}/status`, 'utf8');
      const v = Number(/^voluntary_ctxt_switches:\s*(\d+)/m.exec(st)[1]);
      const i = Number(/nonvoluntary_ctxt_switches:\s*(\d+)/.exec(st)[1]);
      // schedstat: ns on a CPU (precise, where stat's utime/stime count 10 ms ticks).
      const ns = Number(fs.readFileSync(`/proc/self/task/${t}/schedstat`, 'utf8').split(' ')[0]);
      out[t] = [v, i, ns / 1e6];
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

function diffTasks(a, b, mb) {
  if (!a) return '';
  const parts = [];
  for (const [k, [v, i, ms]] of Object.entries(a)) {
    const [v0, i0, ms0] = b[k] ?? [0, 0, 0];
    if (v - v0 + i - i0 > 0) parts.push(`${((v - v0) / mb).toFixed(2)}+${((i - i0) / mb).toFixed(2)} ${((ms - ms0) / mb).toFixed(2)}ms`);
  }
  return parts.join(', ');
}

/** NIC-thread counters (dev.stats().nic) since `b`. */
function diffNic(a, b) {
  const d = {};
  for (const k of Object.keys(a)) d[k] = a[k] - (b[k] ?? 0);
  return d;
}

/** Wake-ups per MB: the application's (appWakes) and the NIC thread's (wakes) on each side. */
function perMb(nic, mb) {
  if (!nic) return '';
  return `app ${(nic.appWakes / mb).toFixed(2)} NIC ${(nic.wakes / mb).toFixed(2)} (doorbells: NIC ${(nic.doorbells / mb).toFixed(2)}, app ${(nic.appDoorbells / mb).toFixed(2)})`;
}

async function side(transport, workers) {
  const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers, ...OPTS });
  const pd = dev.allocPd();
  const mr = pd.regMr(4 << 20, ALL);
  const cq = dev.createCq({ depth: 4096 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1024, maxRecvWr: 1024, maxSge: 1, timeoutMs: 60_000 });
  return { dev, pd, mr, cq, qp };
}

if (isPeer) {
  let s;
  let elu0;
  let cpu0;
  let cs0;
  let nic0;
  let tasks0;
  let server;
  let sink;
  servePeer({
    async open({ transport, workers }) {
      s = await side(transport, workers);
      return { address: s.dev.address, qpn: s.qp.qpn, addr: s.mr.addr, rkey: s.mr.rkey };
    },
    async connect({ address, qpn, peerAddr, peerRkey }) {
      s.peerAddr = peerAddr;
      s.peerRkey = peerRkey;
      await s.qp.connect({ address, qpn, timeoutMs: 20_000 });
    },
    pong({ n }) {
      pong(s, n, Opcode);
    },
    measure() {
      elu0 = performance.eventLoopUtilization();
      cpu0 = process.cpuUsage();
      cs0 = switches();
      nic0 = s?.dev.stats().nic;
      tasks0 = taskSwitches();
    },
    measured() {
      const nic = nic0 && diffNic(s.dev.stats().nic, nic0);
      return { elu: performance.eventLoopUtilization(elu0).utilization, cpu: cpuSecs(process.cpuUsage(cpu0)), cs: switches() - cs0, nic, tasks: taskSwitches(), tasks0 };
    },
    async close() {
      await s.dev.close();
      s = undefined;
    },
    async dgramSink() {
      sink = await RawDgramSink.open('127.0.0.1');
      return { port: sink.port, rcvbuf: sink.rcvbuf };
    },
    async dgramSinkClose() {
      const st = sink.stats();
      await sink.close();
      return st;
    },
    async dgramEcho() {
      server = dgram.createSocket('udp4');
      server.on('message', (m, r) => server.send(m, r.port, r.address));
      await new Promise((r) => server.bind(0, '127.0.0.1', r));
      return server.address().port;
    },
    async netServer({ mode }) {
      server = net.createServer({ noDelay: true }, (c) => {
        let got = 0;
        let next = DEPTH * MSG;
        c.on('data', (b) => {
          if (mode === 'echo') return void c.write(b);
          got += b.length;
          while (got >= next) {
            const r = Buffer.alloc(8);
            r.writeDoubleBE(next);
            c.write(r);
            next += DEPTH * MSG;
          }
        });
        c.on('error', () => {});
      });
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      return server.address().port;
    },
    stopServer() {
      server?.close();
      server = undefined;
    },
    exit() {
      setImmediate(() => process.exit(0));
    },
  });
} else {
  const { call } = forkPeer(fileURLToPath(import.meta.url));

  async function pair(transport, workers) {
    const t = await call('open', { transport, workers });
    const s = await side(transport, workers);
    await Promise.all([s.qp.connect({ address: t.address, qpn: t.qpn, timeoutMs: 20_000 }), call('connect', { address: s.dev.address, qpn: s.qp.qpn, peerAddr: s.mr.addr, peerRkey: s.mr.rkey })]);
    return { s, t };
  }

  /** 64 KiB writes, DEPTH in flight, until `bytes` are placed. */
  async function goodput(transport, workers, bytes = BYTES) {
    const { s, t } = await pair(transport, workers);
    const n = Math.ceil(bytes / MSG);
    const wr = { wrId: 0, opcode: Opcode.RdmaWrite, sgList: [{ addr: s.mr.addr, length: MSG, lkey: s.mr.lkey }], remoteAddr: t.addr, rkey: t.rkey };
    const run = async (count) => {
      let posted = 0;
      let done = 0;
      for (; posted < Math.min(DEPTH, count); posted++) s.qp.postSend(wr);
      while (done < count) {
        await s.cq.wait(30_000);
        for (const wc of s.cq.poll(64)) {
          if (wc.status !== 0) throw new Error(`write failed: ${wc.status}`);
          done++;
          if (posted < count) {
            s.qp.postSend(wr);
            posted++;
          }
        }
      }
    };
    await run(Math.min(n, BW_WARM));
    await call('measure');
    const elu0 = performance.eventLoopUtilization();
    const c0 = process.cpuUsage();
    const cs0 = switches();
    const nic0 = s.dev.stats().nic;
    const tasks0 = taskSwitches();
    const t0 = performance.now();
    await run(n);
    const secs = (performance.now() - t0) / 1000;
    const reqElu = performance.eventLoopUtilization(elu0).utilization;
    const far = await call('measured');
    const cpu = cpuSecs(process.cpuUsage(c0)) + far.cpu;
    const cs = switches() - cs0 + far.cs;
    const mb = (n * MSG) / 1e6;
    const tasks = taskSwitches();
    if (tasks) console.log(`# ${transport} workers: ${workers} per thread (main first, NIC thread last): switches per MB voluntary+involuntary, CPU ms per MB; requester: ${diffTasks(tasks, tasks0, mb)}; target: ${diffTasks(far.tasks, far.tasks0, mb)}`);
    const wakes = nic0 ? ` [wake-ups per MB: requester ${perMb(diffNic(s.dev.stats().nic, nic0), mb)}; target ${perMb(far.nic, mb)}]` : '';
    await s.dev.close();
    await call('close');
    const gb = (n * MSG) / 1e9;
    return { mbps: (n * MSG) / secs / 1e6, tgtElu: far.elu, reqElu, cpuPerGB: cpu / gb, reqCpuPerGB: (cpu - far.cpu) / gb, csPerMB: cs / mb, wakes };
  }

  async function rawUdp(bytes = BYTES) {
    const { port, rcvbuf } = await call('dgramSink');
    await call('measure');
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const size = 64000;
    const r = await sendRawDgram({ host: '127.0.0.1', port, rcvbuf, size, messages: Math.ceil(bytes / size) });
    const secs = (r.completed[r.acked - 1] - t0) / 1000;
    const far = await call('measured');
    const st = await call('dgramSinkClose');
    return { mbps: st.bytes / secs / 1e6, cpuPerGB: (cpuSecs(process.cpuUsage(c0)) + far.cpu) / (st.bytes / 1e9), tgtElu: far.elu };
  }

  async function rawTcp(bytes = BYTES) {
    const port = await call('netServer', { mode: 'sink' });
    const sock = net.connect({ host: '127.0.0.1', port, noDelay: true });
    await new Promise((r) => sock.once('connect', r));
    const buf = Buffer.alloc(MSG, 0x5a);
    const n = Math.ceil(bytes / MSG);
    await call('measure');
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await new Promise((resolve) => {
      let sent = 0;
      let acked = 0;
      let pending = Buffer.alloc(0);
      const pump = () => {
        while (sent < n && sent * MSG - acked < DEPTH * MSG) {
          sock.write(buf);
          sent++;
        }
      };
      sock.on('data', (b) => {
        pending = Buffer.concat([pending, b]);
        while (pending.length >= 8) {
          acked = pending.readDoubleBE(0);
          pending = pending.subarray(8);
        }
        if (acked >= n * MSG - (n * MSG) % (DEPTH * MSG)) resolve();
        else pump();
      });
      pump();
    });
    const secs = (performance.now() - t0) / 1000;
    const far = await call('measured');
    sock.destroy();
    await call('stopServer');
    return { mbps: (n * MSG) / secs / 1e6, cpuPerGB: (cpuSecs(process.cpuUsage(c0)) + far.cpu) / ((n * MSG) / 1e9), tgtElu: far.elu };
  }

  /** p50 of RTTS 64 B RdmaWriteWithImm round trips. */
  async function rtt(transport, workers) {
    const { s, t } = await pair(transport, workers);
    const warm = RTT_WARM;
    await call('pong', { n: RTTS + warm });
    const times = [];
    let r = 0;
    for (let i = 0; i < Math.min(RTTS + warm, 64); i++) s.qp.postRecv({ wrId: i, sgList: [] });
    let posted = Math.min(RTTS + warm, 64);
    for (let i = 0; i < RTTS + warm; i++) {
      const t0 = performance.now();
      s.qp.postSend({ wrId: i, opcode: Opcode.RdmaWriteWithImm, imm: i, signaled: false, sgList: [{ addr: s.mr.addr, length: 64, lkey: s.mr.lkey }], remoteAddr: t.addr, rkey: t.rkey });
      for (let got = false; !got; ) {
        await s.cq.wait(30_000);
        for (const wc of s.cq.poll(64)) {
          if (wc.imm !== undefined) {
            got = true;
            if (posted < RTTS + warm) s.qp.postRecv({ wrId: posted++, sgList: [] });
          }
        }
      }
      if (i >= warm) times.push(performance.now() - t0);
      r++;
    }
    const nic = s.dev.stats().nic;
    if (nic) console.log(`# ${transport} requester NIC thread over ${RTTS + warm} round trips: ${nic.doorbells} wake-ups of the application rung, ${nic.polls} polls, ${nic.pollHits} found a post`);
    await s.dev.close();
    await call('close');
    times.sort((a, b) => a - b);
    return times[Math.floor(times.length / 2)] * 1000;
  }

  async function rawRtt(transport) {
    const times = [];
    if (transport === 'udp') {
      const port = await call('dgramEcho');
      const c = dgram.createSocket('udp4');
      await new Promise((r) => c.bind(0, '127.0.0.1', r));
      const buf = Buffer.alloc(64);
      for (let i = 0; i < RTTS + 200; i++) {
        const t0 = performance.now();
        await new Promise((r) => {
          c.once('message', r);
          c.send(buf, port, '127.0.0.1');
        });
        if (i >= 200) times.push(performance.now() - t0);
      }
      c.close();
    } else {
      const port = await call('netServer', { mode: 'echo' });
      const c = net.connect({ host: '127.0.0.1', port, noDelay: true });
      await new Promise((r) => c.once('connect', r));
      const buf = Buffer.alloc(64);
      for (let i = 0; i < RTTS + 200; i++) {
        const t0 = performance.now();
        let got = 0;
        await new Promise((r) => {
          const on = (b) => {
            got += b.length;
            if (got >= 64) {
              c.off('data', on);
              r();
            }
          };
          c.on('data', on);
          c.write(buf);
        });
        if (i >= 200) times.push(performance.now() - t0);
      }
      c.destroy();
    }
    await call('stopServer');
    times.sort((a, b) => a - b);
    return times[Math.floor(times.length / 2)] * 1000;
  }

  const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`# nic-offload: ${BYTES >> 20} MiB per goodput case, ${DEPTH} × 64 KiB in flight, ${RTTS} round trips, ${REPS} alternations`);
  for (const transport of TRANSPORTS) {
    const rows = { raw: [], inline: [], thread: [] };
    for (let rep = 0; rep < (BYTES > 0 ? REPS : 0); rep++) {
      if (MODES.includes('raw')) rows.raw.push(transport === 'udp' ? await rawUdp() : await rawTcp());
      if (MODES.includes('0')) rows.inline.push(await goodput(transport, 0));
      if (MODES.includes('1')) rows.thread.push(await goodput(transport, 1));
    }
    const raw = rows.raw.length > 0 ? med(rows.raw.map((r) => r.mbps)) : NaN;
    const rawCpu = rows.raw.length > 0 ? med(rows.raw.map((r) => r.cpuPerGB)) : NaN;
    const inl = rows.inline;
    if (rows.raw.length > 0) console.log(`${transport} raw ${transport === 'udp' ? 'node:dgram' : 'node:net'}: ${raw.toFixed(0)} MB/s, CPU ${rawCpu.toFixed(2)} s/GB`);
    for (const [name, rs] of [['workers: 0', rows.inline], ['workers: 1', rows.thread]]) {
      if (rs.length === 0) continue;
      const mbps = med(rs.map((r) => r.mbps));
      const cpu = med(rs.map((r) => r.cpuPerGB));
      const each = rs.map((r) => `${r.mbps.toFixed(0)}/${r.cpuPerGB.toFixed(2)} (requester ${r.reqCpuPerGB.toFixed(2)})/${r.csPerMB.toFixed(1)}${r.wakes ?? ''}`).join(' ');
      console.log(
        `${transport} ${name}: ${mbps.toFixed(0)} MB/s (${(mbps / raw).toFixed(2)}× raw, ${(mbps / (inl.length > 0 ? med(inl.map((r) => r.mbps)) : NaN)).toFixed(2)}× workers: 0), ` +
          `CPU ${cpu.toFixed(2)} s/GB (${(cpu / rawCpu).toFixed(2)}× raw), target main-thread ELU ${med(rs.map((r) => r.tgtElu)).toFixed(3)}, requester ${med(rs.map((r) => r.reqElu)).toFixed(3)}, ${med(rs.map((r) => r.csPerMB)).toFixed(1)} context switches per MB; each MB/s / CPU s/GB (the requester's part) / switches per MB: ${each}`,
      );
    }
    if (RTTS <= 0) continue;
    const rr = MODES.includes('raw') ? await rawRtt(transport) : NaN;
    const r0 = MODES.includes('0') ? await rtt(transport, 0) : NaN;
    const r1 = MODES.includes('1') ? await rtt(transport, 1) : NaN;
    console.log(`${transport} 64 B WriteWithImm round trip p50: raw ${rr.toFixed(1)} µs, workers: 0 ${r0.toFixed(1)} µs (${(r0 / rr).toFixed(2)}× raw), workers: 1 ${r1.toFixed(1)} µs (${(r1 / rr).toFixed(2)}× raw, ${(r1 / r0).toFixed(2)}× workers: 0)`);
  }
  await call('exit');
}
