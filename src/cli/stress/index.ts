// `sabre stress`: fan the work out over a piscina pool (one task per worker, each a long
// batch — the kind of work piscina's hand-off cost is worth paying for), show a live line on
// a terminal, and sum up. Bounded by --duration (plus a grace period for teardown).
import { Piscina } from 'piscina';
import { fileURLToPath } from 'node:url';
import { Progress } from '../progress.js';
import { percentile } from '../stats.js';
import type { StressOptions } from './options.js';
import type { StressResult, StressTask } from './worker.js';

export interface StressSummary {
  ops: number;
  bytes: number;
  errors: number;
  integrityFailures: number;
  durationS: number;
  opsPerS: number;
  p50Us: number;
  p99Us: number;
  peakRssBytes: number;
  workers: number;
  qps: number;
  transport: string;
  seed: number;
  mix: Record<string, number>;
  firstErrors: string[];
}

export async function runStress(o: StressOptions, out: (l: string) => void, tty: boolean): Promise<StressSummary> {
  const counters = new SharedArrayBuffer(o.workers * 4 * 8);
  const view = new Float64Array(counters);
  const pool = new Piscina({
    filename: fileURLToPath(new URL('./worker.js', import.meta.url)),
    minThreads: o.workers,
    maxThreads: o.workers,
    idleTimeout: 1000,
  });
  const t0 = performance.now();
  const deadline = Date.now() + o.durationS * 1000;
  let peakRss = process.memoryUsage().rss;
  const sum = (k: number) => {
    let s = 0;
    for (let w = 0; w < o.workers; w++) s += view[w * 4 + k]!;
    return s;
  };
  const line = new Progress(process.stderr, 250, undefined, tty);
  const progress = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    const el = (performance.now() - t0) / 1000;
    const ops = sum(0);
    line.update(
      `  ${el.toFixed(1)}s of ${o.durationS}s  ops ${ops}  ${(ops / Math.max(el, 1e-3)).toFixed(0)} ops/s  ${(sum(1) / 1e6 / Math.max(el, 1e-3)).toFixed(1)} MB/s  errors ${sum(2)}  integrity ${sum(3)}`,
      true,
    );
  }, 250);
  const perWorker = Math.ceil(o.ops / o.workers);
  const tasks: Promise<StressResult>[] = [];
  for (let i = 0; i < o.workers; i++) {
    const task: StressTask = {
      index: i,
      seed: (o.seed + i) >>> 0,
      qps: o.qps,
      deadline,
      ops: Math.min(perWorker, o.ops - i * perWorker),
      maxSize: o.maxSize,
      transport: o.transport,
      injectFault: o.injectFault && i === 0,
      counters,
    };
    tasks.push(pool.run(task) as Promise<StressResult>);
  }
  const settled = await Promise.allSettled(tasks);
  clearInterval(progress);
  line.done();
  const durationS = (performance.now() - t0) / 1000;
  await pool.destroy();
  const s: StressSummary = {
    ops: 0,
    bytes: 0,
    errors: 0,
    integrityFailures: 0,
    durationS,
    opsPerS: 0,
    p50Us: 0,
    p99Us: 0,
    peakRssBytes: peakRss,
    workers: o.workers,
    qps: o.qps,
    transport: o.transport,
    seed: o.seed,
    mix: {},
    firstErrors: [],
  };
  const lats: number[] = [];
  for (const r of settled) {
    if (r.status === 'rejected') {
      s.errors++;
      s.firstErrors.push(`worker failed: ${(r.reason as Error)?.message ?? r.reason}`);
      continue;
    }
    const v = r.value;
    s.ops += v.ops;
    s.bytes += v.bytes;
    s.errors += v.errors;
    s.integrityFailures += v.integrityFailures;
    lats.push(...v.latenciesUs);
    for (const [k, n] of Object.entries(v.mix)) s.mix[k] = (s.mix[k] ?? 0) + n;
    s.firstErrors.push(...v.firstErrors);
  }
  lats.sort((a, b) => a - b);
  s.opsPerS = s.ops / durationS;
  s.p50Us = percentile(lats, 50);
  s.p99Us = percentile(lats, 99);
  s.firstErrors = s.firstErrors.slice(0, 10);
  return s;
}

export function printStress(s: StressSummary, out: (l: string) => void): void {
  out(`sabre stress: ${s.workers} worker${s.workers === 1 ? '' : 's'} x ${s.qps} QP pair${s.qps === 1 ? '' : 's'}, transport ${s.transport}, seed ${s.seed}`);
  out(`  ops                 ${s.ops}  (${Object.entries(s.mix).map(([k, n]) => `${k} ${n}`).join(', ')})`);
  out(`  bytes               ${s.bytes}`);
  out(`  duration            ${s.durationS.toFixed(2)} s`);
  out(`  ops/s               ${s.opsPerS.toFixed(0)}`);
  out(`  latency p50 / p99   ${s.p50Us.toFixed(1)} / ${s.p99Us.toFixed(1)} usec (post -> completion)`);
  out(`  errors              ${s.errors}`);
  out(`  integrity failures  ${s.integrityFailures}`);
  out(`  peak memory (rss)   ${(s.peakRssBytes / 2 ** 20).toFixed(1)} MiB`);
  for (const e of s.firstErrors) out(`  ! ${e}`);
}
