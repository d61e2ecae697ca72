// perftest's text layout: a dashed rule, a header block of "name : value" lines, and result
// tables. Columns are data (label and width), so a value starts exactly under its label at every
// size — perftest's own latency line, printf'd with tabs, does not. Widths keep perftest's
// label positions except where a value could not fit (the latency #bytes column is one wider,
// so 8388608 stays clear of #iterations).

export const RULE = '-'.repeat(87);

export interface Column {
  readonly label: string;
  readonly width: number;
}

export function headerLine(cols: readonly Column[]): string {
  return line(cols, cols.map((c) => c.label));
}

/** Values under their labels: each padded to its column, one space between columns. */
export function line(cols: readonly Column[], values: readonly string[]): string {
  let s = '';
  values.forEach((v, i) => {
    s += ' ' + (i < values.length - 1 ? v.padEnd(cols[i]!.width) : v);
  });
  return s;
}

export const bwColumns = (gbits: boolean, cpuUtil: boolean): Column[] => {
  const u = gbits ? 'Gb/sec' : 'MiB/sec';
  return [
    { label: '#bytes', width: 10 },
    { label: '#iterations', width: 14 },
    // perftest's spacing for either unit (RESULT_FMT / RESULT_FMT_G): four spaces, then three.
    { label: `BW peak[${u}]`, width: `BW peak[${u}]`.length + 3 },
    { label: `BW average[${u}]`, width: `BW average[${u}]`.length + 2 },
    { label: 'MsgRate[Mpps]', width: 15 },
    { label: 'CPU[s/GB]', width: 11 },
    ...(cpuUtil ? [{ label: 'CPU_Util[%]', width: 12 }] : []),
  ];
};

export const latColumns = (cpuUtil: boolean): Column[] => [
  { label: '#bytes', width: 8 },
  { label: '#iterations', width: 14 },
  { label: 't_min[usec]', width: 14 },
  { label: 't_max[usec]', width: 12 },
  { label: 't_typical[usec]', width: 18 },
  { label: 't_avg[usec]', width: 14 },
  { label: 't_stdev[usec]', width: 15 },
  { label: '99% percentile[usec]', width: 22 },
  { label: '99.9% percentile[usec]', width: 23 },
  ...(cpuUtil ? [{ label: 'CPU_Util[%]', width: 12 }] : []),
];

export function hex(n: number | bigint, width: number): string {
  return '0x' + n.toString(16).padStart(width, '0');
}

/** A rate in the unit that shows it (a small transfer is "340.2 kB/s", not "0.0 MB/s"). */
export function formatRate(bytesPerSecond: number): string {
  const r = Number.isFinite(bytesPerSecond) && bytesPerSecond > 0 ? bytesPerSecond : 0;
  if (r >= 1e9) return `${(r / 1e9).toFixed(2)} GB/s`;
  if (r >= 1e6) return `${(r / 1e6).toFixed(1)} MB/s`;
  if (r >= 1e3) return `${(r / 1e3).toFixed(1)} kB/s`;
  return `${r.toFixed(0)} B/s`;
}
