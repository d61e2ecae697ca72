// --metrics-port for perf: this side's device, PD (its QPs) and CQ exported, every completion it
// reaps counted, latency samples and bandwidth results observed.
import type { SabreMetrics } from '../../metrics/registry.js';
import type { MetricsServer } from '../../metrics/server.js';
import { startCliMetrics } from '../metrics.js';
import type { Out } from './print.js';
import type { Row } from './results.js';
import type { PerfSide } from './side.js';

export async function startPerfMetrics(port: number, out: Out, quiet: boolean): Promise<MetricsServer> {
  const m = await startCliMetrics(port);
  if (!quiet) out(` Metrics         : ${m.url}`);
  return m;
}

export function attachMetrics(side: PerfSide, m: SabreMetrics, role: 'client' | 'server'): void {
  const dev = side.dev;
  m.addDevice(dev, `perf-${role}`);
  m.addPd(side.pd);
  m.addCq(dev, side.cq, 'perf');
  side.observe = (wcs) => m.countCompletions(dev, wcs);
}

export function observeRow(m: SabreMetrics | undefined, test: string, transport: string, r: Row, samplesUs?: readonly number[]): void {
  if (!m) return;
  if (r.kind === 'bw') m.setBandwidth({ test, transport, size: String(r.bytes), source: r.source }, r.bwAvgMiBs * (1 << 20));
  else if (samplesUs) for (const s of samplesUs) m.observeLatency({ op: test, transport, source: r.source }, s / 1e6);
}
