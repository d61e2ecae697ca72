// The client role: exchange parameters and QP info with the server (perftest's "Data ex.
// method"), then for each size an optional warm-up, the measured run, the row printed here and
// sent to the server to print, and with --baseline the same pattern without sabre.
import { hostname } from 'node:os';
import { publish } from '../../metrics/diagnostics.js';
import type { SabreMetrics } from '../../metrics/registry.js';
import { Progress } from '../progress.js';
import { bwRate, latRate, LiveCount, startLive } from './live.js';
import { sabreVersion } from '../version.js';
import { runBaseline } from './baseline.js';
import { BwSender, needsReceives, Responder } from './bw.js';
import { pump } from './completions.js';
import { checkCpu, checkFinishRow, checkHello } from './answers.js';
import { CALL_TIMEOUT_MS, type ControlPeer } from './control.js';
import { runLatClient } from './lat.js';
import { attachMetrics, observeRow } from './observe.js';
import { type PeerParams, peerParams, type PerfOptions } from './options.js';
import { histogram, integrityOf, type Out, outputValue, printHeader, rowLine, tableHead } from './print.js';
import { type BwRow, cpuPerGB, cpuUs, type LatRow, latRow, type Row, speedRatio, sumBw } from './results.js';
import type { PrepareParams } from './server.js';
import { PerfSide, type SideInfo } from './side.js';
import { testTitle } from './tests.js';
import { RULE } from '../table.js';

export interface PerfReport {
  sabre: string;
  date: string;
  hostname: string;
  title: string;
  test: PerfOptions['test'];
  transport: PerfOptions['transport'];
  device: string;
  connection: PerfOptions['conn'];
  qps: number;
  txDepth: number;
  rxDepth: number;
  cqMod: number;
  mtu: number | undefined;
  /** What the device reports as negotiated integrity (absent until a device reports one). */
  integrity: string | undefined;
  inline: number;
  workers: number;
  bidirectional: boolean;
  imm: boolean;
  atomicType: string | undefined;
  iters: number | undefined;
  durationS: number | undefined;
  warmUp: boolean;
  local: SideInfo;
  remote: SideInfo;
  /** Flat rows: the sabre row of each size, then its baseline row when --baseline. */
  results: Row[];
}

// Latency warm-up: V8 optimises a function after an invocation budget, and a round trip runs
// each function of the path about once, so a fresh pair runs its first few thousand round trips
// mostly unoptimised (p50 per block falls steadily until then; measured in docs/benchmarks.md).
// 100 iterations left the measured run cold; 5000 do not.
const WARM_LAT_ITERS = 5000;
const WARM_LAT_S = 3;

export interface DriveEnv {
  out: Out;
  progress: Progress;
  metrics: SabreMetrics | undefined;
  /** Address the device binds to (the interface that reaches the server). */
  bindHost: string | undefined;
  /** Host the baseline sockets connect to (the server's). */
  baselineHost: string;
  /** inproc: both sides are this process, so its CPU time is counted once. */
  oneProcess: boolean;
}

export async function drive(o: PerfOptions, ctl: ControlPeer, env: DriveEnv): Promise<PerfReport> {
  const { out } = env;
  const p = peerParams(o);
  const quiet = o.json || o.output !== undefined;
  const remote = checkHello(await ctl.call('hello', p), p.qps);
  const side = await PerfSide.open({ ...p, ...(env.bindHost ? { bindHost: env.bindHost } : {}), ...(o.mtu !== undefined ? { mtu: o.mtu } : {}), workers: o.workers, integrity: o.integrity });
  try {
    if (env.metrics) attachMetrics(side, env.metrics, 'client');
    const local = side.info();
    await Promise.all([ctl.call('connect', local), side.connect(remote)]);
    publish('sabre:perf:run', () => ({ phase: 'start', role: 'client', test: o.test, transport: o.transport, connection: o.conn, sizes: o.sizes }));
    const responder = needsReceives(p) ? new Responder(side, p.kind === 'bw' ? p.rxDepth : 16) : undefined;
    if (!quiet) {
      printHeader({ p, mtu: side.dev.mtu, workers: side.dev.workers, local, remote, integrity: integrityOf(side.dev) }, out);
      out(tableHead(p));
    }
    const results: Row[] = [];
    let i = 0;
    for (const size of o.sizes) {
      i++;
      env.progress.update(`  sabre perf ${o.test}: ${size} B (${i} of ${o.sizes.length} sizes)${o.durationS !== undefined ? `, ${o.durationS} s each` : ''}`, true);
      const { row, samples } = await measure(o, p, side, remote, ctl, responder, size, env);
      env.progress.done();
      if (!quiet && samples && o.histogram) histogram(samples, !o.unsorted, out);
      emit(o, p, row, out);
      observeRow(env.metrics, o.test, o.transport, row, samples);
      const rows: Row[] = [row];
      if (o.baseline) {
        env.progress.update(`  sabre perf ${o.test}: ${size} B baseline`, true);
        const base = await runBaseline(o, o.transport === 'inproc' ? undefined : ctl, env.baselineHost, { size, iters: o.iters, durationS: o.durationS, warmUp: o.warmUp }, env.bindHost);
        env.progress.done();
        base.speedRatio = speedRatio(row, base);
        emit(o, p, base, out);
        observeRow(env.metrics, o.test, o.transport, base);
        rows.push(base);
      }
      results.push(...rows);
      await ctl.call('report', { rows });
    }
    if (!quiet) out(RULE);
    await ctl.call('bye');
    publish('sabre:perf:run', () => ({ phase: 'end', role: 'client', test: o.test, transport: o.transport, connection: o.conn, sizes: o.sizes }));
    return {
      sabre: sabreVersion(),
      date: new Date().toISOString(),
      hostname: hostname(),
      title: testTitle(p),
      test: o.test,
      transport: o.transport,
      device: `sabre_${o.transport}`,
      connection: o.conn,
      qps: o.qps,
      txDepth: o.txDepth,
      rxDepth: o.rxDepth,
      cqMod: o.cqMod,
      mtu: side.dev.mtu,
      integrity: integrityOf(side.dev),
      inline: o.inline,
      workers: side.dev.workers,
      bidirectional: o.bidirectional,
      imm: o.imm,
      atomicType: o.verb === 'atomic' ? o.atomicType : undefined,
      iters: o.durationS === undefined ? o.iters : undefined,
      durationS: o.durationS,
      warmUp: o.warmUp,
      local,
      remote,
      results,
    };
  } finally {
    await side.close();
  }
}

function emit(o: PerfOptions, p: PeerParams, r: Row, out: Out): void {
  publish('sabre:perf:result', () => ({ role: 'client', test: o.test, transport: o.transport, ...r }));
  if (o.json) return;
  if (o.output !== undefined) {
    if (r.source === 'sabre') out(outputValue(o.output, p, r));
    return;
  }
  out(rowLine(p, r));
}

/** One size: warm-up if asked, then the measured run with both processes' CPU time around it. */
async function measure(
  o: PerfOptions,
  p: PeerParams,
  side: PerfSide,
  remote: SideInfo,
  ctl: ControlPeer,
  responder: Responder | undefined,
  size: number,
  env: DriveEnv,
): Promise<{ row: Row; samples?: number[] }> {
  let first = 0;
  let warm: { warmUpIterations: number; warmUpMs: number } | undefined;
  if (o.warmUp) {
    const count = { done: 0 };
    const t0 = performance.now();
    first = (await once(o, side, remote, ctl, responder, size, 'warmup', 0, count)) as number;
    warm = { warmUpIterations: count.done, warmUpMs: Math.round((performance.now() - t0) * 1000) / 1000 };
  }
  const wall0 = performance.now();
  const c0 = process.cpuUsage();
  const r0 = env.oneProcess ? undefined : checkCpu(await ctl.call('cpu'));
  const live = o.durationS !== undefined ? { progress: env.progress, label: `sabre perf ${o.test}: ${size} B`, totalS: o.durationS } : undefined;
  const got = await once(o, side, remote, ctl, responder, size, 'run', first, undefined, live);
  const mine = cpuUs(process.cpuUsage(c0));
  const r1 = env.oneProcess ? undefined : checkCpu(await ctl.call('cpu'));
  const theirs = r0 && r1 ? r1.user - r0.user + r1.system - r0.system : 0;
  const wallMs = performance.now() - wall0;
  const cpuUtil = o.cpuUtil ? { cpuUtilPct: (100 * mine) / 1000 / Math.max(wallMs, 1e-3) } : {};
  if (typeof got === 'number') throw new Error('unreachable');
  if (got.kind === 'bw') {
    const moved = got.row.iterations * size;
    return { row: { ...got.row, cpuSecPerGB: cpuPerGB(mine + theirs, moved), ...cpuUtil, ...warm } as BwRow };
  }
  return { row: { ...got.row, ...cpuUtil, ...warm } as LatRow, samples: got.samples };
}

/**
 * finish waits for the server's side of the run, which started with ours at prepare: under -b
 * its own direction may run as long as ours again, so twice what ours took, and a margin.
 */
function finishTimeout(t0: number): number {
  return 2 * (performance.now() - t0) + CALL_TIMEOUT_MS;
}

type Once = { kind: 'bw'; row: BwRow } | { kind: 'lat'; row: LatRow; samples: number[] };

/**
 * One run of one size; a warm-up returns the number the next run's pings start from and counts
 * the operations it completed in `count`.
 */
async function once(
  o: PerfOptions, side: PerfSide, remote: SideInfo, ctl: ControlPeer, responder: Responder | undefined, size: number, phase: PrepareParams['phase'], first: number,
  count?: { done: number },
  live?: { progress: Progress; label: string; totalS: number },
): Promise<Once | number> {
  const warm = phase === 'warmup';
  await ctl.call('prepare', { size, phase } satisfies PrepareParams);
  const t0 = performance.now();
  if (o.kind === 'lat') {
    // -D: the duration alone ends the run (o.iters is then only the test's default count).
    const iters = warm ? WARM_LAT_ITERS : o.durationS !== undefined ? Infinity : o.iters;
    const ran = new LiveCount();
    ran.live = live ? startLive(live.progress, { ...live, count: () => ran.done, rate: latRate }) : undefined;
    const samples = await runLatClient(side, remote, { size, iters, durationS: warm ? WARM_LAT_S : o.durationS, gapUs: o.latencyGapUs }, responder, first, !warm, ran).finally(() => ran.live?.stop());
    await ctl.call('finish', { size }, finishTimeout(t0));
    if (count) count.done += ran.done;
    if (warm) return first + ran.done;
    return { kind: 'lat', row: latRow('sabre', size, samples), samples };
  }
  const sender = new BwSender(side, remote, { size, iters: warm ? o.txDepth * o.qps : o.iters, durationS: warm ? undefined : o.durationS });
  let finish: Promise<unknown> | undefined;
  let theirs: BwRow | null | undefined;
  let failed: Error | undefined;
  sender.post();
  const line = live ? startLive(live.progress, { ...live, count: () => sender.completed, rate: bwRate(size) }) : undefined;
  await pump(
    side,
    { send: sender.onSend, recv: responder?.onRecv, batch: sender.batch },
    () => {
      // Our direction done: ask the server to finish (under -b, its own direction) while this
      // loop keeps our receives posted for whatever it still sends.
      if (sender.finished && !finish) {
        finish = ctl.call('finish', { size }, finishTimeout(t0)).then(
          (r) => (theirs = checkFinishRow(r)),
          (e: Error) => ((failed = e), (theirs = null)),
        );
      }
      line?.poke();
      return sender.finished && theirs !== undefined;
    },
    () => !sender.finished,
  ).finally(() => line?.stop());
  if (failed) throw failed;
  if (count) count.done += sender.completed;
  if (warm) return first;
  const mine = sender.row();
  return { kind: 'bw', row: o.bidirectional && theirs ? sumBw(mine, theirs) : mine };
}
