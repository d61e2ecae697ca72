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
import { FILE_SERVICE, FileStatus } from '../../src/wire/files-spec.js';
import { tempDirsRemovedAfter, until } from './helpers.js';
import fs from 'node:fs';
import { join } from 'node:path';

const TOKEN = 'connection-burst-token-0123456789';
// Small connections: each bound one registers its credits' receives and staging at the server.
const LIMITS = { credits: 2, maxWriteSize: 64 << 10, maxReadWriteSize: 64 << 10, rwDepth: 1 };
const CLIENT = { token: TOKEN, timeoutMs: 8000, sinks: 1, writeBuffers: 1, credits: 2, workers: 0 };
const ROUNDS = 4;
const tempDir = tempDirsRemovedAfter();

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

describe.concurrent('a burst of clients from one host past the connection bounds', () => {
  for (const transport of ['udp', 'tcp'] as const) {
    it(`${transport}: past maxUnauthenticatedPerHost each client connects or is told ERR_FILE_SESSION_LIMIT (the eviction's reason); counted`, async ({ expect, onTestFinished }) => {
      const cap = 1;
      const dir = tempDir(`burst-unauth-${transport}`);
      fs.writeFileSync(join(dir, 'hello.txt'), 'hello');
      const srv = await serveFiles(dir, { port: 0, token: TOKEN, transports: [transport], limits: LIMITS, maxUnauthenticatedPerHost: cap });
      onTestFinished(() => srv.close());
      const at = `127.0.0.1:${srv.address.port}`;
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
      const dir = tempDir(`burst-host-${transport}`);
      fs.writeFileSync(join(dir, 'hello.txt'), 'hello');
      const srv = await serveFiles(dir, { port: 0, token: TOKEN, transports: [transport], limits: LIMITS, maxConnectionsPerHost: cap });
      onTestFinished(() => srv.close());
      const at = `127.0.0.1:${srv.address.port}`;
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
    const dir = tempDir('burst-silent');
    fs.writeFileSync(join(dir, 'hello.txt'), 'hello');
    const srv = await serveFiles(dir, { port: 0, token: TOKEN, transports: ['udp'], limits: LIMITS, maxUnauthenticatedPerHost: 1, maxUnauthenticated: 2 });
    onTestFinished(() => srv.close());
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
