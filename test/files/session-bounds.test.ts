// One token holder against the session table (src/files/sessions.ts). Every authenticated pipe
// is a session, and an authenticated pipe has no deadline: before, a token holder with two source
// addresses opened 64 pipes, proved the token on each, sent nothing more, and every other client
// was refused (SessionLimit) for as long as the pipes stayed open. Now a source host holds at
// most maxSessionsPerHost sessions, and a full table closes the session that has been without a
// bound connection longest (idle past idleEvictMs) for a new one — never a session with its RDMA
// connection bound, so an honest client, busy or idle, is not disconnected.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { FileClient } from '../../src/index.js';
import { PipeClient } from '../../src/files/pipe.js';
import { SessionTable } from '../../src/files/sessions.js';
import { FileProvider } from '../../src/wire/files-spec.js';
import { pollAll } from '../../src/core/sans-io.js';
import { servedDir } from './helpers.js';

const TOKEN = 'session-bounds-token-0123456789';

interface IdlePipe {
  socket: net.Socket;
  /** Resolves when the server closes it. */
  closed: Promise<void>;
  isClosed: () => boolean;
}

/** A pipe from `from` that proves the token and negotiates once, then idles; or the refusal's message. */
function idlePipe(port: number, from: string): Promise<IdlePipe | string> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: from });
    const pc = new PipeClient({ token: TOKEN, providers: FileProvider.tcp, random: (n) => new Uint8Array(randomBytes(n)) });
    let gone = false;
    const closed = new Promise<void>((res) => s.once('close', () => ((gone = true), res())));
    const t = setTimeout(() => (s.destroy(), resolve('pipe handshake timed out')), 15_000);
    const flush = (): void => {
      for (const e of pollAll(pc)) {
        if (e.kind === 'write') s.write(e.bytes);
        else {
          clearTimeout(t);
          if (e.kind === 'error') {
            s.destroy();
            resolve(e.message);
          } else resolve({ socket: s, closed, isClosed: () => gone });
        }
      }
    };
    s.on('connect', flush);
    s.on('data', (b: Buffer) => {
      pc.handleReceive(new Uint8Array(b), 0);
      flush();
    });
    s.on('error', () => {});
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('SessionTable (no I/O): per-host cap and eviction of the longest idle', () => {
  it('refuses a host past its share, evicts only a session without connections idle past idleEvictMs, counts both', () => {
    const t = { now: 0 };
    const table = new SessionTable({ maxSessions: 3, maxSessionsPerHost: 2, idleEvictMs: 100 }, (n) => new Uint8Array(randomBytes(n)), () => t.now);
    const k = new Uint8Array(32);
    const a = table.open(k, 'A')!;
    const ended: string[] = [];
    a.end = () => ended.push('a');
    table.bind(a, 'conn-a');
    const b = table.open(k, 'B')!;
    b.end = () => ended.push('b');
    expect(table.open(k, 'B')).toBeDefined();
    expect(table.open(k, 'B')).toBeUndefined();
    expect(table.counters).toMatchObject({ sessionLimit: 1, sessionHostLimit: 1 });
    // Full; the idle ones are too young.
    t.now = 50;
    expect(table.open(k, 'C')).toBeUndefined();
    // Old enough: the longest idle (b) goes, never a (bound), however long it has been open.
    t.now = 1000;
    const c = table.open(k, 'C')!;
    expect(c).toBeDefined();
    expect(ended).toEqual(['b']);
    expect(b.closed).toBe(true);
    expect(table.counters.sessionsEvicted).toBe(1);
    expect(table.hosts).toBe(3);
    // a's connection goes: a is idle from then on, and evictable idleEvictMs later.
    table.unbind(a, 'conn-a');
    t.now = 1050;
    table.open(k, 'D');
    expect(ended).toEqual(['b']);
    expect(table.size).toBe(3);
    // The closed session's host entry is gone with it: the table of hosts is bounded by the sessions.
    table.close(c);
    table.close(c);
    expect(table.hosts).toBe(2);
  });
});

describe('a token holder\'s idle pipes and the session table (real sockets)', () => {
  const s = servedDir('session-host', { port: 0, token: TOKEN, transports: ['tcp'] });

  it('one source host gets at most maxSessionsPerHost (16) sessions; another host still gets in', async () => {
    const pipes: IdlePipe[] = [];
    try {
      for (let i = 0; i < 16; i++) {
        const p = await idlePipe(s.srv.address.port, '127.0.0.2');
        if (typeof p === 'string') throw new Error(`pipe ${i}: ${p}`);
        pipes.push(p);
      }
      const refused = await idlePipe(s.srv.address.port, '127.0.0.2');
      expect(refused).toMatch(/too many sessions/);
      const st = s.srv.stats();
      expect(st).toMatchObject({ sessions: 16, sessionHosts: 1, sessionHostLimit: 1 });
      const c = await FileClient.connect(`127.0.0.1:${s.srv.address.port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 10_000 });
      await c.end();
    } finally {
      for (const p of pipes) p.socket.destroy();
    }
  }, 60_000);
});

describe('a full session table and an honest busy client', () => {
  const GRACE = 1500;
  const s = servedDir('session-evict', { port: 0, token: TOKEN, transports: ['tcp'], sessions: { maxSessions: 6, maxSessionsPerHost: 6, idleEvictMs: GRACE } });

  it('idle sessions make room for new clients after idleEvictMs; the busy client is never closed', async () => {
    const port = s.srv.address.port;
    const busy = await FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'tcp' });
    const f = await busy.open('hello.txt');
    let stop = false;
    let reads = 0;
    const reading = (async () => {
      const end = Date.now() + 60_000;
      while (!stop && Date.now() < end) {
        expect(new TextDecoder().decode(await busy.read(f, 0, 5))).toBe('hello');
        reads++;
        await sleep(5);
      }
    })();
    const idle: IdlePipe[] = [];
    const later: FileClient[] = [];
    try {
      for (const from of ['127.0.0.2', '127.0.0.2', '127.0.0.2', '127.0.0.3', '127.0.0.3']) {
        const p = await idlePipe(port, from);
        if (typeof p === 'string') throw new Error(p);
        idle.push(p);
      }
      expect(s.srv.stats().sessions).toBe(6);
      // Full, and no session has been idle long enough: refused.
      expect(await idlePipe(port, '127.0.0.4')).toMatch(/too many sessions/);
      await sleep(GRACE + 500);
      // Room is made: the longest idle pipe (the first) is closed by the server.
      const c = await FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 10_000 });
      later.push(c);
      await Promise.race([idle[0]!.closed, sleep(10_000)]);
      expect(idle[0]!.isClosed()).toBe(true);
      expect(idle.slice(1).some((p) => p.isClosed())).toBe(false);
      expect(s.srv.stats().sessionsEvicted).toBe(1);
      // Every other idle one goes the same way; after that only bound sessions are left, and a
      // newcomer is refused rather than any of them closed.
      for (let i = 1; i < idle.length; i++) {
        const n = await FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 10_000 });
        later.push(n);
      }
      await Promise.race([Promise.all(idle.map((p) => p.closed)), sleep(10_000)]);
      expect(idle.every((p) => p.isClosed())).toBe(true);
      expect(s.srv.stats()).toMatchObject({ sessions: 6, sessionsEvicted: 5 });
      await sleep(GRACE + 500);
      await expect(FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 10_000 })).rejects.toMatchObject({ code: 'ERR_FILE_SESSION_LIMIT' });
      // The busy client read throughout, and still does; so do the clients that came in.
      const before = reads;
      await sleep(300);
      expect(reads).toBeGreaterThan(before);
      for (const n of later) expect(new TextDecoder().decode(await n.read(await n.open('hello.txt'), 0, 5))).toBe('hello');
      expect(s.srv.stats().sessionsEvicted).toBe(5);
    } finally {
      stop = true;
      await reading.catch(() => {});
      for (const p of idle) p.socket.destroy();
      for (const n of later) await n.end().catch(() => {});
      await busy.end().catch(() => {});
    }
  }, 90_000);
});
