// Shared by the file-service tests over real sockets and real files.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { type FileServer, serveFiles, type ServeOptions } from '../../src/index.js';

export const MAIN = join(process.cwd(), 'dist', 'cli', 'main.js');

export function tempDir(tag: string): string {
  return fs.mkdtempSync(join(tmpdir(), `sabre-files-${tag}-`));
}

/** tempDir for the file that calls this at its top level: every directory it made is removed after the file's tests. */
export function tempDirsRemovedAfter(): (tag: string) => string {
  const made: string[] = [];
  afterAll(() => {
    for (const d of made) fs.rmSync(d, { recursive: true, force: true });
  });
  return (tag) => {
    const d = tempDir(tag);
    made.push(d);
    return d;
  };
}

/**
 * A file server in this process for the describe block that calls it: a fresh directory holding
 * `files` (by default hello.txt = 'hello'), served with `opts`; closed and removed after the block.
 */
export function servedDir(tag: string, opts: ServeOptions, files: Record<string, string> = { 'hello.txt': 'hello' }): { readonly srv: FileServer; readonly dir: string } {
  const it = {} as { srv: FileServer; dir: string };
  beforeAll(async () => {
    it.dir = tempDir(tag);
    for (const [name, body] of Object.entries(files)) fs.writeFileSync(join(it.dir, name), body);
    it.srv = await serveFiles(it.dir, opts);
  }, 30_000);
  afterAll(async () => {
    await it.srv?.close();
    fs.rmSync(it.dir, { recursive: true, force: true });
  });
  return it;
}

export function sha256File(p: string): string {
  const h = createHash('sha256');
  const fd = fs.openSync(p, 'r');
  const buf = Buffer.allocUnsafe(4 << 20);
  try {
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      h.update(buf.subarray(0, n));
    }
  } finally {
    fs.closeSync(fd);
  }
  return h.digest('hex');
}

/** A file of `size` random bytes (written in 4 MiB pieces); returns its sha256. */
export function randomFile(p: string, size: number): string {
  const h = createHash('sha256');
  const fd = fs.openSync(p, 'w');
  try {
    let left = size;
    while (left > 0) {
      const b = randomBytes(Math.min(left, 4 << 20));
      fs.writeSync(fd, b);
      h.update(b);
      left -= b.length;
    }
  } finally {
    fs.closeSync(fd);
  }
  return h.digest('hex');
}

/** Poll `cond` every 20 ms until true or `ms` passed (no fixed sleeps: returns as soon as it holds). */
export async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** `sabre serve` as a child process; resolves once it reports its port over IPC. */
export async function spawnServer(dir: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; port: number; token: string; stdout: () => string }> {
  const child = spawn(process.execPath, [MAIN, 'serve', dir, '-p', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env: { ...process.env, ...env } });
  let out = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (out += b));
  const info = await new Promise<{ port: number; token: string }>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`sabre serve did not start: ${out}`)), 20_000);
    child.once('message', (m) => {
      clearTimeout(t);
      resolve(m as { port: number; token: string });
    });
    child.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`sabre serve exited ${code}: ${out}`));
    });
  });
  return { child, ...info, stdout: () => out };
}

/** Run the sabre binary to completion. */
export function sabre(args: string[], o: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...o.env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    const t = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000);
    // 'close', not 'exit': the child may have exited before its last stderr line was read.
    child.on('close', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
  });
}

export function killAndWait(child: ChildProcess, sig: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill(sig);
  });
}
