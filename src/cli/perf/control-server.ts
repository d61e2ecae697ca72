// The server half of the control channel. The port is open to anyone who can reach it, so a
// connection counts as the client only once its first call, hello, has been served: until then
// it has HELLO_MS to say it, at most MAX_WAITING such connections are held (more are refused),
// and a line that is not a call ({ id, method, params }) drops the connection. Once a hello is
// served that connection has the server and every other one is closed. Each connection's lines
// are served one at a time, in order, each handler awaited before the next line is read; while
// one is served, or while answers wait to be written (the peer not reading), the socket is paused.
import { createServer, type Server, type Socket } from 'node:net';
import { publish } from '../../metrics/diagnostics.js';
import { type ControlConn, MAX_LINE, plainAddress } from './control.js';

type Handler = (method: string, params: unknown, conn: ControlConn) => Promise<unknown>;

/** How long a connection may take to have its hello served before it is dropped. */
export const HELLO_MS = 10_000;
/** Connections held at once before any has said hello; more are refused. */
export const MAX_WAITING = 8;

export type RefusalKind = 'connection' | 'hello-timeout' | 'malformed' | 'hello' | 'rows' | 'baseline-peer' | 'baseline-token';

/** What the server turned away, by kind: counted, published on sabre:perf:refused, in the server's --json. */
export class Refusals {
  readonly counts: Partial<Record<RefusalKind, number>> = {};
  note = (what: RefusalKind, reason: string): void => {
    this.counts[what] = (this.counts[what] ?? 0) + 1;
    publish('sabre:perf:refused', () => ({ what, reason, count: this.counts[what] }));
  };
}

export interface ControlLimits {
  helloMs?: number;
  maxWaiting?: number;
  refusals?: Refusals;
}

interface Call {
  id: number;
  method: string;
  params: unknown;
}

/** A control line's message: an object with a numeric id and a method name (params: anything). */
function parseCall(line: string): Call | undefined {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const m = v as Record<string, unknown>;
  if (!Number.isSafeInteger(m.id) || typeof m.method !== 'string' || m.method.length > 64) return undefined;
  return { id: m.id as number, method: m.method, params: m.params ?? null };
}

/**
 * Listen on host:port for the client (perftest serves one and exits: `onClose` is called once,
 * when the connection whose hello was served has closed and its lines are all served). Resolves
 * with the bound server, rejects at once when the port is taken.
 */
export function serveControl(host: string, port: number, handler: Handler, onClose: () => void, limits: ControlLimits = {}): Promise<Server> {
  const helloMs = limits.helloMs ?? HELLO_MS;
  const maxWaiting = limits.maxWaiting ?? MAX_WAITING;
  const refusals = limits.refusals ?? new Refusals();
  let taken: Socket | undefined;
  const waiting = new Set<Socket>();
  // Hellos from different connections are served one after another: the first served takes the server.
  let helloChain: Promise<unknown> = Promise.resolve();

  const server = createServer((sock) => {
    if (taken || waiting.size >= maxWaiting) {
      refusals.note('connection', taken ? 'the server has its client' : `${maxWaiting} connections are waiting to say hello`);
      sock.destroy();
      return;
    }
    waiting.add(sock);
    sock.setNoDelay(true);
    sock.setEncoding('utf8');
    const conn: ControlConn = { localAddress: plainAddress(sock.localAddress), remoteAddress: plainAddress(sock.remoteAddress) };
    let timer: NodeJS.Timeout | undefined = setTimeout(() => {
      refusals.note('hello-timeout', `no hello within ${helloMs} ms`);
      sock.destroy();
    }, helloMs);
    let buf = '';
    let busy = false;
    let gone = false;
    let ended = false;

    const send = (answer: object): void => {
      if (!sock.destroyed && sock.writable) sock.write(JSON.stringify(answer) + '\n');
    };
    // A refused connection gets its answer, then a moment to read it before it is cut.
    const goAway = (): void => {
      sock.end();
      clearTimeout(timer);
      timer = setTimeout(() => sock.destroy(), 2000);
    };
    const finish = (): void => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      waiting.delete(sock);
      if (taken === sock) onClose();
    };

    /** Serve one line; false: the connection is to go (ended gracefully after a refusal, or destroyed). */
    const serve = async (line: string): Promise<boolean> => {
      const msg = parseCall(line);
      if (!msg) {
        refusals.note('malformed', 'a control line that is not a call');
        sock.destroy();
        return false;
      }
      const t0 = performance.now();
      if (taken !== sock) {
        if (msg.method !== 'hello') {
          refusals.note('hello', `'${msg.method}' before hello`);
          send({ id: msg.id, error: 'the first call must be hello' });
          goAway();
          return false;
        }
        clearTimeout(timer);
        timer = undefined;
        const run = helloChain.then(() => {
          if (taken) throw new Error('this server has its client already');
          return handler('hello', msg.params, conn);
        });
        helloChain = run.catch(() => {});
        try {
          const result = await run;
          taken = sock;
          waiting.delete(sock);
          for (const w of waiting) {
            refusals.note('connection', 'another connection said hello first');
            w.destroy();
          }
          waiting.clear();
          publish('sabre:perf:control', () => ({ role: 'server', method: 'hello', ms: performance.now() - t0 }));
          send({ id: msg.id, result: result ?? null });
          return true;
        } catch (err) {
          refusals.note('hello', String((err as Error)?.message ?? err));
          send({ id: msg.id, error: String((err as Error)?.message ?? err) });
          goAway();
          return false;
        }
      }
      try {
        const result = await handler(msg.method, msg.params, conn);
        publish('sabre:perf:control', () => ({ role: 'server', method: msg.method, ms: performance.now() - t0 }));
        send({ id: msg.id, result: result ?? null });
      } catch (err) {
        send({ id: msg.id, error: String((err as Error)?.message ?? err) });
      }
      return true;
    };

    /** Serve the buffered lines one at a time; the socket stays paused until they are done and written. */
    const drain = async (): Promise<void> => {
      if (busy) return;
      busy = true;
      sock.pause();
      try {
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.trim().length === 0) continue;
          if (!(await serve(line))) {
            buf = '';
            return;
          }
          // The peer is not reading its answers: read no more calls until it does.
          if (!sock.destroyed && sock.writableLength > sock.writableHighWaterMark) await writable(sock);
        }
      } finally {
        busy = false;
        if (gone) finish();
        else if (!sock.destroyed) sock.resume();
      }
    };

    sock.on('data', (chunk: string) => {
      buf += chunk;
      // Only the unterminated remainder counts against MAX_LINE: whole lines wait their turn.
      if (buf.length - (buf.lastIndexOf('\n') + 1) > MAX_LINE) {
        refusals.note('malformed', 'a control line over MAX_LINE');
        buf = '';
        sock.destroy();
        return;
      }
      void drain();
    });
    sock.on('error', () => sock.destroy());
    sock.on('close', () => {
      gone = true;
      if (!busy) finish();
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      reject(e.code === 'EADDRINUSE' ? new Error(`control port ${port} is already in use (another perf server?)`) : e);
    });
    server.listen(port, host, () => resolve(server));
  });
}

/** Until the socket's write buffer has drained (or the socket is gone). */
function writable(sock: Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      sock.off('drain', done);
      sock.off('close', done);
      resolve();
    };
    sock.on('drain', done);
    sock.on('close', done);
  });
}
