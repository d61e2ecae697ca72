// `sabre perf` roles: the client against a HOST, both sides on loopback (a forked server process
// for udp/tcp, two devices in this process for inproc), and what a run writes besides its table
// (--json, --out_json_file, --report).
import { fork, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { MetricsServer } from '../../metrics/server.js';
import { Progress } from '../progress.js';
import { drive, type PerfReport } from './client.js';
import { connectControl, directPeer } from './control.js';
import { startPerfMetrics } from './observe.js';
import type { PerfOptions } from './options.js';
import type { Out } from './print.js';
import { checkReportAssets, writeHtmlReport } from './report-html.js';
import { PerfServer } from './server.js';

export { runServer } from './server.js';
export type { PerfReport } from './client.js';

/** The client role (with a HOST, or both sides on loopback); writes --out_json_file and --report. */
export async function runPerf(o: PerfOptions, out: Out, tty = false): Promise<PerfReport> {
  if (o.server) throw new Error('runPerf is the client role');
  const quiet = o.json || o.output !== undefined;
  if (o.report !== undefined) checkReportAssets();
  const progress = new Progress(process.stderr, 250, undefined, tty);
  const metrics = o.metricsPort !== undefined ? await startPerfMetrics(o.metricsPort, out, quiet) : undefined;
  let report: PerfReport;
  try {
    report = await clientRole(o, out, progress, metrics);
  } finally {
    progress.done();
    await metrics?.close();
  }
  if (o.outJsonFile !== undefined) writeFileSync(o.outJsonFile, JSON.stringify(report, null, 2) + '\n');
  if (o.report !== undefined) {
    writeHtmlReport(o.report, report);
    if (!quiet) out(` Report written to ${o.report}`);
  }
  return report;
}

async function clientRole(o: PerfOptions, out: Out, progress: Progress, metrics: MetricsServer | undefined): Promise<PerfReport> {
  const m = metrics?.metrics;
  if (o.transport === 'inproc') {
    // Both sides in this process: the control calls are plain method calls.
    const server = new PerfServer(o, () => {}, true, metrics);
    try {
      return await drive(o, directPeer(server.handle), { out, progress, metrics: m, bindHost: undefined, baselineHost: '127.0.0.1', oneProcess: true });
    } finally {
      await server.close();
    }
  }
  if (o.host !== undefined) {
    const ctl = await connectControl(o.host, o.port, 10_000, o.bindHost);
    try {
      // The device binds where the control connection left from: the interface that reaches the server.
      return await drive(o, ctl, { out, progress, metrics: m, bindHost: o.bindHost ?? ctl.localAddress, baselineHost: o.host, oneProcess: false });
    } finally {
      ctl.close();
    }
  }
  // Loopback in two processes: fork ourselves as the server on an ephemeral control port. It
  // takes every size and depth from our hello; the child dies with us (see runServer's caller).
  const main = fileURLToPath(new URL('../main.js', import.meta.url));
  const args = ['perf', o.test, '--server', '-p', '0', '--transport', o.transport, '--json', '--bind_source_ip', o.bindHost ?? '127.0.0.1'];
  if (o.mtu !== undefined) args.push('--mtu', String(o.mtu));
  if (o.workers !== undefined) args.push('--workers', String(o.workers));
  if (o.integrity !== undefined) args.push('--integrity', o.integrity);
  const child: ChildProcess = fork(main, args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const exited = new Promise<number>((r) => child.once('exit', (code) => r(code ?? 1)));
  let ok = false;
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.once('message', (msg: { port?: number }) => (msg.port ? resolve(msg.port) : reject(new Error('perf server did not start'))));
      child.once('exit', (code) => reject(new Error(`perf server exited with status ${code}`)));
    });
    const ctl = await connectControl('127.0.0.1', port);
    try {
      const report = await drive(o, ctl, { out, progress, metrics: m, bindHost: o.bindHost ?? '127.0.0.1', baselineHost: '127.0.0.1', oneProcess: false });
      ok = true;
      return report;
    } finally {
      ctl.close();
    }
  } finally {
    // After a clean run the server exits on its own; after a failure it is stopped now.
    if (!ok) child.kill('SIGKILL');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}
