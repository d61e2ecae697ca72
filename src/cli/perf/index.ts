// `sabre perf`: roles, the header block, the result tables, --json, --baseline and --plot.
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Server } from 'node:net';
import { BW_HEADER, hex, LAT_HEADER, latRow, bwRow, RULE } from '../table.js';
import { BaselineServer, runBaseline } from './baseline.js';
import { runBw, runLat, type BwResult, type LatResult } from './client.js';
import { connectControl, directPeer, serveControl, type ControlPeer } from './control.js';
import type { PerfOptions } from './options.js';
import { svgPlot } from './plot.js';
import { PerfServer } from './server.js';
import { PerfSide, type SideInfo } from './side.js';

const TITLES: Record<PerfOptions['test'], string> = {
  write_bw: 'RDMA_Write BW Test',
  read_bw: 'RDMA_Read BW Test',
  send_bw: 'Send BW Test',
  write_lat: 'RDMA_Write Latency Test',
  read_lat: 'RDMA_Read Latency Test',
  send_lat: 'Send Latency Test',
  atomic_lat: 'Atomic FETCH_AND_ADD Latency Test',
};

export interface PerfRow {
  result: BwResult | LatResult;
  baseline?: BwResult | LatResult;
  /** sabre ÷ baseline: bandwidth (higher is better) or typical latency (lower is better). */
  ratio?: number;
}

export interface PerfReport {
  test: PerfOptions['test'];
  transport: PerfOptions['transport'];
  connection: PerfOptions['conn'];
  qps: number;
  txDepth: number;
  local: SideInfo;
  remote: SideInfo;
  results: PerfRow[];
}

type Out = (line: string) => void;

function header(o: PerfOptions, side: PerfSide, local: SideInfo, remote: SideInfo, out: Out): void {
  const mtu = side.dev.mtu;
  const addr = (who: string, s: SideInfo, i: number) =>
    ` ${who} address: LID 0000 QPN ${hex(s.qps[i]!.qpn, 4)} PSN ${hex(s.qps[i]!.psn, 6)} RKey ${hex(s.rkey >>> 0, 8)} VAddr ${hex(s.vaddr, 14)}`;
  out(RULE);
  out(`                    ${TITLES[o.test]}`);
  out(` Dual-port       : OFF\t\tDevice         : sabre-${o.transport}`);
  out(` Number of qps   : ${o.qps}\t\tTransport type : ${o.transport.toUpperCase()}`);
  out(` Connection type : ${o.conn.toUpperCase()}\t\tUsing SRQ      : OFF`);
  out(` TX depth        : ${o.txDepth}`);
  out(` CQ Moderation   : 1`);
  out(` Mtu             : ${mtu !== undefined ? `${mtu}[B]` : 'n/a'}`);
  out(` Link type       : ${o.transport === 'inproc' ? 'Memory' : 'Ethernet'}`);
  out(` Max inline data : ${o.inline}[B]`);
  if (o.transport === 'udp') out(` DP workers      : ${o.workers}`);
  out(` rdma_cm QPs     : OFF`);
  out(` Data ex. method : ${o.transport === 'inproc' ? 'Direct' : 'Ethernet'}`);
  out(RULE);
  for (let i = 0; i < local.qps.length; i++) {
    out(addr('local', local, i));
    out(addr('remote', remote, i));
  }
  out(RULE);
}

function isLat(o: PerfOptions): boolean {
  return o.test.endsWith('_lat');
}

function row(o: PerfOptions, r: BwResult | LatResult): string {
  if (isLat(o)) return latRow(r.bytes, r.iterations, r as LatResult);
  const b = r as BwResult;
  return bwRow(b.bytes, b.iterations, b.bwPeakMBs, b.bwAvgMBs, b.msgRateMpps);
}

/** The client role against any control peer; prints as it goes unless --json. */
async function drive(o: PerfOptions, side: PerfSide, ctl: ControlPeer, baselineHost: string, out: Out): Promise<PerfReport> {
  const remote = await ctl.call<SideInfo>('hello');
  const local = side.info();
  await Promise.all([ctl.call('connect', local), side.connect(remote)]);
  if (!o.json) {
    header(o, side, local, remote, out);
    out(isLat(o) ? LAT_HEADER : BW_HEADER);
  }
  const results: PerfRow[] = [];
  for (const size of o.sizes) {
    const result = isLat(o) ? await runLat(side, remote, ctl, size) : await runBw(side, remote, ctl, size);
    const r: PerfRow = { result };
    if (!o.json) out(row(o, result));
    if (o.baseline) {
      const copy = o.transport === 'inproc' ? { src: side.mr.buffer as Uint8Array, dst: side.mr.buffer as Uint8Array } : undefined;
      if (copy) copy.dst = copy.src.subarray(Math.floor(copy.src.length / 2));
      const base = await runBaseline(o, ctl, baselineHost, size, copy);
      r.baseline = base;
      r.ratio = isLat(o)
        ? (result as LatResult).typical / Math.max(1e-9, (base as LatResult).typical)
        : (result as BwResult).bwAvgMBs / Math.max(1e-9, (base as BwResult).bwAvgMBs);
      if (!o.json) {
        const what = o.transport === 'udp' ? 'node:dgram' : o.transport === 'tcp' ? 'node:net' : 'Uint8Array.set';
        out(`${row(o, base)}   <- baseline ${what}; sabre/baseline = ${r.ratio.toFixed(2)}${isLat(o) ? ' (typical latency)' : ' (BW average)'}`);
      }
    }
    results.push(r);
  }
  if (!o.json) out(RULE);
  await ctl.call('bye');
  return { test: o.test, transport: o.transport, connection: o.conn, qps: o.qps, txDepth: o.txDepth, local, remote, results };
}

function serverHandler(server: PerfServer, baseline: BaselineServer, host: string) {
  return async (method: string, params: unknown): Promise<unknown> => {
    if (method === 'baselineOpen') return baseline.open({ ...(params as { transport: 'udp' | 'tcp'; mode: 'bw' | 'lat'; total: number }), host });
    if (method === 'baselineResult') return baseline.result();
    if (method === 'baselineClose') return baseline.close();
    return server.handle(method, params);
  };
}

/** `--server`: wait for one client, serve it, exit. */
export async function runServer(o: PerfOptions, out: Out, onListening?: (port: number) => void): Promise<void> {
  const host = '0.0.0.0';
  const side = await PerfSide.open(o, o.transport === 'inproc' ? undefined : '127.0.0.1');
  const server = new PerfServer(side);
  const baseline = new BaselineServer();
  let closed!: () => void;
  const done = new Promise<void>((r) => (closed = r));
  const ctl: Server = await serveControl(host, o.port, serverHandler(server, baseline, '127.0.0.1'), () => closed());
  const port = (ctl.address() as { port: number }).port;
  if (!o.json) out(` Waiting for client to connect on port ${port} ...`);
  onListening?.(port);
  await done;
  ctl.close();
  await baseline.close();
  await side.close();
}

/** Client with a HOST, or both sides on loopback when neither HOST nor --server is given. */
export async function runPerf(o: PerfOptions, out: Out): Promise<PerfReport> {
  if (o.server) throw new Error('runPerf is the client role');
  let report: PerfReport;
  if (o.transport === 'inproc') {
    if (o.host !== undefined) throw new Error('inproc devices live in one process: run without HOST');
    // Both sides in this process: the control calls are plain method calls.
    const a = await PerfSide.open(o);
    const b = await PerfSide.open(o);
    const server = new PerfServer(b);
    try {
      report = await drive(o, a, directPeer(server.handle), '127.0.0.1', out);
    } finally {
      await a.close();
      await b.close();
    }
  } else if (o.host !== undefined) {
    const side = await PerfSide.open(o, '0.0.0.0');
    let ctl: ControlPeer | undefined;
    try {
      ctl = await connectControl(o.host, o.port);
      report = await drive(o, side, ctl, o.host, out);
    } finally {
      ctl?.close();
      await side.close();
    }
  } else {
    // Loopback in two processes: fork ourselves as the server on an ephemeral control port.
    const main = fileURLToPath(new URL('../main.js', import.meta.url));
    const args = ['perf', o.test, '--server', '-p', '0', '--transport', o.transport, '-c', o.conn, '-q', String(o.qps), '-t', String(o.txDepth), '-I', String(o.inline), '--json'];
    if (o.sizes.length > 1) args.push('-a');
    else args.push('-s', String(o.sizes[0]));
    if (o.mtu !== undefined) args.push('--mtu', String(o.mtu));
    if (o.workers > 0) args.push('--workers', String(o.workers));
    const child = fork(main, args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const exited = new Promise<number>((r) => child.once('exit', (code) => r(code ?? 1)));
    const port = await new Promise<number>((resolve, reject) => {
      child.once('message', (m: { port?: number }) => (m.port ? resolve(m.port) : reject(new Error('perf server did not start'))));
      child.once('exit', (code) => reject(new Error(`perf server exited with status ${code}`)));
    });
    const side = await PerfSide.open(o, '127.0.0.1');
    let ctl: ControlPeer | undefined;
    try {
      ctl = await connectControl('127.0.0.1', port);
      report = await drive(o, side, ctl, '127.0.0.1', out);
    } finally {
      ctl?.close();
      await side.close();
      const timer = setTimeout(() => child.kill(), 5000);
      await exited;
      clearTimeout(timer);
    }
  }
  if (o.plot !== undefined) {
    const lat = isLat(o);
    const pick = (r: BwResult | LatResult) => (lat ? (r as LatResult).typical : (r as BwResult).bwAvgMBs);
    const series = [{ name: `sabre ${o.transport}`, color: '#1f77b4', points: report.results.map((r) => ({ x: r.result.bytes, y: pick(r.result) })) }];
    if (o.baseline) series.push({ name: 'baseline', color: '#ff7f0e', points: report.results.map((r) => ({ x: r.result.bytes, y: pick(r.baseline!) })) });
    writeFileSync(o.plot, svgPlot(`${TITLES[o.test]} (${o.transport}, ${o.conn})`, lat ? 't_typical [usec]' : 'BW average [MB/sec]', series));
  }
  return report;
}
