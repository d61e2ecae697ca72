// The out-of-band channel perftest calls "Data ex. method : Ethernet": QP numbers, keys and
// addresses travel over a plain TCP socket as JSON lines, and the two sides step through each
// size together (client asks, server answers). In one process (inproc) the same calls are
// direct method calls on the server object. The server half is control-server.ts.
import { connect as netConnect, type Socket } from 'node:net';
import { publish } from '../../metrics/diagnostics.js';

export interface ControlPeer {
  /** `timeoutMs`: how long the answer may take (default CALL_TIMEOUT_MS; the in-process peer has none). */
  call<T = unknown>(method: string, params?: unknown, timeoutMs?: number): Promise<T>;
  close(): void;
}

/**
 * How long a control call may wait for its answer. Every call but finish is quick at a working
 * server (hello opens its device, connect its QPs: well under a second); a peer that takes the
 * connection and says nothing must not hold the CLI for good. finish waits for the server's end
 * of the run: its caller gives the run's length plus a margin.
 */
export const CALL_TIMEOUT_MS = 15_000;

/** Where the client's control connection arrived (the server's data plane binds there) and where it came from. */
export interface ControlConn {
  localAddress: string | undefined;
  /** The client's address as the server sees it (a plain dotted quad for IPv4); undefined in process. */
  remoteAddress: string | undefined;
}

type Handler = (method: string, params: unknown, conn: ControlConn) => Promise<unknown>;

/** The longest control line either side takes (a report of 23 sizes' rows is far below it). */
export const MAX_LINE = 1 << 20;

function lines(sock: Socket, onLine: (line: string) => void, onError: (e: Error) => void): void {
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('data', (chunk: string) => {
    buf += chunk;
    // Only the unterminated remainder counts: several whole lines may arrive in one chunk.
    if (buf.length - (buf.lastIndexOf('\n') + 1) > MAX_LINE) {
      onError(new Error('control message too long'));
      sock.destroy();
      return;
    }
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.length > 0) onLine(line);
    }
  });
}

/** An IPv4 address as a plain dotted quad (node reports '::ffff:a.b.c.d' on a dual-stack socket). */
export function plainAddress(a: string | undefined): string | undefined {
  return a?.startsWith('::ffff:') ? a.slice(7) : a;
}

/** How two spellings of one host compare: an IPv4-mapped address as its dotted quad, IPv6 lower-cased. */
export function normalHost(h: string): string {
  return (plainAddress(h) ?? h).toLowerCase();
}

export interface ClientControlPeer extends ControlPeer {
  /** The local address of the control connection: the interface that reaches the server. */
  localAddress: string | undefined;
}

export function connectControl(host: string, port: number, timeoutMs = 10_000, bindHost?: string): Promise<ClientControlPeer> {
  return new Promise((resolve, reject) => {
    const sock = netConnect({ host, port, ...(bindHost ? { localAddress: bindHost } : {}) });
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no perf server answered at ${host}:${port}`));
    }, timeoutMs);
    let nextId = 1;
    const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
    const failAll = (e: Error) => {
      for (const p of pending.values()) p.reject(e);
      pending.clear();
    };
    sock.on('error', (e) => {
      clearTimeout(timer);
      failAll(e);
      reject(new Error(`cannot reach perf server at ${host}:${port}: ${e.message}`));
    });
    sock.on('close', () => failAll(new Error('perf server closed the control connection')));
    sock.once('connect', () => {
      clearTimeout(timer);
      sock.setNoDelay(true);
      lines(
        sock,
        (line) => {
          const msg = parseAnswer(line);
          if (!msg) {
            // Not a perf server (an HTTP server answers its status line): one clear error, not a
            // SyntaxError thrown out of a socket callback.
            failAll(new Error(`the peer at ${host}:${port} is not a sabre perf server (it said ${JSON.stringify(line.slice(0, 40))})`));
            sock.destroy();
            return;
          }
          const p = pending.get(msg.id);
          // An answer after its call timed out finds nothing (the socket is gone by then anyway).
          if (!p) return;
          pending.delete(msg.id);
          if (msg.error !== undefined) p.reject(new Error(`perf server: ${msg.error}`));
          else p.resolve(msg.result);
        },
        failAll,
      );
      resolve({
        localAddress: plainAddress(sock.localAddress),
        call<T>(method: string, params?: unknown, timeoutMs = CALL_TIMEOUT_MS): Promise<T> {
          const id = nextId++;
          const t0 = performance.now();
          return new Promise<T>((res, rej) => {
            // Past it the control connection is given up: the run cannot go on without the answer,
            // and every other call fails with it (the close fails them).
            const t = setTimeout(() => {
              pending.delete(id);
              rej(new Error(`the perf server at ${host}:${port} did not answer '${method}' within ${Math.round(timeoutMs / 100) / 10} s`));
              sock.destroy();
            }, timeoutMs);
            pending.set(id, {
              resolve: (v) => {
                clearTimeout(t);
                publish('sabre:perf:control', () => ({ role: 'client', method, ms: performance.now() - t0 }));
                res(v as T);
              },
              reject: (e) => {
                clearTimeout(t);
                rej(e);
              },
            });
            sock.write(JSON.stringify({ id, method, params: params ?? null }) + '\n');
          });
        },
        close() {
          sock.end();
        },
      });
    });
  });
}

type Answer = { id: number; result?: unknown; error?: string };

/** A server's answer line, or undefined when the line is not one (the peer is not a perf server). */
function parseAnswer(line: string): Answer | undefined {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!v || typeof v !== 'object' || typeof (v as Answer).id !== 'number') return undefined;
  return v as Answer;
}

/** The in-process form: the same calls, no socket. */
export function directPeer(handler: Handler): ControlPeer {
  const conn: ControlConn = { localAddress: undefined, remoteAddress: undefined };
  return { call: (m, p) => handler(m, p, conn) as Promise<never>, close() {} };
}
