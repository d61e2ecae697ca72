// --report FILE.html: one self-contained page (no network, nothing beside it): the run's header,
// the result table, and charts against message size on a log2 axis — bandwidth (sabre average
// and peak, baseline), message rate and CPU per GB for bandwidth tests; latency percentiles for
// latency tests — with the baseline beside sabre.
//
// Charts are drawn by uPlot (MIT, leeoniya/uPlot), inlined: ~51 KB minified + 2 KB CSS against
// ~200 KB for Chart.js, with log-scale axes built in, canvas rendering, no dependencies, and
// regular releases. Chart.js would do the job too, at four times the weight in every report.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { PerfReport } from './client.js';
import type { BwRow, LatRow, Row } from './results.js';

const require = createRequire(import.meta.url);

/** The message when --report is given and uplot is not installed. */
export const REPORT_NEEDS_UPLOT = '--report needs uplot (an optional dependency of sabre): npm install uplot';

// uplot is an optional peer dependency: only reports need it, so its absence is said before a
// run starts (checkReportAssets) rather than after the run has been paid for.
function assetPath(path: string): string {
  try {
    return require.resolve(path);
  } catch (e) {
    throw new Error(REPORT_NEEDS_UPLOT, { cause: e });
  }
}

function asset(path: string): string {
  return readFileSync(assetPath(path), 'utf8');
}

/** Throws REPORT_NEEDS_UPLOT when the chart library a report inlines is not installed. */
export function checkReportAssets(): void {
  assetPath('uplot/dist/uPlot.iife.min.js');
  assetPath('uplot/dist/uPlot.min.css');
}

const esc = (s: unknown) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** JSON that is safe inside a <script> element. */
const scriptJson = (v: unknown) => JSON.stringify(v).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');

export interface ChartSpec {
  id: string;
  title: string;
  yLabel: string;
  /** Series after x: label, colour, dashed, values per size (null: none). */
  series: { label: string; stroke: string; dash?: boolean; values: (number | null)[] }[];
}

const SABRE = '#1f6feb';
const SABRE2 = '#6e9ff7';
const BASE = '#d1642a';
const BASE2 = '#f0a070';

/** The charts for a report: pure data, so tests can check them without a browser. */
export function chartSpecs(r: PerfReport): { sizes: number[]; charts: ChartSpec[] } {
  const sabre = r.results.filter((x) => x.source === 'sabre');
  const sizes = sabre.map((x) => x.bytes);
  const base = (size: number) => r.results.find((x) => x.source !== 'sabre' && x.bytes === size);
  const baseName = r.results.find((x) => x.source !== 'sabre')?.source;
  const pos = (v: number | undefined) => (v !== undefined && v > 0 ? v : null);
  const col = <T extends Row>(rows: (T | undefined)[], f: (x: T) => number | undefined) => rows.map((x) => pos(x ? f(x) : undefined));
  const bases = sizes.map(base);
  const charts: ChartSpec[] = [];
  if (r.results[0]?.kind === 'bw') {
    const s = sabre as BwRow[];
    const b = bases as (BwRow | undefined)[];
    charts.push({
      id: 'bw', title: 'Bandwidth', yLabel: 'MiB/sec',
      series: [
        { label: 'sabre BW average', stroke: SABRE, values: col(s, (x) => x.bwAvgMiBs) },
        { label: 'sabre BW peak', stroke: SABRE2, dash: true, values: col(s, (x) => x.bwPeakMiBs) },
        ...(baseName ? [{ label: `${baseName} BW average`, stroke: BASE, values: col(b, (x) => x.bwAvgMiBs) }, { label: `${baseName} BW peak`, stroke: BASE2, dash: true, values: col(b, (x) => x.bwPeakMiBs) }] : []),
      ],
    });
    charts.push({
      id: 'rate', title: 'Message rate', yLabel: 'Mpps',
      series: [{ label: 'sabre', stroke: SABRE, values: col(s, (x) => x.msgRateMpps) }, ...(baseName ? [{ label: baseName, stroke: BASE, values: col(b, (x) => x.msgRateMpps) }] : [])],
    });
    charts.push({
      id: 'cpu', title: 'CPU per GB moved (both processes, user + system)', yLabel: 's/GB',
      series: [{ label: 'sabre', stroke: SABRE, values: col(s, (x) => x.cpuSecPerGB) }, ...(baseName ? [{ label: baseName, stroke: BASE, values: col(b, (x) => x.cpuSecPerGB) }] : [])],
    });
  } else {
    const s = sabre as LatRow[];
    const b = bases as (LatRow | undefined)[];
    charts.push({
      id: 'lat', title: 'Latency percentiles', yLabel: 'usec',
      series: [
        { label: 'sabre t_min', stroke: '#9db8ef', values: col(s, (x) => x.tMin) },
        { label: 'sabre t_typical', stroke: SABRE, values: col(s, (x) => x.tTypical) },
        { label: 'sabre 99%', stroke: '#2a4f9e', dash: true, values: col(s, (x) => x.p99) },
        { label: 'sabre 99.9%', stroke: '#14285a', dash: true, values: col(s, (x) => x.p999) },
        ...(baseName
          ? [
              { label: `${baseName} t_typical`, stroke: BASE, values: col(b, (x) => x.tTypical) },
              { label: `${baseName} 99%`, stroke: BASE2, dash: true, values: col(b, (x) => x.p99) },
            ]
          : []),
      ],
    });
  }
  return { sizes, charts };
}

const BW_COLS: [string, keyof BwRow, number][] = [
  ['#bytes', 'bytes', 0], ['#iterations', 'iterations', 0], ['BW peak [MiB/s]', 'bwPeakMiBs', 2], ['BW average [MiB/s]', 'bwAvgMiBs', 2],
  ['BW average [Gb/s]', 'bwAvgGbs', 3], ['MsgRate [Mpps]', 'msgRateMpps', 6], ['CPU [s/GB]', 'cpuSecPerGB', 3], ['lost %', 'lossPct', 2], ['sabre÷baseline speed', 'speedRatio', 2],
];
const LAT_COLS: [string, keyof LatRow, number][] = [
  ['#bytes', 'bytes', 0], ['#iterations', 'iterations', 0], ['t_min [µs]', 'tMin', 2], ['t_max [µs]', 'tMax', 2], ['t_typical [µs]', 'tTypical', 2],
  ['t_avg [µs]', 'tAvg', 2], ['t_stdev [µs]', 'tStdev', 2], ['99% [µs]', 'p99', 2], ['99.9% [µs]', 'p999', 2], ['lost %', 'lossPct', 2], ['sabre÷baseline speed', 'speedRatio', 2],
];

function table(r: PerfReport): string {
  const bw = r.results[0]?.kind !== 'lat';
  const cols = (bw ? BW_COLS : LAT_COLS) as [string, string, number][];
  const head = `<tr><th>source</th>${cols.map(([h]) => `<th>${esc(h)}</th>`).join('')}</tr>`;
  const body = r.results
    .map((row) => {
      const rec = row as unknown as Record<string, unknown>;
      const cells = cols.map(([, k, d]) => {
        const v = rec[k];
        return `<td>${typeof v === 'number' ? esc(v.toFixed(d)) : ''}</td>`;
      });
      return `<tr class="${row.source === 'sabre' ? 'sabre' : 'baseline'}"><td>${esc(row.source)}</td>${cells.join('')}</tr>`;
    })
    .join('\n');
  return `<table class="results" id="results"><thead>${head}</thead><tbody>\n${body}\n</tbody></table>`;
}

function header(r: PerfReport): string {
  const rows: [string, unknown][] = [
    ['date', r.date], ['host', r.hostname], ['sabre', r.sabre], ['device', r.device], ['transport', r.transport], ['connection', r.connection.toUpperCase()],
    ['QPs', r.qps], ['TX depth', r.txDepth], ['CQ moderation', r.cqMod], ['MTU', r.mtu !== undefined ? `${r.mtu} B` : 'n/a'], ...(r.integrity ? [['integrity', r.integrity] as [string, unknown]] : []), ['max inline', `${r.inline} B`],
    ['NIC threads', r.workers], [r.durationS !== undefined ? 'duration per size' : 'iterations per size', r.durationS !== undefined ? `${r.durationS} s` : r.iters],
    ['warm-up', r.warmUp ? 'yes' : 'no'], ['bidirectional', r.bidirectional ? 'yes' : 'no'], ['immediate data', r.imm ? 'yes' : 'no'],
    ...(r.atomicType ? [['atomic', r.atomicType] as [string, unknown]] : []),
    ['local', `QPN ${r.local.qps.map((q) => q.qpn).join(', ')}, RKey 0x${(r.local.rkey >>> 0).toString(16)}, ${JSON.stringify(r.local.address)}`],
    ['remote', `QPN ${r.remote.qps.map((q) => q.qpn).join(', ')}, RKey 0x${(r.remote.rkey >>> 0).toString(16)}, ${JSON.stringify(r.remote.address)}`],
  ];
  return `<table class="header" id="header">${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join('')}</table>`;
}

// Runs in the page: draws each chart with uPlot, log2 size axis, log10 value axis.
const PAGE_SCRIPT = `
(function () {
  var data = JSON.parse(document.getElementById('sabre-data').textContent);
  // Axis labels: uPlot hands null for the log ticks it leaves unlabelled.
  var fmt = function (n) { return n == null ? '' : n >= 1048576 ? (n / 1048576) + 'M' : n >= 1024 ? (n / 1024) + 'K' : String(n); };
  var fmtY = function (v) { return v == null ? '' : v >= 1000 ? Math.round(v).toLocaleString('en') : v >= 1 ? String(+v.toPrecision(3)) : v === 0 ? '0' : v.toExponential(0); };
  var charts = [];
  data.charts.forEach(function (c) {
    var el = document.getElementById('chart-' + c.id);
    var lo = Math.min.apply(null, data.sizes), hi = Math.max.apply(null, data.sizes);
    var opts = {
      title: c.title, width: Math.min(960, el.clientWidth || 960), height: 380,
      scales: {
        x: { time: false, distr: 3, log: 2, range: function () { return [lo / 2, hi * 2]; } },
        y: { distr: 3, log: 10 }
      },
      axes: [
        { label: 'message size [bytes]', values: function (u, vals) { return vals.map(fmt); } },
        { label: c.yLabel, size: 70, values: function (u, vals) { return vals.map(fmtY); } }
      ],
      series: [{ label: 'bytes', value: function (u, v) { return v == null ? '-' : fmt(v); } }].concat(c.series.map(function (s) {
        return { label: s.label, stroke: s.stroke, width: 2, dash: s.dash ? [6, 4] : undefined, points: { show: true, size: 6 }, spanGaps: true };
      }))
    };
    charts.push(new uPlot(opts, [data.sizes].concat(c.series.map(function (s) { return s.values; })), el));
  });
  window.__sabreCharts = charts;
  document.body.setAttribute('data-charts-ready', String(charts.length));
})();
`;

export function renderHtmlReport(r: PerfReport): string {
  const { sizes, charts } = chartSpecs(r);
  const title = `sabre perf: ${r.title} (${r.transport}, ${r.connection.toUpperCase()})`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="sabre ${esc(r.sabre)}">
<title>${esc(title)}</title>
<style>
${asset('uplot/dist/uPlot.min.css')}
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1000px; color: #1b1f24; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
table.header th { text-align: left; padding: 2px 14px 2px 0; font-weight: 600; color: #555; }
table.results th, table.results td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: right; }
table.results td:first-child, table.results th:first-child { text-align: left; }
tr.baseline td { color: #8a4a1c; }
.chart { margin: 12px 0 24px; }
.note { color: #666; font-size: 12px; }
</style>
</head>
<body>
<h1>${esc(title)}</h1>
<p class="note">Bandwidth in MiB/sec (2<sup>20</sup> bytes) as perftest 6.x; CPU per GB is the user + system time of both processes, all threads, per 10<sup>9</sup> bytes; sabre÷baseline speed &gt; 1 means sabre was faster.</p>
${header(r)}
<h2>Results</h2>
${table(r)}
<h2>Charts</h2>
${charts.map((c) => `<div class="chart" id="chart-${esc(c.id)}"></div>`).join('\n')}
<script type="application/json" id="sabre-data">${scriptJson({ sizes, charts, report: r })}</script>
<script>
${asset('uplot/dist/uPlot.iife.min.js')}
</script>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}

export function writeHtmlReport(file: string, r: PerfReport): void {
  writeFileSync(file, renderHtmlReport(r));
}
