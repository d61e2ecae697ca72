// Result rows, flat (one object per printed line, as --json gives them), and the arithmetic
// that makes them from timestamps: perftest's bandwidth average and peak, latency statistics.
import { latencyStats } from '../stats.js';

/** perftest 6.x: MiB = 2^20 bytes; --report_gbits: Gb = 10^9 bits. */
export const MIB = 1 << 20;
export const GBIT_BYTES = 125_000_000;

interface RowBase {
  /** 'sabre', or what the baseline was: 'node:dgram', 'node:net', 'Uint8Array.set'. */
  source: string;
  bytes: number;
  iterations: number;
  /** Baseline rows: sabre's speed over the baseline's (bandwidth ratio, or baseline latency ÷ sabre latency): > 1 means sabre was faster. */
  speedRatio?: number;
  /** Iterations that did not complete (raw UDP only: datagrams lost with no recovery). */
  lostIterations?: number;
  /** --perform_warm_up: the untimed operations that ran before the measured ones (not in `iterations`), and their wall time. */
  warmUpIterations?: number;
  warmUpMs?: number;
  lossPct?: number;
  /** Bytes the active side sent to the responder and got back (baselines: what the pattern moved). */
  bytesToResponder?: number;
  bytesFromResponder?: number;
}

export interface BwRow extends RowBase {
  kind: 'bw';
  seconds: number;
  bwPeakMiBs: number;
  bwAvgMiBs: number;
  bwPeakGbs: number;
  bwAvgGbs: number;
  msgRateMpps: number;
  /** User + system CPU of both processes (every thread) per 10^9 bytes moved, seconds. */
  cpuSecPerGB?: number;
  /** --cpu_util: this process's CPU over the run's wall time, percent. */
  cpuUtilPct?: number;
}

export interface LatRow extends RowBase {
  kind: 'lat';
  tMin: number;
  tMax: number;
  tTypical: number;
  tAvg: number;
  tStdev: number;
  p99: number;
  p999: number;
  cpuUtilPct?: number;
}

export type Row = BwRow | LatRow;

/**
 * perftest's peak (print_report_bw): the shortest time per operation over any run of
 * consecutive operations, min over i ≤ j of (completed[j] − posted[i]) / (j − i + 1). Exact up to
 * EXACT_PEAK operations (n²/2 pairs); above it, on an evenly spaced grid of that many indices.
 */
const EXACT_PEAK = 6000;

export function peakSecondsPerOp(posted: Float64Array, completed: Float64Array, n: number): number {
  if (n === 0) return 0;
  const step = n <= EXACT_PEAK ? 1 : n / EXACT_PEAK;
  const idx: number[] = [];
  for (let x = 0; x < n; x += step) idx.push(Math.floor(x));
  if (idx[idx.length - 1] !== n - 1) idx.push(n - 1);
  let best = Infinity;
  for (let a = 0; a < idx.length; a++) {
    const i = idx[a]!;
    const pi = posted[i]!;
    for (let b = a; b < idx.length; b++) {
      const j = idx[b]!;
      const t = (completed[j]! - pi) / (j - i + 1);
      if (t < best) best = t;
    }
  }
  return best / 1000;
}

export interface BwSample {
  size: number;
  /** Per operation, in ms (performance.now()): when posted and when its completion was reaped, by index. */
  posted: Float64Array;
  completed: Float64Array;
  n: number;
  noPeak: boolean;
}

export function bwRow(source: string, s: BwSample, extra: Partial<BwRow> = {}): BwRow {
  const seconds = s.n > 0 ? (s.completed[s.n - 1]! - s.posted[0]!) / 1000 : 0;
  const bytesPerS = seconds > 0 ? (s.n * s.size) / seconds : 0;
  const peakOp = s.noPeak ? 0 : peakSecondsPerOp(s.posted, s.completed, s.n);
  const peakBytesPerS = peakOp > 0 ? Math.max(s.size / peakOp, bytesPerS) : 0;
  return {
    kind: 'bw',
    source,
    bytes: s.size,
    iterations: s.n,
    seconds,
    bwPeakMiBs: peakBytesPerS / MIB,
    bwAvgMiBs: bytesPerS / MIB,
    bwPeakGbs: peakBytesPerS / GBIT_BYTES,
    bwAvgGbs: bytesPerS / GBIT_BYTES,
    msgRateMpps: seconds > 0 ? s.n / seconds / 1e6 : 0,
    ...extra,
  };
}

/** Sum of two directions (-b): bandwidths and rates add, as perftest adds the remote report. */
export function sumBw(a: BwRow, b: BwRow): BwRow {
  return {
    ...a,
    iterations: a.iterations + b.iterations,
    seconds: Math.max(a.seconds, b.seconds),
    bwPeakMiBs: a.bwPeakMiBs + b.bwPeakMiBs,
    bwAvgMiBs: a.bwAvgMiBs + b.bwAvgMiBs,
    bwPeakGbs: a.bwPeakGbs + b.bwPeakGbs,
    bwAvgGbs: a.bwAvgGbs + b.bwAvgGbs,
    msgRateMpps: a.msgRateMpps + b.msgRateMpps,
  };
}

/** Latency samples in microseconds → a row. */
export function latRow(source: string, size: number, samplesUs: ArrayLike<number>, extra: Partial<LatRow> = {}): LatRow {
  const s = latencyStats(Array.from(samplesUs));
  return { kind: 'lat', source, bytes: size, iterations: s.count, tMin: s.min, tMax: s.max, tTypical: s.typical, tAvg: s.avg, tStdev: s.stdev, p99: s.p99, p999: s.p999, ...extra };
}

/** Speed of sabre over the baseline, > 1 when sabre is faster, for either kind of row. */
export function speedRatio(sabre: Row, base: Row): number {
  if (sabre.kind === 'bw' && base.kind === 'bw') return base.bwAvgMiBs > 0 ? sabre.bwAvgMiBs / base.bwAvgMiBs : 0;
  if (sabre.kind === 'lat' && base.kind === 'lat') return sabre.tTypical > 0 ? base.tTypical / sabre.tTypical : 0;
  throw new Error('speedRatio of rows of different kinds');
}

/** CPU seconds per 10^9 bytes from cpuUsage deltas (µs). */
export function cpuPerGB(cpuUs: number, bytes: number): number {
  return bytes > 0 ? cpuUs / 1e6 / (bytes / 1e9) : 0;
}

export function cpuUs(d: NodeJS.CpuUsage): number {
  return d.user + d.system;
}

/** A growable pair of timestamp arrays for runs bounded by time rather than count. */
export class Stamps {
  posted: Float64Array;
  completed: Float64Array;
  constructor(cap: number) {
    this.posted = new Float64Array(Math.max(16, cap));
    this.completed = new Float64Array(Math.max(16, cap));
  }
  ensure(n: number): void {
    if (n < this.posted.length) return;
    let cap = this.posted.length;
    while (cap <= n) cap *= 2;
    const p = new Float64Array(cap);
    p.set(this.posted);
    const c = new Float64Array(cap);
    c.set(this.completed);
    this.posted = p;
    this.completed = c;
  }
}

/**
 * -D with --margin: keep the operations posted after start + margin and completed before
 * end − margin (perftest measures only inside its margins). Returns the window as a sample.
 */
export function withinMargins(s: BwSample, startMs: number, endMs: number, marginS: number): BwSample {
  if (marginS <= 0) return s;
  const lo = startMs + marginS * 1000;
  const hi = endMs - marginS * 1000;
  let i0 = 0;
  while (i0 < s.n && s.posted[i0]! < lo) i0++;
  let i1 = s.n - 1;
  while (i1 >= i0 && s.completed[i1]! > hi) i1--;
  const n = Math.max(0, i1 - i0 + 1);
  return { ...s, posted: s.posted.subarray(i0, i0 + n), completed: s.completed.subarray(i0, i0 + n), n };
}
