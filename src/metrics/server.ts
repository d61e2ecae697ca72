// The /metrics endpoint: node:http serving the registry in Prometheus' text format. `sabre perf
// --metrics-port` and `sabre serve --metrics-port` call startMetricsServer; anything else that
// owns devices can too.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCode, SabreError } from '../core/errors.js';
import { Lifecycle } from '../core/lifecycle.js';
import type { Device } from '../verbs/device.js';
import { publish } from './diagnostics.js';
import { SabreMetrics } from './registry.js';

/** Connections served at once (a scraper needs one); more are closed as they arrive. */
export const MAX_CONNECTIONS = 64;
/** How long a request's headers and body may take to arrive. */
export const REQUEST_TIMEOUT_MS = 10_000;

export interface MetricsServer {
  readonly metrics: SabreMetrics;
  readonly port: number;
  readonly url: string;
  /** Stop serving (open connections are cut); every call returns the first call's promise. */
  close(): Promise<void>;
}

/**
 * Serve `GET /metrics` on host:port (port 0: any free port). Pass devices to export (more can be
 * added later through `.metrics.addDevice`), or a SabreMetrics built elsewhere. Binds 127.0.0.1
 * unless told otherwise: metrics name peers and addresses, so exposing them is a choice.
 */
export async function startMetricsServer(what: readonly Device[] | SabreMetrics, port: number, host = '127.0.0.1'): Promise<MetricsServer> {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) throw new SabreError(ErrorCode.InvalidArgument, `metrics port must be an integer in 0..65535, not ${String(port)}`);
  const metrics = what instanceof SabreMetrics ? what : new SabreMetrics();
  if (!(what instanceof SabreMetrics)) for (const d of what) metrics.addDevice(d);
  // Bounded: a client that opens connections and never finishes a request holds one of at most
  // MAX_CONNECTIONS, for at most REQUEST_TIMEOUT_MS (checked every second, not node's 30 s).
  const server: Server = createServer({ headersTimeout: REQUEST_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS, connectionsCheckingInterval: 1000 }, (req, res) => {
    const t0 = performance.now();
    const path = (req.url ?? '/').split('?')[0];
    const done = (status: number, bytes: number) => publish('sabre:metrics:scrape', () => ({ url: req.url, status, ms: performance.now() - t0, bytes }));
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return done(405, 0);
    }
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('sabre: metrics are at /metrics\n');
      return done(404, 0);
    }
    metrics.metrics().then(
      (body) => {
        res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(req.method === 'HEAD' ? undefined : body);
        done(200, body.length);
      },
      (e: Error) => {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`sabre: ${e.message}\n`);
        done(500, 0);
      },
    );
  });
  server.maxConnections = MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(e.code === 'EADDRINUSE' ? new SabreError(ErrorCode.AddressInUse, `metrics port ${port} is already in use`, { cause: e }) : new SabreError(ErrorCode.InvalidArgument, `metrics: cannot listen on ${host}:${port}: ${e.message}`, { cause: e })));
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  // A second server.close() would call back at once with "not running": the caller would go on
  // while the first close still waits for the socket, so every close shares the first one's end.
  const life = new Lifecycle();
  return {
    metrics,
    port: bound,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}/metrics`,
    close: () =>
      life.close(() => {
        server.closeAllConnections();
        server.close(() => life.end());
      }),
  };
}
