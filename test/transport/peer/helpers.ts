// Two devices, two processes, over udp or tcp: the test process opens one device; a forked child
// (peer-child.mjs, running the compiled dist/) opens the other and is driven over IPC.
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Access, openDevice, type CompletionQueue, type Device, type WorkCompletion } from '../../../src/index.js';

export const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;
const CHILD = fileURLToPath(new URL('./peer-child.mjs', import.meta.url));

export interface RemoteMr {
  h: number;
  addr: number;
  length: number;
  lkey: number;
  rkey: number;
}

export type RemoteTransport = 'udp' | 'tcp';

export interface Peer {
  proc: ChildProcess;
  address: { transport: RemoteTransport; host: string; port: number };
  call<T = unknown>(op: string, args?: object): Promise<T>;
  kill(): Promise<void>;
}

export async function startPeer(transport: RemoteTransport, opts: { mtu?: number; memoryBytes?: number; host?: string; netns?: string } = {}): Promise<Peer> {
  const { netns, ...rest } = opts;
  const open = { transport, ...rest };
  // In a network namespace: `ip netns exec` execs node with the IPC channel's fd inherited.
  const proc = netns
    ? spawn('ip', ['netns', 'exec', netns, process.execPath, CHILD], { serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    : fork(CHILD, [], { serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let seq = 0;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  proc.on('message', (m: { id: number; ok: boolean; value?: unknown; error?: string }) => {
    const w = waiting.get(m.id);
    if (!w) return;
    waiting.delete(m.id);
    if (m.ok) w.resolve(m.value);
    else w.reject(new Error(`peer: ${m.error}`));
  });
  proc.on('exit', () => {
    for (const w of waiting.values()) w.reject(new Error('peer exited'));
    waiting.clear();
  });
  const call = <T>(op: string, args: object = {}): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = ++seq;
      waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      proc.send({ id, op, args });
    });
  const address = await call<Peer['address']>('open', open);
  const kill = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await gone;
  };
  return { proc, address, call, kill };
}

export async function stopPeer(p: Peer): Promise<void> {
  if (p.proc.exitCode !== null || p.proc.signalCode !== null) return;
  const gone = new Promise((r) => p.proc.once('exit', r));
  p.call('close').catch(() => {});
  const t = setTimeout(() => p.proc.kill('SIGKILL'), 5000);
  await gone;
  clearTimeout(t);
}

export async function openLocal(transport: RemoteTransport, opts: { mtu?: number } = {}): Promise<Device> {
  return openDevice({ transport, host: '127.0.0.1', port: 0, ...(opts.mtu ? { mtu: opts.mtu } : {}) });
}

/** Wait for n completions on cq (event mode), bounded in time. */
export async function take(cq: CompletionQueue, n: number, timeoutMs = 10_000): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`${out.length}/${n} completions in ${timeoutMs} ms`);
    await cq.wait(left);
    out.push(...cq.poll(n - out.length));
  }
  return out;
}

/** The child's fill(): xorshift32 bytes from a seed. */
export function fill(buf: Uint8Array, seed: number): Uint8Array {
  let x = seed >>> 0 || 1;
  for (let i = 0; i < buf.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    buf[i] = x & 0xff;
  }
  return buf;
}

export function pattern(len: number, seed: number): Uint8Array {
  return fill(new Uint8Array(len), seed);
}

export const same = (a: Uint8Array, b: Uint8Array): boolean => Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length));
