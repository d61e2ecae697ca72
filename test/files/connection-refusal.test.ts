// A client past the server's RDMA connection bounds is told why, at once. Before, the file server
// let the connect through and tore the connection down after (or its cm rejected it with a reason
// only a log could read): the client failed with ERR_FILE_CONNECTION_LOST, "cannot connect …", or
// waited out its connect deadline. Now the server's cm listener rejects the connect before it
// makes anything for it (a lookup of the source's count, no work that the request's bytes size),
// with a reason of the file service's table (FILE_REJECTS, src/wire/files-spec.ts) that the
// client maps to a FileError with a stable code: ERR_FILE_SESSION_LIMIT, 'the server refused:
// too many connections from your host'. Real udp and tcp sockets on 127.0.0.1.
import { afterAll, describe, expect, it } from 'vitest';
import { FileClient } from '../../src/index.js';
import { FileStatus } from '../../src/wire/files-spec.js';
import { servedDir, until } from './helpers.js';

const TOKEN = 'connection-refusal-token-0123456789';
// Small connections: each bound one registers its credits' receives and staging at the server.
const LIMITS = { credits: 2, maxWriteSize: 64 << 10, maxReadWriteSize: 64 << 10, rwDepth: 1 };
const CLIENT = { token: TOKEN, timeoutMs: 10_000, sinks: 1, writeBuffers: 1, credits: 2 };

/** A client connect from this host: the client joins `held` if it got in, else its error is returned. */
function connectOrError(at: string, transport: 'udp' | 'tcp', held: FileClient[]): Promise<{ code?: string; status?: number; message?: string } | undefined> {
  return FileClient.connect(at, { ...CLIENT, transport }).then(
    (c) => {
      held.push(c);
      return undefined;
    },
    (e: unknown) => e as { code?: string; status?: number; message?: string },
  );
}
const CAP = 3;

for (const transport of ['udp', 'tcp'] as const) {
  describe(`${transport}: maxConnectionsPerHost + 1 clients from one host`, () => {
    const s = servedDir(`refusal-${transport}`, { port: 0, token: TOKEN, transports: [transport], limits: LIMITS, maxConnectionsPerHost: CAP });
    const held: FileClient[] = [];
    afterAll(async () => {
      for (const c of held) await c.end().catch(() => {});
    });

    it('the extra one rejects promptly with ERR_FILE_SESSION_LIMIT naming the host limit; counted; the server serves on and takes one again when one leaves', async () => {
      const at = `127.0.0.1:${s.srv.address.port}`;
      for (let i = 0; i < CAP; i++) held.push(await FileClient.connect(at, { ...CLIENT, transport }));
      expect(s.srv.stats().liveConnections).toBe(CAP);

      const t0 = performance.now();
      const err = await connectOrError(at, transport, held);
      const ms = performance.now() - t0;
      expect(err).toBeDefined();
      expect(err).toMatchObject({ code: 'ERR_FILE_SESSION_LIMIT', status: FileStatus.SessionLimit });
      expect(err!.message).toMatch(/^the server refused: too many connections from your host/);
      // The rejection is the answer to the connect: no deadline runs out for it.
      expect(ms).toBeLessThan(2000);

      expect(s.srv.stats()).toMatchObject({ connectionHostLimit: 1, liveConnections: CAP });
      expect(s.srv.stats().connectionsRefused).toBeGreaterThanOrEqual(1);
      // The held clients were not touched.
      for (const c of held) expect(new TextDecoder().decode(await c.read(await c.open('hello.txt'), 0, 5))).toBe('hello');

      await held.shift()!.end();
      await until(() => s.srv.stats().liveConnections === CAP - 1, 5000, 'the ended client\'s connection to go');
      held.push(await FileClient.connect(at, { ...CLIENT, transport }));
      expect(s.srv.stats().connectionHostLimit).toBe(1);
    }, 60_000);
  });
}

describe('udp: past maxConnections (all authenticated), the extra client is told the server is full', () => {
  const s = servedDir('refusal-total', { port: 0, token: TOKEN, transports: ['udp'], limits: LIMITS, maxConnections: 2, maxUnauthenticated: 1, maxConnectionsPerHost: 4 });
  const held: FileClient[] = [];
  afterAll(async () => {
    for (const c of held) await c.end().catch(() => {});
  });

  it('rejects promptly with ERR_FILE_SESSION_LIMIT naming the server\'s limit, counted', async () => {
    const at = `127.0.0.1:${s.srv.address.port}`;
    for (let i = 0; i < 2; i++) held.push(await FileClient.connect(at, { ...CLIENT, transport: 'udp' }));
    const t0 = performance.now();
    const err = await connectOrError(at, 'udp', held);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(err).toMatchObject({ code: 'ERR_FILE_SESSION_LIMIT' });
    expect(err!.message).toMatch(/^the server refused: too many connections to the server/);
    expect(s.srv.stats().connectionsRefused).toBeGreaterThanOrEqual(1);
    expect(s.srv.stats().liveConnections).toBe(2);
  }, 60_000);
});

// Every pipe of the bound authenticated: the extra one is answered with Status(SessionLimit)
// naming the bound, unread, and closed (was: "closed the connection during the handshake",
// ERR_FILE_CONNECTION_LOST; then the status's text, "too many sessions…").
const PIPE_BOUNDS = [
  { bound: 'maxPipesPerHost', message: 'the server refused: too many control pipes from your host, all logged in (maxPipesPerHost)' },
  { bound: 'maxPipes', message: 'the server refused: too many control pipes to the server, all logged in (maxPipes)' },
] as const;

for (const { bound, message } of PIPE_BOUNDS) {
  describe(`control pipes past ${bound} 2, every one authenticated: the extra client is told, not cut off`, () => {
    const s = servedDir(`refusal-pipes-${bound}`, { port: 0, token: TOKEN, transports: ['tcp'], limits: LIMITS, [bound]: 2 });
    const held: FileClient[] = [];
    afterAll(async () => {
      for (const c of held) await c.end().catch(() => {});
    });

    it('ERR_FILE_SESSION_LIMIT naming the bound, at once, counted; the held clients read on', async () => {
      const at = `127.0.0.1:${s.srv.address.port}`;
      for (let i = 0; i < 2; i++) held.push(await FileClient.connect(at, { ...CLIENT, transport: 'tcp' }));
      const before = s.srv.stats().pipesRefused;
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        const err = await connectOrError(at, 'tcp', held);
        expect(performance.now() - t0).toBeLessThan(2000);
        expect(err).toMatchObject({ code: 'ERR_FILE_SESSION_LIMIT', status: FileStatus.SessionLimit });
        expect(err!.message).toBe(message);
      }
      expect(s.srv.stats().pipesRefused).toBe(before + 3);
      // The refused sockets are gone within their linger; the held clients read on.
      await until(() => s.srv.stats().pipes === 2, 3000, 'the refused pipes to go');
      for (const c of held) expect(new TextDecoder().decode(await c.read(await c.open('hello.txt'), 0, 5))).toBe('hello');
    }, 60_000);
  });
}
