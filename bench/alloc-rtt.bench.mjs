// Allocation per small-message round trip (issue #18 item 3): NOT a timed benchmark.
//
// One process, two devices (inproc, then udp on 127.0.0.1, then tcp on 127.0.0.1), a 64 B
// RdmaWriteWithImm ping-pong exactly as bench/udp-rdma.bench.mjs runs it (unsignaled sends, one
// receive consumed and re-posted per message, cq.wait + cq.poll). After WARM untimed round trips
// (V8 tier-up, pools and maps grown) V8's sampling heap profiler counts what the next N round
// trips allocate, objects collected by scavenges and full GCs included. Each sample stands for
// 1/(1 - exp(-size/interval)) objects of its size (V8's own scaling), so with a small interval
// the bytes and the object count are estimates with well under 1% noise at N = 20000, and they
// do not depend on machine load. Both sides run in this process: "per round trip" is both
// sides together (requester + responder); halve it for one side.
//
// Run: npm run build:ts && node bench/alloc-rtt.bench.mjs
//   ALLOC_RTT_N (20000), ALLOC_RTT_WARM (6000), ALLOC_RTT_TOP (25), ALLOC_RTT_INTERVAL (32 bytes),
//   ALLOC_RTT_TRANSPORTS (inproc,udp,tcp)
import { Session } from 'node:inspector';
import { Opcode, Access, openDevice } from '../dist/index.js';

const N = Number(process.env.ALLOC_RTT_N ?? 20000);
const WARM = Number(process.env.ALLOC_RTT_WARM ?? 6000);
const TOP = Number(process.env.ALLOC_RTT_TOP ?? 25);
const INTERVAL = Number(process.env.ALLOC_RTT_INTERVAL ?? 32);
const TRANSPORTS = (process.env.ALLOC_RTT_TRANSPORTS ?? 'inproc,udp,tcp').split(',');
const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;

const session = new Session();
session.connect();
const post = (method, params = {}) =>
  new Promise((resolve, reject) => session.post(method, params, (e, r) => (e ? reject(e) : resolve(r))));

async function side(transport) {
  const dev = await openDevice({ transport, memoryBytes: 4 << 20, ...(transport === 'inproc' ? {} : { host: '127.0.0.1', port: 0 }) });
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 1024 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 256, maxRecvWr: 128, maxSge: 2 });
  const mr = pd.regMr(4096, ALL);
  return { dev, pd, cq, qp, mr };
}

/** rounds of ping (a → b) and pong (b → a); each side keeps 64 receives posted. */
async function pingPong(a, b, rounds, base) {
  const bounded = Date.now() + 600_000;
  for (let i = 0; i < rounds; i++) {
    if (Date.now() > bounded) throw new Error('ping-pong took over 10 minutes');
    const n = base + i;
    a.qp.postSend({ wrId: n, opcode: Opcode.RdmaWriteWithImm, imm: n, signaled: false, sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }], remoteAddr: b.mr.addr, rkey: b.mr.rkey });
    await awaitImm(b);
    b.qp.postRecv({ wrId: n, sgList: [] });
    b.qp.postSend({ wrId: n, opcode: Opcode.RdmaWriteWithImm, imm: n, signaled: false, sgList: [{ addr: b.mr.addr, length: 64, lkey: b.mr.lkey }], remoteAddr: a.mr.addr, rkey: a.mr.rkey });
    await awaitImm(a);
    a.qp.postRecv({ wrId: n, sgList: [] });
  }
}

async function awaitImm(s) {
  for (let spins = 0; spins < 1000; spins++) {
    await s.cq.wait(10_000);
    for (const w of s.cq.poll(4)) {
      if (w.status !== 0) throw new Error(`completion status ${w.status}`);
      if (w.imm !== undefined) return;
    }
  }
  throw new Error('no immediate after 1000 waits');
}

/** Flatten the sampled allocation tree: bytes and objects per function (self, not inclusive). */
function byFunction(profile) {
  const nodes = new Map();
  const parent = new Map();
  const walk = (n) => {
    nodes.set(n.id, n);
    for (const c of n.children) {
      parent.set(c.id, n);
      walk(c);
    }
  };
  walk(profile.head);
  const name = (cf) => `${cf.functionName || '(anonymous)'} ${cf.url.replace(/^.*\/(dist|node_modules|bench)\//, '$1/')}:${cf.lineNumber + 1}`;
  const rows = new Map();
  let bytes = 0;
  let objects = 0;
  for (const s of profile.samples) {
    const n = nodes.get(s.nodeId);
    // A builtin (slice, subarray, Map's delete …) is named with the function that called it.
    const key = n.callFrame.url === '' && parent.has(n.id) ? `${n.callFrame.functionName} <- ${name(parent.get(n.id).callFrame)}` : name(n.callFrame);
    // V8 samples an object of `size` bytes with probability 1 - exp(-size/interval).
    const weight = 1 / (1 - Math.exp(-s.size / INTERVAL));
    const r = rows.get(key) ?? { bytes: 0, objects: 0 };
    r.bytes += s.size * weight;
    r.objects += weight;
    rows.set(key, r);
    bytes += s.size * weight;
    objects += weight;
  }
  return { bytes, objects, rows: [...rows].sort((x, y) => y[1].bytes - x[1].bytes) };
}

await post('HeapProfiler.enable');
const results = [];
for (const transport of TRANSPORTS) {
  const a = await side(transport);
  const b = await side(transport);
  await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
  for (let i = 0; i < 64; i++) {
    a.qp.postRecv({ wrId: i, sgList: [] });
    b.qp.postRecv({ wrId: i, sgList: [] });
  }
  await pingPong(a, b, WARM, 0);
  await post('HeapProfiler.startSampling', { samplingInterval: INTERVAL, includeObjectsCollectedByMinorGC: true, includeObjectsCollectedByMajorGC: true });
  await pingPong(a, b, N, WARM);
  const { profile } = await post('HeapProfiler.stopSampling');
  await a.dev.close();
  await b.dev.close();
  const f = byFunction(profile);
  results.push({ transport, bytes: f.bytes / N, objects: f.objects / N });
  console.log(`\n${transport}: ${(f.bytes / N).toFixed(0)} B, ${(f.objects / N).toFixed(1)} objects allocated per round trip (both sides), N=${N} after ${WARM} warm`);
  console.log('   B/rtt  obj/rtt  function');
  for (const [key, r] of f.rows.slice(0, TOP)) {
    console.log(`${(r.bytes / N).toFixed(0).padStart(8)} ${(r.objects / N).toFixed(2).padStart(8)}  ${key}`);
  }
}
console.log('\nsummary (per round trip, both sides):');
for (const r of results) console.log(`  ${r.transport.padEnd(7)} ${r.bytes.toFixed(0).padStart(7)} B  ${r.objects.toFixed(1).padStart(6)} objects`);
session.disconnect();
