// perftest's text layout: a dashed rule, a header block of "name : value" lines, and result
// tables whose columns line up with the header words.

export const RULE = '-'.repeat(87);

export const BW_HEADER = ' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]';
export const LAT_HEADER =
  ' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]';

export function bwRow(bytes: number, iters: number, peakMBs: number, avgMBs: number, mpps: number): string {
  return ` ${String(bytes).padEnd(10)} ${String(iters).padEnd(14)} ${peakMBs.toFixed(2).padEnd(18)} ${avgMBs.toFixed(2).padEnd(20)} ${mpps.toFixed(6)}`;
}

export function latRow(
  bytes: number,
  iters: number,
  s: { min: number; max: number; typical: number; avg: number; stdev: number; p99: number; p999: number },
): string {
  const f = (v: number, w: number) => v.toFixed(2).padEnd(w);
  return (
    ` ${String(bytes).padEnd(6)} ${String(iters).padEnd(14)} ${f(s.min, 14)} ${f(s.max, 12)} ${f(s.typical, 18)} ` +
    `${f(s.avg, 14)} ${f(s.stdev, 15)} ${f(s.p99, 22)} ${s.p999.toFixed(2)}`
  );
}

export function hex(n: number | bigint, width: number): string {
  return '0x' + n.toString(16).padStart(width, '0');
}
