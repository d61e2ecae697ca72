// Helpers for the perf server's hostile-input tests (perf-hostile-*.test.ts): a real `sabre perf
// --server` child on an ephemeral port, and a raw JSON-lines control client that says exactly
// what a hostile peer would. Every wait here is bounded.
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { freePort, sabreBg } from './helpers.js';

export type Bg = ReturnType<typeof sabreBg>;

/**
 * A server child bound to 127.0.0.1 on an ephemeral control port. It prints the port, except
 * under --json / --output (quiet until the end): then the port is picked here and watched for.
 */
export async function startPerfServer(test = 'write_bw', transport = 'tcp', extra: string[] = []): Promise<{ bg: Bg; port: number; pid: number }> {
  const quiet = extra.includes('--json') || extra.includes('--output');
  const port0 = quiet ? await freePort() : 0;
  const bg = sabreBg(['perf', test, '--server', '-p', String(port0), '--transport', transport, '--bind_source_ip', '127.0.0.1', ...extra]);
  try {
    if (quiet) {
      await waitListening(port0, 20_000);
      return { bg, port: port0, pid: bg.child.pid! };
    }
    await bg.waitFor(/on port (\d+)/, 20_000);
  } catch (e) {
    await kill(bg);
    throw e;
  }
  const port = Number(/on port (\d+)/.exec(bg.out())![1]);
  return { bg, port, pid: bg.child.pid! };
}

/** Poll /proc/net/tcp for a listener on 127.0.0.1:port (a connection would be a stranger to the server). */
async function waitListening(port: number, ms: number): Promise<void> {
  const want = new RegExp(`0100007F:${port.toString(16).toUpperCase().padStart(4, '0')} 00000000:0000 0A`);
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (want.test(readFileSync('/proc/net/tcp', 'utf8'))) return;
    await sleep(50);
  }
  throw new Error(`nothing listening on ${port} within ${ms} ms`);
}

/** The server child's exit code within ms, or 'alive'. */
export async function exitWithin(bg: Bg, ms: number): Promise<number | null | 'alive'> {
  let t: NodeJS.Timeout | undefined;
  const r = await Promise.race([bg.exited, new Promise<'alive'>((res) => (t = setTimeout(() => res('alive'), ms)))]);
  clearTimeout(t);
  return r;
}

export function kill(bg: Bg): Promise<unknown> {
  if (bg.child.exitCode === null && bg.child.signalCode === null) bg.child.kill('SIGKILL');
  return bg.exited;
}

/** Threads of a process (Linux): each open device runs a NIC thread. */
export function threads(pid: number): number {
  const m = /Threads:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

export type Answer = { id: number; result?: unknown; error?: string };

export interface Raw {
  sock: Socket;
  answers: Map<number, Answer>;
  send(line: string): void;
  call(id: number, method: string, params?: unknown): void;
  /** The answer to `id` within ms, or undefined (at once when the socket is gone). */
  answer(id: number, ms?: number): Promise<Answer | undefined>;
  /** Resolves when the server has closed the connection (or after ms: false). */
  closedWithin(ms: number): Promise<boolean>;
}

/** A raw control connection; `localAddress` picks the source (127.0.0.2 is this host too). */
export async function rawControl(port: number, localAddress?: string): Promise<Raw> {
  const sock = connect({ port, host: '127.0.0.1', ...(localAddress ? { localAddress } : {}) });
  await new Promise<void>((r, j) => {
    sock.once('connect', () => r());
    sock.once('error', j);
  });
  sock.on('error', () => {});
  const answers = new Map<number, Answer>();
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('data', (d: string) => {
    buf += d;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        const m = JSON.parse(line) as Answer;
        answers.set(m.id, m);
      } catch {
        /* not an answer */
      }
    }
  });
  let closed = false;
  sock.once('close', () => (closed = true));
  return {
    sock,
    answers,
    send: (line) => void sock.write(line),
    call: (id, method, params) => void sock.write(JSON.stringify({ id, method, params: params ?? null }) + '\n'),
    async answer(id, ms = 15_000) {
      const until = Date.now() + ms;
      while (Date.now() < until) {
        const a = answers.get(id);
        if (a || closed) return a;
        await sleep(20);
      }
      return undefined;
    },
    async closedWithin(ms) {
      const until = Date.now() + ms;
      while (Date.now() < until && !closed) await sleep(50);
      return closed;
    },
  };
}

/** A hello a real client of `write_bw` would send (fields as peerParams() writes them). */
export function hello(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    test: 'write_bw', verb: 'write', kind: 'bw', sizes: [65536], iters: 100, durationS: null, conn: 'rc', qps: 1, txDepth: 128, rxDepth: 512,
    cqMod: 1, outs: null, inline: 0, transport: 'tcp', bidirectional: false, imm: false, atomicType: 'FETCH_AND_ADD', noPeak: false,
    reportGbits: false, warmUp: false, marginS: 0, histogram: false, unsorted: false, cpuUtil: false,
    ...over,
  };
}

/** A raw control connection whose hello has been served (it has the server). */
export async function helloed(port: number, over: Record<string, unknown> = {}, localAddress?: string): Promise<Raw> {
  const c = await rawControl(port, localAddress);
  c.call(1, 'hello', hello(over));
  const a = await c.answer(1, 20_000);
  if (!a || a.error !== undefined) throw new Error(`hello not served: ${JSON.stringify(a)}`);
  return c;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
