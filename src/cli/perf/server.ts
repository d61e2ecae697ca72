// The server role. It listens for the control connection first and opens nothing else until a
// client says hello: then its device is bound to the address that connection arrived on (the
// one address of this host the client can certainly reach), sized from the client's parameters
// (perftest requires the same options on both sides; here the client's are the ones). It keeps
// receives posted when the test consumes them, answers ping-pongs, runs its own sender under -b,
// and prints the same header and table as the client.
import type { Server } from 'node:net';
import { publish } from '../../metrics/diagnostics.js';
import type { MetricsServer } from '../../metrics/server.js';
import { BaselineServer } from './baseline.js';
import { BwSender, needsReceives, Responder } from './bw.js';
import { pump } from './completions.js';
import type { ControlConn } from './control.js';
import { Refusals, serveControl } from './control-server.js';
import { LatServer } from './lat.js';
import { attachMetrics, startPerfMetrics } from './observe.js';
import { checkPeerParams, type PeerParams, type PerfOptions } from './options.js';
import { integrityOf, type Out, printHeader, rowLine, tableHead } from './print.js';
import { checkBaselineOpen, checkConnect, checkRow } from './requests.js';
import type { BwRow, Row } from './results.js';
import { PerfSide, type SideInfo } from './side.js';
import { RULE } from '../table.js';

export interface PrepareParams {
  size: number;
  phase: 'warmup' | 'run';
}

/** Rows one report call may carry: the size's sabre row and its baseline row. */
const ROWS_PER_REPORT = 2;

/** The server's state for one client, and the control methods in the order the client calls them. */
export class PerfServer {
  side: PerfSide | undefined;
  /** The hello's device while it opens: close() waits for it and closes it too. */
  private opening: Promise<PerfSide> | undefined;
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
    private readonly baselineHost = '127.0.0.1',
    readonly refusals = new Refusals(),
  ) {
    this.metrics = metrics;
    this.baseline = new BaselineServer(refusals);
  }

  handle = async (method: string, params: unknown, conn: ControlConn): Promise<unknown> => {
    if (this.failure) throw this.failure;
    switch (method) {
      case 'hello':
        return this.hello(checkPeerParams(params), conn);
      case 'connect':
        return this.connect(params, conn);
      case 'prepare':
        return this.prepare(params);
      case 'finish':
        return this.finish();
      case 'report':
        return this.report(params);
      case 'cpu':
        return process.cpuUsage();
      case 'baselineOpen': {
        const p = this.hello_();
        // Bound where the control connection arrived; answering only the host it came from.
        return this.baseline.open(checkBaselineOpen(params, p, this.o.transport), { bind: this.o.bindHost ?? conn.localAddress ?? this.baselineHost, peer: conn.remoteAddress });
      }
      case 'baselineResult':
        return this.baseline.result();
      case 'baselineClose':
        return this.baseline.close();
      case 'bye':
        if (!this.quiet) this.out(RULE);
        return null;
      default:
        throw new Error(`unknown control method ${JSON.stringify(method.slice(0, 64))}`);
    }
  };

  /** The hello's parameters; every call but cpu, bye and the baseline's result and close needs them. */
  private hello_(): PeerParams {
    if (!this.p || !this.side) throw new Error('the first call must be hello');
    return this.p;
  }

  private async hello(p: PeerParams, conn: ControlConn): Promise<SideInfo> {
    if (this.side || this.opening) throw new Error('hello twice');
    if (this.closing) throw new Error('the server is closing');
    if (p.test !== this.o.test) throw new Error(`this server runs ${this.o.test}; the client asked for ${p.test} (run both sides with the same test)`);
    if (p.transport !== this.o.transport) throw new Error(`this server runs over ${this.o.transport}; the client asked for ${p.transport}`);
    this.opening = PerfSide.open({ ...p, bindHost: this.o.bindHost ?? conn.localAddress ?? '127.0.0.1', ...(this.o.mtu !== undefined ? { mtu: this.o.mtu } : {}), workers: this.o.workers, integrity: this.o.integrity });
    try {
      this.side = await this.opening;
    } finally {
      this.opening = undefined;
    }
    this.p = p;
    if (this.metrics) attachMetrics(this.side, this.metrics.metrics, 'server');
    publish('sabre:perf:run', () => ({ phase: 'start', role: 'server', test: p.test, transport: p.transport, connection: p.conn, sizes: p.sizes }));
    return this.side.info();
  }

  private async connect(params: unknown, conn: ControlConn): Promise<null> {
    const p = this.hello_();
    const side = this.side!;
    if (this.peer) throw new Error('connect twice');
    // Our QPs dial what it names: only the client's own host, our transport, the QPs agreed.
    const peer = checkConnect(params, p, this.o.transport, conn.remoteAddress);
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

  private prepare(params: unknown): null {
    const p = this.hello_();
    if (!this.peer || !this.pumping) throw new Error('prepare before connect');
    const { size, phase } = (params ?? {}) as Partial<PrepareParams>;
    if (typeof size !== 'number' || !p.sizes.includes(size) || (phase !== 'warmup' && phase !== 'run')) throw new Error('prepare: size must be one of the run\'s sizes, phase warmup or run');
    if (this.sender && !this.sender.finished) throw new Error('prepare: the last size is not finished');
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
  private report(params: unknown): null {
    const p = this.hello_();
    const rows = (params as { rows?: unknown } | null)?.rows;
    if (!Array.isArray(rows)) throw new Error('report: rows must be a list');
    // Kept for --json: no more than the run makes (a sabre row and a baseline row per size).
    if (rows.length > ROWS_PER_REPORT || this.rows.length + rows.length > ROWS_PER_REPORT * p.sizes.length) {
      this.refusals.note('rows', `${rows.length} rows past the run's ${ROWS_PER_REPORT * p.sizes.length}`);
      throw new Error(`report: at most ${ROWS_PER_REPORT} rows a call and ${ROWS_PER_REPORT * p.sizes.length} in the run`);
    }
    // Every row checked before any is kept or printed (rowLine's numbers, our own alphabet).
    const ok = rows.map((r) => checkRow(r, p));
    for (const r of ok) {
      this.rows.push(r);
      if (!this.quiet) this.out(rowLine(p, r));
    }
    return null;
  }

  async close(): Promise<void> {
    this.closing = true;
    this.lat && (await this.lat.stop());
    await this.pumping;
    await this.baseline.close();
    // A hello still opening its device: wait for it, then close what it opened.
    const side = this.side ?? (await this.opening?.catch(() => undefined));
    await side?.close();
    if (this.p) publish('sabre:perf:run', () => ({ phase: 'end', role: 'server', test: this.p!.test, transport: this.p!.transport, connection: this.p!.conn, sizes: this.p!.sizes }));
  }

  get params(): PeerParams | undefined {
    return this.p;
  }
}

/**
 * `--server`: listen, serve one client, exit. Returns the exit status. The client is the first
 * connection whose hello is served (control-server.ts); strangers before it are turned away.
 */
export async function runServer(o: PerfOptions, out: Out, onListening?: (port: number) => void): Promise<number> {
  const quiet = o.json || o.output !== undefined;
  let closed!: () => void;
  const done = new Promise<void>((r) => (closed = r));
  let byeSeen = false;
  let server!: PerfServer;
  const refusals = new Refusals();
  // The control port first: if it is taken there is nothing else to undo.
  const ctl: Server = await serveControl(
    o.bindHost ?? '0.0.0.0',
    o.port,
    async (m, params, conn) => {
      if (m === 'bye') byeSeen = true;
      return server.handle(m, params, conn);
    },
    () => closed(),
    { refusals },
  );
  let metrics: MetricsServer | undefined;
  try {
    metrics = o.metricsPort !== undefined ? await startPerfMetrics(o.metricsPort, out, quiet) : undefined;
    server = new PerfServer(o, out, quiet, metrics, o.bindHost ?? '127.0.0.1', refusals);
    const port = (ctl.address() as { port: number }).port;
    if (!quiet) out(` Waiting for client to connect on port ${port} ...`);
    onListening?.(port);
    await done;
  } finally {
    ctl.close();
    await server?.close();
    await metrics?.close();
  }
  if (o.json && server.params) out(JSON.stringify({ role: 'server', test: o.test, transport: o.transport, results: server.rows, refused: refusals.counts }));
  if (!byeSeen) throw new Error('the client went away before the end of the run');
  return 0;
}
