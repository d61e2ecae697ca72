// The load suite's parts: the far side in a child process (./server-child.mjs), CPU hogs on
// every core, an event loop blocked on purpose, and the operations a user runs — file get/put,
// dedup get/put, a channel stream — each checked byte for byte. Every wait is bounded.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { connectChannel, type DeviceAddress, FileClient, openDevice } from '../../src/index.js';

export type Transport = 'udp' | 'tcp';

/** The long campaign (npm run load) or the short one the suite runs. */
export const LONG = process.env.SABRE_LOAD_LONG === '1';
export const FILE_BYTES = LONG ? 48 << 20 : 6 << 20;
export const BLOCK_MS = LONG ? 3500 : 2500;
export const STREAM_MESSAGES = LONG ? 2000 : 200;

export interface Far {
  files: { host: string; port: number };
  token: string;
  dir: string;
  echo: Record<Transport, DeviceAddress>;
  /** Send a command; resolves with its one-line answer. */
  command(line: string, ms?: number): Promise<string>;
  close(): Promise<void>;
}

export async function startFar(): Promise<Far> {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'server-child.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (ms: number, what: string): Promise<string> => {
    let t: NodeJS.Timeout | undefined;
    const r = await Promise.race([lines.next(), new Promise<never>((_, rej) => (t = setTimeout(() => rej(new Error(`the far side did not answer ${what} within ${ms} ms`)), ms)))]);
    clearTimeout(t);
    if (r.done) throw new Error(`the far side exited before answering ${what}`);
    return r.value as string;
  };
  const info = JSON.parse(await next(30_000, 'its start')) as Omit<Far, 'command' | 'close'>;
  return {
    ...info,
    command: async (line, ms = 60_000) => {
      child.stdin!.write(`${line}\n`);
      return next(ms, line);
    },
    close: async () => {
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.stdin!.write('exit\n');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** A busy loop on every core for at most `ms` (killed by the returned stop). */
export function startHogs(ms: number): () => void {
  const hogs: ChildProcess[] = [];
  for (let i = 0; i < availableParallelism(); i++) {
    hogs.push(spawn(process.execPath, ['-e', `const end = Date.now() + ${ms}; while (Date.now() < end);`], { stdio: 'ignore' }));
  }
  return () => {
    for (const h of hogs) h.kill('SIGKILL');
  };
}

/** Block this process's event loop, as a busy service does now and then. */
export function blockLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

/** Deterministic bytes, the same as the far side's (xorshift32 per word). */
export function pattern(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  const w = new Uint32Array(out.buffer, 0, n >>> 2);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < w.length; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    w[i] = x;
  }
  return out;
}

/** `base` with every other MiB replaced: half of it is a duplicate of the far side's copy. */
export function halfChanged(base: Uint8Array, seed: number): Uint8Array {
  const out = base.slice();
  for (let at = 0, i = 0; at < out.length; at += 1 << 20, i++) if (i % 2 === 0) out.set(pattern(Math.min(1 << 20, out.length - at), seed + i), at);
  return out;
}

export const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

export function localDir(): string {
  return fs.mkdtempSync(join(tmpdir(), 'sabre-load-'));
}

export function connectFiles(far: Far, transport: Transport): Promise<FileClient> {
  return FileClient.connect(`${far.files.host}:${far.files.port}`, { token: far.token, transport });
}

/** put then get back, plain or dedup; returns the bytes that came back. */
export async function putGet(c: FileClient, dir: string, name: string, bytes: Uint8Array, dedup: boolean): Promise<Uint8Array> {
  const src = join(dir, `${name}.src`);
  const back = join(dir, `${name}.back`);
  fs.writeFileSync(src, bytes);
  await c.put(src, name, { dedup });
  // get --dedup uses the local file as its basis: start from a half-stale copy.
  if (dedup) fs.writeFileSync(back, halfChanged(bytes, 999));
  await c.get(name, back, { dedup });
  return fs.readFileSync(back);
}

/** A stream of `n` messages of mixed sizes through the far echo, every echo checked in order. */
export async function channelStream(transport: Transport, far: Far, n: number): Promise<number> {
  const dev = await openDevice({ transport, host: '127.0.0.1', port: 0 });
  try {
    const ch = await connectChannel(dev, far.echo[transport], { service: 11 });
    const sizes = Array.from({ length: n }, (_, i) => [1, 1000, 5000, 40_000, 300_000][i % 5]!);
    let checked = 0;
    const reader = (async () => {
      for await (const m of ch) {
        const want = pattern(sizes[checked]!, checked + 1);
        if (!(m instanceof Uint8Array) || sha(m) !== sha(want)) throw new Error(`echo ${checked} is not what was sent`);
        if (++checked === n) break;
      }
    })();
    reader.catch(() => {});
    // At most 32 in flight: replies are read concurrently, so neither side's queue fills.
    for (let i = 0; i < n; i += 32) await Promise.all(sizes.slice(i, i + 32).map((s, j) => ch.send(pattern(s, i + j + 1))));
    await reader;
    await ch.close();
    return checked;
  } finally {
    await dev.close();
  }
}
