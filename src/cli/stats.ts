// Latency statistics the way perftest reports them: min, max, typical (median), average,
// standard deviation and tail percentiles, all from the raw samples.

export interface LatencyStats {
  count: number;
  min: number;
  max: number;
  typical: number;
  avg: number;
  stdev: number;
  p99: number;
  p999: number;
}

export function percentile(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export function latencyStats(samples: Float64Array | number[]): LatencyStats {
  const s = Float64Array.from(samples).sort();
  const n = s.length;
  if (n === 0) return { count: 0, min: 0, max: 0, typical: 0, avg: 0, stdev: 0, p99: 0, p999: 0 };
  let sum = 0;
  for (const v of s) sum += v;
  const avg = sum / n;
  let sq = 0;
  for (const v of s) sq += (v - avg) * (v - avg);
  return {
    count: n,
    min: s[0]!,
    max: s[n - 1]!,
    typical: percentile(s, 50),
    avg,
    stdev: Math.sqrt(sq / n),
    p99: percentile(s, 99),
    p999: percentile(s, 99.9),
  };
}
