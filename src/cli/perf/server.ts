// The server role. It listens for the control connection first and opens nothing else until a
// client says hello: then its device is bound to the address that connection arrived on (the
// one address of this host the client can certainly reach), sized from the client's parameters
// (perftest requires the same options on both sides; here the client's are the ones). It keeps
// receives posted when the test consumes them, answers ping-pongs, runs its own sender under -b,
// and prints the same header and table as the client.
import type { Server } from 'node:net';
import { publish } from '../../metrics/diagnostics.js';
import type { MetricsServer } from '../../metrics/server.js';
import { BaselineServer, type BaselineOpen } from './baseline.js';
import { BwSender, needsReceives, Responder } from './bw.js';
import { pump } from './completions.js';
import { serveControl, type ControlConn } from './control.js';
import { LatServer } from './lat.js';
import { attachMetrics, startPerfMetrics } from './observe.js';
import { checkPeerParams, type PeerParams, type PerfOptions } from './options.js';
import { integrityOf, type Out, printHeader, rowLine, tableHead } from './print.js';
import type { BwRow, Row } from './results.js';
import { PerfSide, type SideInfo } from './side.js';
import { RULE } from '../table.js';

export interface PrepareParams {
  size: number;
  phase: 'warmup' | 'run';
}

/** The server's state for one client, and the control methods in the order the client calls them. */
export class PerfServer {
  side: PerfSide | undefined;
  private peer: SideInfo | undefined;
  private p: PeerParams | undefined;
  private responder: Responder | undefined;
  private lat: LatServer | undefined;
  private sender: BwSender | undefined;
  private pumping: Promise<void> | undefined;
  private closing = false;
  private failure: Error | undefined;
  readonly rows: Row[] = [];
  readonly baseline: BaselineServer;
  private metrics: MetricsServer | undefined;

  constructor(
    readonly o: Pick<PerfOptions, 'test' | 'transport' | 'bindHost' | 'mtu' | 'workers' | 'integrity' | 'json' | 'output'>,
    readonly out: Out,
    private readonly quiet: boolean,
    metrics?: MetricsServer,
    baselineHost = '127.0.0.1',
  ) {
    this.metrics = metrics;
    this.baseline = new BaselineServer(baselineHost);
  }

  handle = async (method: string, params: unknown, conn: ControlConn): Promise<unknown> => {
    if (this.failure) throw this.failure;
    switch (method) {
      case 'hello':
        return this.hello(checkPeerParams(params), conn);
      case 'connect':
        return this.connect(params as SideInfo);
      case 'prepare':
        return this.prepare(params as PrepareParams);
      case 'finish':
        return this.finish();
      case 'report':
        return this.report(params as { rows: Row[] });
      case 'cpu':
        return process.cpuUsage();
      case 'baselineOpen':
        return this.baseline.open(params as BaselineOpen);
      case 'baselineResult':
        return this.baseline.result();
      case 'baselineClose':
        return this.baseline.close();
      case 'bye':
        if (!this.quiet) this.out(RULE);
        return null;
      default:
        throw new Error(`unknown control method '${method}'`);
    }
  };

  private async hello(p: PeerParams, conn: ControlConn): Promise<SideInfo> {
    if (this.side) throw new Error('hello twice');
    if (p.test !== this.o.test) throw new Error(`this server runs ${this.o.test}; the client asked for ${p.test} (run both sides with the same test)`);
    if (p.transport !== this.o.transport) throw new Error(`this server runs over ${this.o.transport}; the client asked for ${p.transport}`);
    this.p = p;
    this.side = await PerfSide.open({ ...p, bindHost: this.o.bindHost ?? conn.localAddress ?? '127.0.0.1', ...(this.o.mtu !== undefined ? { mtu: this.o.mtu } : {}), workers: this.o.workers, integrity: this.o.integrity });
    if (this.metrics) attachMetrics(this.side, this.metrics.metrics, 'server');
    publish('sabre:perf:run', () => ({ phase: 'start', role: 'server', test: p.test, transport: p.transport, connection: p.conn, sizes: p.sizes }));
    return this.side.info();
  }

  private async connect(peer: SideInfo): Promise<null> {
    const side = this.side!;
    const p = this.p!;
    this.peer = peer;
    await side.connect(peer);
    if (needsReceives(p)) this.responder = new Responder(side, p.kind === 'bw' ? p.rxDepth : 16);
    if (p.kind === 'lat') this.lat = new LatServer(side, () => this.peer!, this.responder);
    // One completion loop for the whole connection: receives to the responder, our sends (-b
    // writes, pongs) to whoever posted them.
    this.pumping = pump(
      side,
      { recv: this.responder?.onRecv, send: (wc, now) => this.sender?.onSend(wc, now), batch: () => this.sender?.batch() },
      () => this.closing,
      () => this.sender !== undefined && !this.sender.finished,
    ).catch((e: Error) => {
      this.failure = e;
    });
    if (!this.quiet) {
      printHeader({ p, mtu: side.dev.mtu, workers: side.dev.workers, local: side.info(), remote: peer, integrity: integrityOf(side.dev) }, this.out);
      this.out(tableHead(p));
    }
    return null;
  }

  private prepare({ size, phase }: PrepareParams): null {
    const p = this.p!;
    if (p.kind === 'lat') this.lat!.start(size);
    else if (p.bidirectional) {
      const warm = phase === 'warmup';
      this.sender = new BwSender(this.side!, this.peer!, { size, iters: warm ? p.txDepth * p.qps : p.iters, durationS: warm ? undefined : p.durationS });
      this.sender.post();
    }
    return null;
  }

  /** The end of one size: stop answering; under -b, our direction's result when our sender is done. */
  private async finish(): Promise<BwRow | null> {
    if (this.lat) await this.lat.stop();
    const s = this.sender;
    if (!s) return null;
    await Promise.race([s.done, this.pumping]);
    if (this.failure) throw this.failure;
    this.sender = undefined;
    return s.row();
  }

  /** The client's rows for one size: the server prints the table too. */
  private report({ rows }: { rows: Row[] }): null {
    // Rows are the client's: print only well-formed ones (a name of our own alphabet, numbers), so
    // a peer cannot write control sequences to this terminal.
    if (!Array.isArray(rows)) throw new Error('report: rows must be a list');
    for (const r of rows) {
      const ok = r && typeof r === 'object' && typeof r.source === 'string' && /^[\w:.]{1,32}$/.test(r.source) && (r.kind === 'bw' || r.kind === 'lat') &&
        Object.values(r).every((v) => typeof v !== 'object' && (typeof v !== 'string' || /^[\w:.]{0,32}$/.test(v)));
      if (!ok) throw new Error('report: a malformed row');
      this.rows.push(r);
      if (!this.quiet) this.out(rowLine(this.p!, r));
    }
    return null;
  }

  async close(): Promise<void> {
    this.closing = true;
    this.lat && (await this.lat.stop());
    await this.pumping;
    await this.baseline.close();
    await this.side?.close();
    if (this.p) publish('sabre:perf:run', () => ({ phase: 'end', role: 'server', test: this.p!.test, transport: this.p!.transport, connection: this.p!.conn, sizes: this.p!.sizes }));
  }

  get params(): PeerParams | undefined {
    return this.p;
  }
}

/** `--server`: listen, serve one client, exit. Returns the exit status. */
export async function runServer(o: PerfOptions, out: Out, onListening?: (port: number) => void): Promise<number> {
  const quiet = o.json || o.output !== undefined;
  let closed!: () => void;
  const done = new Promise<void>((r) => (closed = r));
  let byeSeen = false;
  let server!: PerfServer;
  // The control port first: if it is taken there is nothing else to undo.
  const ctl: Server = await serveControl(
    o.bindHost ?? '0.0.0.0',
    o.port,
    async (m, params, conn) => {
      if (m === 'bye') byeSeen = true;
      return server.handle(m, params, conn);
    },
    () => closed(),
  );
  let metrics: MetricsServer | undefined;
  try {
    metrics = o.metricsPort !== undefined ? await startPerfMetrics(o.metricsPort, out, quiet) : undefined;
    server = new PerfServer(o, out, quiet, metrics, o.bindHost ?? '0.0.0.0');
    const port = (ctl.address() as { port: number }).port;
    if (!quiet) out(` Waiting for client to connect on port ${port} ...`);
    onListening?.(port);
    await done;
  } finally {
    ctl.close();
    await server?.close();
    await metrics?.close();
  }
  if (o.json && server.params) out(JSON.stringify({ role: 'server', test: o.test, transport: o.transport, results: server.rows }));
  if (!byeSeen) throw new Error('the client went away before the end of the run');
  return 0;
}
