// Running the `sabre` command as a user does: spawned from dist/, output captured, bounded in
// time (a hang is a failure, never a stuck test run).
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';

/** The command under test; SABRE_MAIN points the CLI tests at another build (e.g. the code before a fix). */
export const MAIN = process.env.SABRE_MAIN ?? join(process.cwd(), 'dist', 'cli', 'main.js');

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** True when the command had to be killed at the timeout (it hung). */
  timedOut: boolean;
}

export function sabre(args: string[], timeoutMs = 60_000, env?: NodeJS.ProcessEnv): Run {
  const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL', ...(env ? { env: { ...process.env, ...env } } : {}) });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, timedOut: r.signal === 'SIGKILL' };
}

/** sabre() without blocking this thread: concurrent tests run several commands at once. */
export function sabreAsync(args: string[], timeoutMs = 60_000, env?: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], ...(env ? { env: { ...process.env, ...env } } : {}) });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const t = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('close', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

/** `sabre …` in the background: its output so far, and a promise of how it ended. */
export function sabreBg(args: string[]): { child: ChildProcessWithoutNullStreams; out: () => string; err: () => string; exited: Promise<number | null>; waitFor(re: RegExp, ms?: number): Promise<void> } {
  const child = spawn(process.execPath, [MAIN, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  // 'close', not 'exit': once it settles, out() and err() hold all the child wrote.
  const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
  return {
    child,
    out: () => out,
    err: () => err,
    exited,
    waitFor(re, ms = 15_000) {
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no ${re} within ${ms} ms; stdout: ${out} stderr: ${err}`)), ms);
        const check = () => {
          if (re.test(out)) {
            clearTimeout(t);
            resolve();
          }
        };
        child.stdout.on('data', check);
        child.once('close', () => {
          clearTimeout(t);
          if (!re.test(out)) reject(new Error(`exited before ${re}; stdout: ${out} stderr: ${err}`));
        });
        check();
      });
    },
  };
}

/** A TCP port held open by this process (to make a command find its port in use). */
export async function holdPort(): Promise<{ port: number; close(): Promise<void> }> {
  const s: Server = createServer();
  await new Promise<void>((r) => s.listen(0, '0.0.0.0', r));
  const port = (s.address() as { port: number }).port;
  return { port, close: () => new Promise<void>((r) => s.close(() => r())) };
}

/** A port that was free a moment ago. */
export async function freePort(): Promise<number> {
  const h = await holdPort();
  await h.close();
  return h.port;
}
