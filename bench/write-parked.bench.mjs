// A peer that parks k RDMA Writes high in the ssn window (each incomplete: one segment of two
// sent) and then streams one-segment Writes below them: every lower segment takes the late-write
// path (write-order.ts). Measures how long the responder engine takes for the stream with k
// parked, against k = 0, in the same run (alternated rounds). The engine alone, frames handed
// to it directly (no link, no sockets): the cost measured is the responder's.
//
//   node bench/write-parked.bench.mjs [writes=50000] [parked=3000] [rounds=3]
import { performance } from 'node:perf_hooks';
// SABRE_DIST (default ../dist): another build of the tree, e.g. the commit before, for an A/B.
const dist = new URL(`${process.env.SABRE_DIST ?? '../dist'}/`, import.meta.url);
const load = (p) => import(new URL(p, dist).href);
const { DeviceMemory } = await load('dataplane/device-memory.js');
const { RdmapEngine } = await load('rdmap/engine.js');
const { EngineMemory } = await load('rdmap/memory.js');
const { dataFrames } = await load('rdmap/segmenter.js');
const { RdmapOpcode } = await load('wire/rdmap.js');
const { Access } = await load('index.js');

const WRITES = Number(process.argv[2] ?? 50_000);
const PARKED = Number(process.argv[3] ?? 3000);
const ROUNDS = Number(process.argv[4] ?? 3);
const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic;
const caps = { maxSendWr: 4096, maxRecvWr: 4096, maxSge: 16, maxInline: 0, rnrRetry: 7, rnrTimeoutMs: 1, maxRdAtomic: 16, timeoutMs: 8000 };
const sink = { offer: () => true };

async function side(host) {
  const dm = await DeviceMemory.create({ workerSlots: 0, initialBytes: 64 << 20 });
  const mem = new EngineMemory(dm);
  const engine = new RdmapEngine(mem, { mss: 8000, maxControl: 8000, linkCutsTagged: true });
  const qp = engine.createQp(1, 'rc', 1, caps, sink, sink);
  return { dm, mem, engine, qp, addr: Object.freeze({ transport: 'udp', host, port: 4000 }) };
}

/** Hand each engine's output to the other until both are quiet (bounded). */
function pump(a, b, now) {
  for (let i = 0; i < 100; i++) {
    const x = a.engine.pollTransmit();
    const y = b.engine.pollTransmit();
    if (x.length === 0 && y.length === 0) return;
    if (x.length) b.engine.handleFrames(x.map((o) => ({ from: a.addr, frame: o.frame })), now);
    if (y.length) a.engine.handleFrames(y.map((o) => ({ from: b.addr, frame: o.frame })), now);
    for (const s of [a, b]) while (s.engine.pollEvent() !== undefined);
  }
}

async function run(parked) {
  const a = await side('10.0.0.1');
  const b = await side('10.0.0.2');
  let now = 1;
  a.engine.connect(a.qp, b.addr, 1, now);
  b.engine.connect(b.qp, a.addr, 1, now);
  pump(a, b, now);
  const size = 4 * (WRITES + PARKED + 2);
  const a0 = b.dm.alloc(size);
  const dst = b.mem.register({ addr: a0, length: size, pd: 1, access: ALL });
  const seg = (ssn, to, len, total, off) => {
    const out = [];
    dataFrames({ srcQpn: 1, dstQpn: 1, ssn, tagged: true, opcode: RdmapOpcode.RdmaWrite, stag: dst.stag, to: to - off, parts: [new Uint8Array(total).fill(ssn & 0xff)], total, mss: Math.max(1, total - off || 1) }, out);
    return out.at(-1);
  };
  // Parked: ssn WRITES+1 .. WRITES+PARKED, two bytes each, only the second byte sent.
  const park = [];
  for (let i = 0; i < parked; i++) park.push({ from: a.addr, frame: seg(WRITES + 1 + i, dst.addr + 4 * (WRITES + 1 + i) + 1, 1, 2, 1) });
  if (park.length) b.engine.handleFrames(park, now);
  // The stream: ssn 1..WRITES, 4 bytes each at their own offset, in batches of 64.
  const t0 = performance.now();
  for (let s = 1; s <= WRITES; s += 64) {
    const batch = [];
    for (let k = s; k < s + 64 && k <= WRITES; k++) batch.push({ from: a.addr, frame: seg(k, dst.addr + 4 * k, 4, 4, 0) });
    b.engine.handleFrames(batch, ++now);
    while (b.engine.pollEvent() !== undefined);
    b.engine.pollTransmit();
  }
  const ms = performance.now() - t0;
  const c = b.engine.counters;
  return { ms, lateWrites: c.lateWrites, terminates: c.terminatesSent, state: b.qp.state };
}

const res = { 0: [], [PARKED]: [] };
for (let r = 0; r < ROUNDS; r++) {
  for (const k of r % 2 === 0 ? [0, PARKED] : [PARKED, 0]) {
    const x = await run(k);
    res[k].push(x.ms);
    console.log(`round ${r} parked=${k}: ${WRITES} writes in ${x.ms.toFixed(1)} ms (lateWrites ${x.lateWrites}, terminates ${x.terminates}, qp state ${x.state})`);
  }
}
const range = (v) => `${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)} ms`;
console.log(`parked=0: ${range(res[0])}; parked=${PARKED}: ${range(res[PARKED])}`);
