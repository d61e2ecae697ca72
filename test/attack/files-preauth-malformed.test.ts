// The first message on a file-service RDMA connection, before authentication, that is not even a
// header (a few bytes of garbage): it was counted as malformed and its receive — the one small
// receive an unauthenticated connection has — given up, but the connection was kept: a QP, a
// slot of the shared pre-authentication pool and a place among the unauthenticated connections
// held until the login deadline, by a connection that could no longer authenticate (nothing was
// posted for its next message). Now it is terminated at once, as every other refusal before
// authentication is.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FileServer, serveFiles } from '../../src/index.js';
import { Raw } from '../files/raw.js';
import { tempDir, until } from '../files/helpers.js';

const TOKEN = 'attack-preauth-malformed-0123456789';

describe('a malformed first message on an RDMA connection', () => {
  let dir: string;
  let srv: FileServer;

  beforeAll(async () => {
    dir = tempDir('atk-malformed');
    fs.writeFileSync(join(dir, 'f.bin'), Buffer.alloc(64, 7));
    // A login deadline far past the test: the connection must go for the refusal, not the deadline.
    srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'], limits: { authTimeoutMs: 60_000 } });
  }, 30_000);

  afterAll(async () => {
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('4 bytes of garbage before the AuthenticateRequest: counted, the connection torn down and its memory given back', async () => {
    const r = await Raw.open(srv.address.port, TOKEN);
    try {
      await until(() => srv.stats().unauthenticatedConnections === 1, 5000, 'the connection to be admitted');
      const before = srv.stats();
      r.send(Uint8Array.of(0xde, 0xad, 0xbe, 0xef));
      await until(() => srv.stats().malformed === before.malformed + 1, 5000, 'the message to be counted');
      // Before: held until the 60 s login deadline.
      await until(() => srv.stats().liveConnections === 0, 5000, 'the connection to be torn down');
      expect(srv.stats().unauthenticatedConnections).toBe(0);
      expect(srv.stats().terminated).toBe(before.terminated + 1);
    } finally {
      await r.close();
    }
  }, 30_000);
});
