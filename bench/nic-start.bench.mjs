// How long openDevice takes on udp and tcp with the default NIC thread, when the thread runs
// the one-file bundle of its script (scripts/bundle-nic.mjs, the default) against the ~130
// modules it is linked from (SABRE_NIC_BUNDLE=0), and against `workers: 0` (no thread: the
// floor). Each sample opens a device and closes it; the three paths take turns, sample by
// sample, in one process, so the shared machine's load spikes land on all of them (tinybench
// runs one task to the end before the next). Ratio = p50 ÷ the module graph's p50.
// Run: npm run build && node bench/nic-start.bench.mjs   (NIC_START_N samples per path, 20)
import { openDevice } from '../dist/index.js';

const N = Number(process.env.NIC_START_N ?? 20);
const transports = (process.env.NIC_START_TRANSPORTS ?? 'udp,tcp').split(',');
const paths = [
  { name: 'NIC thread, bundle', env: undefined, workers: undefined },
  { name: 'NIC thread, module graph', env: '0', workers: undefined },
  { name: 'workers: 0 (no thread)', env: undefined, workers: 0 },
];
const pct = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))];
const rows = [];
for (const transport of transports) {
  const ms = paths.map(() => []);
  for (let i = 0; i < N + 2; i++) {
    for (const [k, p] of paths.entries()) {
      if (p.env === undefined) delete process.env.SABRE_NIC_BUNDLE;
      else process.env.SABRE_NIC_BUNDLE = p.env;
      const t0 = performance.now();
      const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, ...(p.workers === 0 ? { workers: 0 } : {}) });
      const opened = performance.now() - t0;
      await dev.close();
      if (i >= 2) ms[k].push(opened); // two warm-up rounds
    }
  }
  delete process.env.SABRE_NIC_BUNDLE;
  const graph = pct(ms[1], 0.5);
  for (const [k, p] of paths.entries()) {
    rows.push({ transport, path: p.name, 'open p50 ms': pct(ms[k], 0.5).toFixed(1), 'p90 ms': pct(ms[k], 0.9).toFixed(1), samples: ms[k].length, '÷ module graph p50': (pct(ms[k], 0.5) / graph).toFixed(2) });
  }
}
console.table(rows);
