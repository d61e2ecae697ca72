// `sabre serve / get / put / ls`: the file service (M6) from the command line. A failure is one
// line on stderr and exit 1 (main.ts prints it); usage errors exit 2; progress goes to stderr,
// and only when it is a terminal.
import { type ConnectOptions, FileClient, type TransferResult } from '../../files/client.js';
import { FileServer, serveFiles } from '../../files/server.js';
import { FileError } from '../../files/status.js';
import { startCliMetrics } from '../metrics.js';
import { Progress } from '../progress.js';
import type { Command } from '../command.js';
import { formatRate } from '../table.js';
import { UsageError } from '../usage.js';
import { lsLine } from './listing.js';
import { type ClientCli, FILES_HELP, parseClient, parseRemote, parseServe } from './options.js';

export const FILES_COMMANDS = ['serve', 'get', 'put', 'ls'] as const;
export type FilesCommand = (typeof FILES_COMMANDS)[number];

type Out = (line: string) => void;

const SUMMARY: Record<FilesCommand, string> = {
  serve: 'serve a directory over the file service (M6): sabre serve DIR',
  get: 'download a file: sabre get HOST:PORT/PATH LOCAL',
  put: 'upload a file: sabre put LOCAL HOST:PORT/PATH',
  ls: 'list a served directory: sabre ls HOST:PORT[/DIR]',
};

/** The four rows of the command table (src/cli/main.ts). */
export const filesCommands: readonly Command[] = FILES_COMMANDS.map((name) => ({
  name,
  summary: SUMMARY[name],
  help: () => FILES_HELP[name],
  run: (argv, io) => runFilesCommand(name, argv, io.out),
}));

/** Run one of the file-service commands; resolves with the exit status. */
export async function runFilesCommand(cmd: FilesCommand, argv: string[], out: Out): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    out(FILES_HELP[cmd]);
    return 0;
  }
  switch (cmd) {
    case 'serve':
      return serve(argv, out);
    case 'get':
    case 'put':
      return transfer(cmd, argv, out);
    case 'ls':
      return ls(argv, out);
  }
}

async function serve(argv: string[], out: Out): Promise<number> {
  const o = parseServe(argv);
  // --metrics-port first: one that cannot be served (no prom-client, the port taken) fails the
  // command before it binds the service's ports and hands out a token. It shows the devices (their
  // QPs and links, read at scrape time) and the file service's own counters as sabre_files_stat.
  const metrics = o.metricsPort === undefined ? undefined : await startCliMetrics(o.metricsPort).catch((e: Error) => {
    throw new Error(`serve: ${e.message}`);
  });
  const srv = await serveFiles(o.dir, { host: o.host, port: o.port, transports: o.transports, ...(o.token ? { token: o.token } : {}), readOnly: o.readOnly, fsync: o.fsync, ...(o.integrity ? { integrity: o.integrity } : {}),
    ...(o.maxConnectionsPerHost !== undefined ? { maxConnectionsPerHost: o.maxConnectionsPerHost } : {}), ...(o.partSweepAgeMs !== undefined ? { partSweepAgeMs: o.partSweepAgeMs } : {}),
  }).catch(async (e: NodeJS.ErrnoException) => {
    await metrics?.close();
    throw new Error(e.code === 'ENOENT' || e.code === 'ENOTDIR' ? `serve: ${o.dir} is not a directory` : `serve: ${e.message}`);
  });
  const ports = Object.entries(srv.devices).map(([t, d]) => `${t} ${String(d!.address.port)}`).join(', ');
  out(`sabre serve: ${srv.jail.root} on ${srv.address.host}:${srv.address.port} (${ports})${o.readOnly ? ', read-only' : ''}${o.fsync ? ', fsync' : ''}${o.integrity ? `, integrity ${o.integrity}` : ''}`);
  if (!o.token) out(`token: ${srv.token}   (clients: --token ${srv.token}, or SABRE_TOKEN)`);
  // Online guessing is rationed per source (one checked proof per 2 s), not made impossible: a
  // short token falls to a patient guesser (docs/files.md "Security model").
  else if (srv.weakToken) out(`sabre serve: weak token: ${srv.token.length} characters, fewer than ${FileServer.STRONG_TOKEN}: give at least ${FileServer.STRONG_TOKEN} random ones (or leave --token out for a random one)`);
  if (metrics) {
    for (const [t, d] of Object.entries(srv.devices)) if (d) metrics.metrics.addDevice(d, `serve-${t}`);
    metrics.metrics.addSource('files', 'serve', () => ({ ...srv.stats() }));
    out(`metrics: ${metrics.url}`);
  }
  process.send?.({ port: srv.address.port, token: srv.token, ...(metrics ? { metricsUrl: metrics.url } : {}) });
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await metrics?.close();
  await srv.close();
  return 0;
}

/** get/put's line on stderr (the one Progress helper: redrawn in place, only on a terminal). */
function progress(enabled: boolean): { update: (done: number, total: number) => void; end: () => void } {
  const line = new Progress(process.stderr, 100, undefined, enabled);
  const t0 = performance.now();
  return {
    update(done, total) {
      const pct = total > 0 ? ((100 * done) / total).toFixed(1) : '100.0';
      const rate = formatRate(done / Math.max(1e-3, (performance.now() - t0) / 1000));
      line.update(`  ${pct.padStart(5)}%  ${(done / 1e6).toFixed(1)} / ${(total / 1e6).toFixed(1)} MB  ${rate}`, done >= total);
    },
    end: () => line.done(),
  };
}

/** The client side of get, put and ls. */
function connectOptions(o: ClientCli): ConnectOptions {
  return {
    token: o.token, transport: o.transport, ...(o.integrity ? { integrity: o.integrity } : {}),
    ...(o.requestTimeoutMs !== undefined ? { requestTimeoutMs: o.requestTimeoutMs } : {}),
  };
}

async function transfer(cmd: 'get' | 'put', argv: string[], out: Out): Promise<number> {
  const { o, positionals } = parseClient(argv, cmd);
  const remoteArg = cmd === 'get' ? positionals[0]! : positionals[1]!;
  const local = cmd === 'get' ? positionals[1]! : positionals[0]!;
  const r = parseRemote(remoteArg, true);
  const bar = progress(!o.json && process.stderr.isTTY === true);
  let done = 0;
  let total = 0;
  const onProgress = (d: number, t: number): void => {
    done = d;
    total = t;
    bar.update(d, t);
  };
  const c = await FileClient.connect({ host: r.host, port: r.port }, connectOptions(o)).catch((e: Error) => {
    throw new Error(`${cmd}: ${e.message}`);
  });
  let res: TransferResult;
  try {
    res = cmd === 'get' ? await c.get(r.path, local, { onProgress, dedup: o.dedup }) : await c.put(local, r.path, { onProgress, fsync: o.fsync, dedup: o.dedup });
  } catch (e) {
    bar.end();
    const err = e as NodeJS.ErrnoException;
    const where = total > 0 ? ` (after ${done} of ${total} bytes)` : '';
    const msg = err instanceof FileError ? err.message : err.code === 'ENOENT' ? `${local}: no such file or directory` : err.message;
    throw new Error(`${cmd}: ${msg}${where}`);
  } finally {
    await c.end().catch(() => {});
  }
  bar.end();
  const mbPerS = res.bytes / 1e6 / Math.max(1e-9, res.seconds);
  const d = res.dedup;
  if (o.json) out(JSON.stringify({ command: cmd, bytes: res.bytes, seconds: res.seconds, transport: res.transport, mbPerS, remote: remoteArg, local, ...(d ? { dedup: d } : {}) }));
  else {
    out(`${cmd} ${remoteArg}: ${res.bytes} bytes in ${res.seconds.toFixed(3)} s (${formatRate(res.bytes / Math.max(1e-9, res.seconds))}, ${res.transport})`);
    if (d) out(`  dedup: ${d.bytesMoved} bytes of ${d.chunksMoved}/${d.chunks} chunks moved, the rest from the ${d.basisBytes}-byte basis`);
  }
  return 0;
}

async function ls(argv: string[], out: Out): Promise<number> {
  const { o, positionals } = parseClient(argv, 'ls');
  const r = parseRemote(positionals[0]!, false);
  const c = await FileClient.connect({ host: r.host, port: r.port }, connectOptions(o)).catch((e: Error) => {
    throw new Error(`ls: ${e.message}`);
  });
  try {
    const entries = await c.list(r.path).catch((e: Error) => {
      throw new Error(`ls: ${e.message}`);
    });
    if (o.json) out(JSON.stringify({ path: `/${r.path}`, entries }));
    else {
      for (const e of entries) out(lsLine(e));
    }
    return 0;
  } finally {
    await c.end().catch(() => {});
  }
}

export { UsageError };
