// The floor under any placing protocol on node:dgram (issue #18): how much of the raw
// ack-clocked dgram baseline's goodput a receiver keeps when it does the least a one-sided
// write must do — copy each datagram into registered (shared WebAssembly) memory — and then
// also sends the acknowledgements sabre's receiver sends (one datagram per ~7 received: the
// engine's ack at the end of each receive step). Same two processes, same sender
// (sendRawDgram), variants alternated; both processes hold a service-sized live heap
// (bench/lib/service-heap.mjs) so neither collects continuously. Each variant reports goodput
// and CPU per GB (both processes) as a fraction of the plain sink's, measured next to it.
// A plain timed script, like the other transport benches.
// Run: npx tsc -p tsconfig.build.json && node bench/udp-floor.bench.mjs
//   (UDP_FLOOR_BYTES per run, default 2 GiB; UDP_FLOOR_ROUNDS, default 3; UDP_FLOOR_HEAP_MB, default 32)
import { fileURLToPath } from 'node:url';
import { forkPeer, servePeer } from './lib/peer.mjs';
import { holdServiceHeap } from './lib/service-heap.mjs';
import { MAX_DGRAM, DGRAM_HDR, RawDgramSink, sendRawDgram } from '../dist/cli/baseline/raw-dgram.js';
import { keepFreedHeapMapped } from '../dist/core/heap-reuse.js';

await keepFreedHeapMapped();
const BYTES = Number(process.env.UDP_FLOOR_BYTES ?? 2 * 1024 ** 3);
const ROUNDS = Number(process.env.UDP_FLOOR_ROUNDS ?? 3);
const HEAP_MB = Number(process.env.UDP_FLOOR_HEAP_MB ?? 32);
const SIZE = MAX_DGRAM - DGRAM_HDR;

/** The sink variants: what each data datagram costs beyond node's receive path. */
function variants() {
  // Registered memory as sabre's devices have it: a shared WebAssembly.Memory. Each datagram
  // lands at the next 64 KiB slot, aligned with node's buffer (V8's copy into shared memory
  // runs word by word only then: the best case for the one copy a placement must make).
  const mem = new WebAssembly.Memory({ initial: 512, maximum: 512, shared: true });
  const u8 = new Uint8Array(mem.buffer);
  const SLOTS = (512 * 65536) / 65536;
  let slot = 0;
  const copy = (msg) => {
    u8.set(msg, slot * 65536);
    slot = (slot + 1) % SLOTS;
  };
  return {
    plain: {},
    'copy into shared memory': { work: copy },
    'copy + an ack per 7 datagrams': { work: copy, ackEvery: 7 },
  };
}

if (process.argv[2] === '--peer') {
  holdServiceHeap(HEAP_MB);
  const kinds = variants();
  let sink;
  servePeer({
    async open({ kind }) {
      sink = await RawDgramSink.open('127.0.0.1', 4 << 20, kinds[kind]);
      return { port: sink.port, rcvbuf: sink.rcvbuf };
    },
    async close() {
      const st = sink.stats();
      await sink.close();
      return st;
    },
    cpu() {
      return process.cpuUsage();
    },
    exit() {
      setImmediate(() => process.exit(0));
    },
  });
} else {
  holdServiceHeap(HEAP_MB);
  const { call } = forkPeer(fileURLToPath(import.meta.url));
  const run = async (kind) => {
    const { port, rcvbuf } = await call('open', { kind });
    const c0 = process.cpuUsage();
    const p0 = await call('cpu');
    const t0 = performance.now();
    const r = await sendRawDgram({ host: '127.0.0.1', port, rcvbuf, size: SIZE, messages: Math.ceil(BYTES / SIZE) });
    const secs = (r.completed[r.acked - 1] - t0) / 1000;
    const c = process.cpuUsage(c0);
    const p1 = await call('cpu');
    const st = await call('close');
    const cpuUs = c.user + c.system + (p1.user - p0.user) + (p1.system - p0.system);
    return { mbps: st.bytes / secs / 1e6, cpuPerGB: cpuUs / 1e6 / (st.bytes / 1e9), lost: 1 - st.datagrams / r.datagrams };
  };
  const kinds = Object.keys(variants());
  await run('plain'); // warm-up: JIT both sides
  const res = Object.fromEntries(kinds.map((k) => [k, []]));
  for (let i = 0; i < ROUNDS; i++) for (const k of kinds) res[k].push(await run(k));
  const rows = kinds.map((k) => {
    const rs = res[k];
    const ratio = rs.map((r, i) => r.mbps / res.plain[i].mbps);
    const cpu = rs.map((r, i) => r.cpuPerGB / res.plain[i].cpuPerGB);
    return {
      sink: k,
      'MB/s': rs.map((r) => r.mbps.toFixed(0)).join(' / '),
      '× plain': ratio.map((x) => x.toFixed(2)).join(' / '),
      'CPU s/GB': rs.map((r) => r.cpuPerGB.toFixed(2)).join(' / '),
      'CPU × plain': cpu.map((x) => x.toFixed(2)).join(' / '),
      lost: `${(100 * Math.max(...rs.map((r) => r.lost))).toFixed(2)}%`,
    };
  });
  console.log(`udp floor: ${SIZE} B datagrams, ack-clocked (sendRawDgram), ${Math.round(BYTES / 2 ** 20)} MiB per run, ${ROUNDS} rounds alternated, ${HEAP_MB} MiB live heap in both processes`);
  console.table(rows);
  await call('exit').catch(() => {});
}
