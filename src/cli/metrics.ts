// --metrics-port: the metrics server, and prom-client under it, load only when a command is
// asked for metrics, so the CLI runs where the optional prom-client is not installed.
import type { MetricsServer } from '../metrics/server.js';

/** The message when --metrics-port is given and prom-client is not installed. */
export const METRICS_NEED_PROM_CLIENT = '--metrics-port needs prom-client (an optional dependency of sabre): npm install prom-client';

export async function startCliMetrics(port: number): Promise<MetricsServer> {
  let mod: typeof import('../metrics/server.js');
  try {
    mod = await import('../metrics/server.js');
  } catch (e) {
    if ((e as { code?: string }).code === 'ERR_NOT_SUPPORTED') throw new Error(METRICS_NEED_PROM_CLIENT, { cause: e });
    throw e;
  }
  return mod.startMetricsServer([], port);
}
