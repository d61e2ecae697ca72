// What a process dying mid-transfer leaves behind, over real sockets between real processes:
// a client killed with SIGKILL frees every resource its session held on the server (the session
// dies with its control pipe); a server killed with SIGKILL gives the client one clear error.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, type FileServer, serveFiles } from '../../src/index.js';
import { killAndWait, randomFile, spawnServer, tempDir, until } from './helpers.js';

const TOKEN = 'failures-token';
const CHILD = join(import.meta.dirname, 'fixtures', 'transfer-child.mjs');
const BIG = 256 << 20;

describe.each(['udp', 'tcp'] as const)('a client killed mid-transfer (%s)', (transport) => {
  let dir: string;
  let local: string;
  let srv: FileServer;
  beforeAll(async () => {
    dir = tempDir(`kill-client-${transport}`);
    local = tempDir(`kill-client-${transport}-local`);
    randomFile(join(dir, 'big.bin'), BIG);
    randomFile(join(local, 'up.bin'), BIG);
    srv = await serveFiles(dir, { token: TOKEN, transports: [transport] });
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  });

  it.each(['get', 'put'] as const)('%s: SIGKILL at ~16 MiB; the server frees the session, connection, files and memory, and no temporary stays', async (mode) => {
    const base = srv.stats();
    const child = fork(CHILD, [mode, String(srv.address.port), TOKEN, transport, mode === 'get' ? 'big.bin' : 'up.bin', join(local, mode === 'get' ? 'down.bin' : 'up.bin')], { stdio: 'ignore' });
    let done = 0;
    child.on('message', (m: { done?: number }) => {
      if (m.done) done = m.done;
    });
    await until(() => done >= 16 << 20, 30_000, 'the transfer to be under way');
    const mid = srv.stats();
    expect(mid.sessions).toBe(base.sessions + 1);
    expect(mid.liveConnections).toBe(base.liveConnections + 1);
    expect(mid.openFiles).toBeGreaterThan(0);
    expect(mid.registeredBytes).toBeGreaterThan(0);
    await killAndWait(child);
    expect(done).toBeLessThan(BIG);
    await until(() => {
      const s = srv.stats();
      return s.sessions === base.sessions && s.liveConnections === base.liveConnections && s.openFiles === 0 && s.registeredBytes === 0;
    }, 15_000, 'the server to free the session');
    // A put never reaches its name, and its temporary file is gone.
    expect(fs.readdirSync(dir).filter((n) => n !== 'big.bin')).toEqual([]);
    // And the server still serves.
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport });
    expect((await c.list()).map((e) => e.name)).toEqual(['big.bin']);
    await c.end();
    await until(() => srv.stats().sessions === base.sessions, 5000, 'the checking session to end');
  }, 90_000);
});

describe.each(['udp', 'tcp'] as const)('a server killed mid-transfer (%s)', (transport) => {
  let dir: string;
  let local: string;
  beforeAll(() => {
    dir = tempDir(`kill-server-${transport}`);
    local = tempDir(`kill-server-${transport}-local`);
    randomFile(join(dir, 'big.bin'), BIG);
    randomFile(join(local, 'up.bin'), BIG);
  }, 60_000);
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  });

  it.each(['get', 'put'] as const)('%s: SIGKILL at ~16 MiB; the client fails with ERR_FILE_CONNECTION_LOST and leaves no partial file', async (mode) => {
    const s = await spawnServer(dir, ['--transport', transport], { SABRE_TOKEN: TOKEN });
    const c = await FileClient.connect(`127.0.0.1:${s.port}`, { token: TOKEN, transport });
    let killed = false;
    const onProgress = (d: number): void => {
      if (!killed && d >= 16 << 20) {
        killed = true;
        s.child.kill('SIGKILL');
      }
    };
    const t0 = Date.now();
    const err = await (mode === 'get' ? c.get('big.bin', join(local, 'down.bin'), { onProgress }) : c.put(join(local, 'up.bin'), 'up.bin', { onProgress })).then(
      () => undefined,
      (e: { code: string; message: string }) => e,
    );
    expect(killed).toBe(true);
    expect(err?.code).toBe('ERR_FILE_CONNECTION_LOST');
    expect(err?.message).toMatch(/closed the connection|RDMA connection failed/);
    expect(Date.now() - t0, 'the lost connection surfaced instead of hanging').toBeLessThan(20_000);
    expect(fs.existsSync(join(local, 'down.bin'))).toBe(false);
    expect(fs.existsSync(join(local, 'down.bin.sabre-part'))).toBe(false);
    await c.end();
    await killAndWait(s.child);
    // The killed server's temporary of the put may remain (nobody was left to remove it), never the name.
    expect(fs.existsSync(join(dir, 'up.bin'))).toBe(false);
    for (const n of fs.readdirSync(dir)) if (n.endsWith('.part')) fs.rmSync(join(dir, n));
  }, 90_000);
});
