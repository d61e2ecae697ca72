// A burst of honest clients from one host, all connecting at once (Promise.all, as a load tool
// does), past the server's bounds on RDMA connections: each client either connects and works or
// fails with ERR_FILE_SESSION_LIMIT naming the bound — none with ERR_FILE_CONNECTION_LOST, none
// by a deadline. Before, the server closed the oldest unauthenticated connection of the host for
// a newer one (its pre-auth flood defence, kept) by destroying its QP, and refused one that got
// past the cm's check while another of its host authenticated by teardown: those clients failed
// with ERR_FILE_CONNECTION_LOST ("the RDMA connection failed (WrFlushErr)", or on tcp "cannot
// connect … connect needs an INIT QP"). Now admission is decided in the cm's setup (a refusal
// there is a cm reject with a reason) and an evicted connection waits, out of the bounds, for its
// AuthenticateRequest to answer it StatusResponse(SessionLimit, Terminate) with the reason in
// aux. Real udp and tcp sockets on 127.0.0.1; the bursts repeat (bounded) to catch the races.
import { describe, type ExpectStatic, it } from 'vitest';
import { connect, FileClient, openDevice, type QueuePair, serveFiles } from '../../src/index.js';
import { FILE_MAC_LEN, FILE_NONCE_LEN, FILE_PIPE_STATUS, FILE_SERVICE, FilePipeType, FileStatus } from '../../src/wire/files-spec.js';
import { encodePipeFrame, type PipeFrame, PipeReader } from '../../src/files/pipe.js';
import { readFields } from '../../src/files/layout.js';
import { REFUSED_LINGER_MS } from '../../src/core/refuse.js';
import { tempDirsRemovedAfter, until } from './helpers.js';
import fs from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';

const TOKEN = 'connection-burst-token-0123456789';
// Small connections: each bound one registers its credits' receives and staging at the server.
const LIMITS = { credits: 2, maxWriteSize: 64 << 10, maxReadWriteSize: 64 << 10, rwDepth: 1 };
const CLIENT = { token: TOKEN, timeoutMs: 8000, sinks: 1, writeBuffers: 1, credits: 2, workers: 0 };
const ROUNDS = 4;
const tempDir = tempDirsRemovedAfter();

/** A file server over a directory holding hello.txt, closed when the test finishes; and its address for FileClient. */
async function helloServer(name: string, opts: Omit<Parameters<typeof serveFiles>[1], 'token' | 'port' | 'limits'>, onTestFinished: (f: () => Promise<void>) => void) {
  const dir = tempDir(name);
  fs.writeFileSync(join(dir, 'hello.txt'), 'hello');
  const srv = await serveFiles(dir, { port: 0, token: TOKEN, limits: LIMITS, ...opts });
  onTestFinished(() => srv.close());
  return { srv, at: `127.0.0.1:${srv.address.port}` };
}

type Outcome = { client: FileClient } | { error: { code?: string; status?: number; message?: string } };

/** `n` clients connecting at once; each one that got in reads hello.txt, then all end. */
async function burst(expect: ExpectStatic, at: string, transport: 'udp' | 'tcp', n: number): Promise<{ ok: number; errors: { code?: string; status?: number; message?: string }[] }> {
  const all: Outcome[] = await Promise.all(Array.from({ length: n }, () => FileClient.connect(at, { ...CLIENT, transport }).then((client) => ({ client }), (e: unknown) => ({ error: e as object }))));
  const held = all.flatMap((o) => ('client' in o ? [o.client] : []));
  try {
    for (const c of held) expect(new TextDecoder().decode(await c.read(await c.open('hello.txt'), 0, 5))).toBe('hello');
  } finally {
    for (const c of held) await c.end().catch(() => {});
  }
  return { ok: held.length, errors: all.flatMap((o) => ('error' in o ? [o.error] : [])) };
}

// The same burst past the control pipes' bounds: before, the pipe of the oldest unauthenticated
// client of the host was destroyed for a newer one, and that client failed with
// ERR_FILE_CONNECTION_LOST ("closed the connection during the handshake"). Now it is written
// Status(SessionLimit) with the bound's FILE_EVICTIONS code, after whatever its pipe had been
// written (a Challenge, perhaps), and lingers closed.
describe.concurrent('a burst of clients from one host past the control pipes\' bounds', () => {
  const cases = [
    { bound: 'maxUnauthenticatedPipesPerHost', cap: 1, reason: /too many unauthenticated control pipes from your host \(maxUnauthenticatedPipesPerHost\)/ },
    { bound: 'maxUnauthenticatedPipesPerHost', cap: 2, reason: /too many unauthenticated control pipes from your host \(maxUnauthenticatedPipesPerHost\)/ },
    { bound: 'maxPipesPerHost', cap: 2, reason: /too many control pipes from your host \(maxPipesPerHost\)/ },
  ] as const;
  for (const { bound, cap, reason } of cases) {
    it(`past ${bound} ${cap}: each client connects or is told ERR_FILE_SESSION_LIMIT naming the bound; counted`, async ({ expect, onTestFinished }) => {
      const { srv, at } = await helloServer(`burst-pipes-${bound}-${cap}`, { transports: ['tcp'], [bound]: cap }, onTestFinished);
      let told = 0;
      let refused = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const r = await burst(expect, at, 'tcp', cap + 3);
        for (const e of r.errors) {
          expect(e).toMatchObject({ code: 'ERR_FILE_SESSION_LIMIT', status: FileStatus.SessionLimit });
          // Closed for a newer pipe (told the bound), or, past maxPipesPerHost with every pipe
          // of the host authenticated, refused at accept.
          if (/closed before it authenticated/.test(e.message ?? '')) {
            expect(e.message).toMatch(new RegExp(`^the server refused: ${reason.source}; closed before it authenticated, for a newer connection$`));
            told++;
          } else {
            expect(e.message).toBe('the server refused: too many control pipes from your host, all logged in (maxPipesPerHost)');
            refused++;
          }
        }
        expect(r.ok).toBeGreaterThanOrEqual(1);
        await until(() => srv.stats().pipes === 0, 5000, 'the round\'s pipes to go');
      }
      const st = srv.stats();
      // Each burst outruns the first authentication: pipes were closed for newer ones, every one told.
      expect(told).toBeGreaterThan(0);
      expect(st).toMatchObject({ pipesEvicted: told, pipeEvictionsTold: told, pipeEvictionsUntold: 0, pipesRefused: refused });
    }, 30_000);
  }

  it('on the wire: after its Challenge the evicted pipe is written Status(SessionLimit, why 5), then closed within the linger; its Proof is never checked', async ({ expect, onTestFinished }) => {
    const dir = tempDir('burst-pipes-wire');
    const srv = await serveFiles(dir, { port: 0, token: TOKEN, transports: ['tcp'], limits: LIMITS, maxUnauthenticatedPipesPerHost: 1 });
    onTestFinished(() => srv.close());
    const open = (): { s: net.Socket; frames: PipeFrame[]; closed: Promise<number> } => {
      const s = net.connect({ host: '127.0.0.1', port: srv.address.port });
      onTestFinished(() => void s.destroy());
      const reader = new PipeReader();
      const frames: PipeFrame[] = [];
      s.on('data', (b: Buffer) => frames.push(...reader.push(new Uint8Array(b))));
      s.on('error', () => {});
      return { s, frames, closed: new Promise((r) => s.once('close', () => r(performance.now()))) };
    };
    const old = open();
    old.s.write(encodePipeFrame(FilePipeType.Hello, new Uint8Array(FILE_NONCE_LEN)));
    await until(() => old.frames.length === 1, 3000, 'the Challenge');
    expect(old.frames[0]!.type).toBe(FilePipeType.Challenge);
    const before = srv.stats();
    const newer = open();
    await until(() => old.frames.length === 2, 3000, 'the eviction\'s Status');
    const t0 = performance.now();
    expect(old.frames[1]!.type).toBe(FilePipeType.Status);
    expect(readFields(FILE_PIPE_STATUS, old.frames[1]!.body, 0)).toEqual({ status: FileStatus.SessionLimit, why: 5 });
    // A Proof now is dropped unread: no failed proof, no malformed frame, nothing more written.
    old.s.write(encodePipeFrame(FilePipeType.Proof, new Uint8Array(FILE_MAC_LEN)));
    const closedAt = await old.closed;
    expect(closedAt - t0).toBeLessThan(REFUSED_LINGER_MS + 500);
    expect(old.frames).toHaveLength(2);
    expect(srv.stats()).toMatchObject({
      pipeAuthFailed: before.pipeAuthFailed, pipeMalformed: before.pipeMalformed, pipesEvicted: before.pipesEvicted + 1,
      pipeEvictionsTold: 1, pipeEvictionsUntold: 0, sessions: 0,
    });
    newer.s.destroy();
    await until(() => srv.stats().pipes === 0, 3000, 'the pipes to go');
  }, 10_000);
});

describe.concurrent('a burst of clients from one host past the connection bounds', () => {
  for (const transport of ['udp', 'tcp'] as const) {
    it(`${transport}: past maxUnauthenticatedPerHost each client connects or is told ERR_FILE_SESSION_LIMIT (the eviction's reason); counted`, async ({ expect, onTestFinished }) => {
      const cap = 1;
      const { srv, at } = await helloServer(`burst-unauth-${transport}`, { transports: [transport], maxUnauthenticatedPerHost: cap }, onTestFinished);
      let told = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const r = await burst(expect, at, transport, cap + 2);
        for (const e of r.errors) {
          expect(e).toMatchObject({ code: 'ERR_FILE_SESSION_LIMIT', status: FileStatus.SessionLimit });
          expect(e.message).toMatch(/^the server refused: too many unauthenticated connections from your host \(maxUnauthenticatedPerHost\); closed before it authenticated, for a newer connection$/);
        }
        // The newest unauthenticated one of the burst is never closed for a newer one.
        expect(r.ok).toBeGreaterThanOrEqual(cap);
        told += r.errors.length;
        await until(() => srv.stats().liveConnections === 0, 5000, 'the round\'s connections to go');
      }
      const st = srv.stats();
      // Evictions happened (each burst outruns the first authentication), and every connection
      // closed for a newer one was told why, none cut off untold; none waits now.
      expect(told).toBeGreaterThan(0);
      expect(st).toMatchObject({ evictionsTold: told, evictionsUntold: 0, evictionsCut: 0, evictionsWaiting: 0, connectionsEvicted: told });
    }, 30_000);

    it(`${transport}: past maxConnectionsPerHost each client connects or is refused ERR_FILE_SESSION_LIMIT (never torn down after its connect); counted`, async ({ expect, onTestFinished }) => {
      const cap = 2;
      const { srv, at } = await helloServer(`burst-host-${transport}`, { transports: [transport], maxConnectionsPerHost: cap }, onTestFinished);
      let errors = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const r = await burst(expect, at, transport, cap + 2);
        for (const e of r.errors) {
          expect(e).toMatchObject({ code: 'ERR_FILE_SESSION_LIMIT', status: FileStatus.SessionLimit });
          expect(e.message).toMatch(/^the server refused: too many connections from your host \(maxConnectionsPerHost\)/);
        }
        expect(r.ok).toBe(cap);
        errors += r.errors.length;
        await until(() => srv.stats().liveConnections === 0, 5000, 'the round\'s connections to go');
      }
      const st = srv.stats();
      // Refused at the cm (connectionHostLimit) or closed for a newer one before authenticating and told (evictionsTold).
      expect(errors).toBe(2 * ROUNDS);
      expect(st.connectionHostLimit + st.evictionsTold).toBe(errors);
      expect(st).toMatchObject({ evictionsUntold: 0, evictionsCut: 0, evictionsWaiting: 0 });
    }, 30_000);
  }

  it('udp: evicted connections that never speak wait at most maxUnauthenticated at once and 2 s each; past the bound one is cut at once; all counted', async ({ expect, onTestFinished }) => {
    const { srv } = await helloServer('burst-silent', { transports: ['udp'], maxUnauthenticatedPerHost: 1, maxUnauthenticated: 2 }, onTestFinished);
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 0 });
    const qps: QueuePair[] = [];
    onTestFinished(async () => {
      for (const q of qps) q.destroy();
      await dev.close();
    });
    const at = { transport: 'udp' as const, host: '127.0.0.1', port: srv.devices.udp!.address.port as number };
    // Six token-less connections one after another: each closes the one before it (one
    // unauthenticated per host); two of those wait to be told, the rest are cut.
    let most = 0;
    for (let i = 0; i < 6; i++) {
      qps.push(await connect(dev, at, { service: FILE_SERVICE, timeoutMs: 3000, qpInit: { maxSendWr: 4, maxRecvWr: 4, maxSge: 1 } }));
      most = Math.max(most, srv.stats().evictionsWaiting);
    }
    expect(most).toBe(2);
    expect(srv.stats()).toMatchObject({ connectionsEvicted: 5, evictionsWaiting: 2, evictionsCut: 3, unauthenticatedConnections: 1 });
    // Out of the bounds: an honest client gets in and works meanwhile (it closes the silent
    // newest one, which is cut: two wait already).
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { ...CLIENT, transport: 'udp' });
    expect(new TextDecoder().decode(await c.read(await c.open('hello.txt'), 0, 5))).toBe('hello');
    await c.end();
    // Nothing came to answer: they go untold by their deadline.
    await until(() => srv.stats().evictionsWaiting === 0, 5000, 'the waiting evicted connections to go');
    expect(srv.stats()).toMatchObject({ evictionsUntold: 2, evictionsTold: 0, evictionsCut: 4 });
  }, 30_000);
});
