// A hostile (or hung) file server, as the client sees it: it takes a request and never answers,
// its pipe and its RDMA connection alive — the real server with Jail.open / JailFile.read
// patched in this process to wait until the test releases them. The client had no deadline on
// a request: read, open and `sabre get` waited for good. Now each request has one
// (ConnectOptions.requestTimeoutMs, `--request-timeout`): at it the request is cancelled; a
// server that answers the Cancel costs only that operation (ERR_FILE_TIMEOUT) and the session
// goes on, its sinks unharmed; one that does not fails the session with ERR_FILE_TIMEOUT.
// Every case failed before the fix (nothing settled; the CLI was still running when killed).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, type FileServer, serveFiles } from '../../src/index.js';
import { Jail, JailFile } from '../../src/files/jail.js';
import { MAIN, tempDir } from '../files/helpers.js';

const TOKEN = 'attack-client-silent-token-0123456789';
const origRead = JailFile.prototype.read;
const origOpen = Jail.prototype.open;
const held: (() => void)[] = [];

/** The outcome of `p` within `ms`: its error's code, 'ok', or 'pending'. */
async function within(p: Promise<unknown>, ms: number): Promise<string> {
  let t: NodeJS.Timeout | undefined;
  const r = await Promise.race([
    p.then(() => 'ok', (e: { code?: string }) => e.code ?? String(e)),
    new Promise<string>((res) => (t = setTimeout(() => res('pending'), ms))),
  ]);
  clearTimeout(t);
  return r;
}

/** Hold the next `n` file reads at the server (all of them if n is Infinity). */
function holdReads(n: number): void {
  let left = n;
  JailFile.prototype.read = function (this: JailFile, into: Uint8Array, length: number, position: number): Promise<number> {
    if (left-- <= 0) return origRead.call(this, into, length, position);
    return new Promise((res) => held.push(() => res(origRead.call(this, into, length, position))));
  };
}

describe('a server that takes a request and never answers it', () => {
  let dir: string;
  let srv: FileServer;
  const data = new Uint8Array(10_000).map((_, i) => i % 251);
  beforeAll(async () => {
    dir = tempDir('attack-client-silent');
    fs.writeFileSync(join(dir, 'a.bin'), data);
    srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'] });
  }, 30_000);
  afterEach(() => {
    JailFile.prototype.read = origRead;
    Jail.prototype.open = origOpen;
    for (const r of held.splice(0)) r();
  });
  afterAll(async () => {
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('nor its Cancel: the read fails with ERR_FILE_TIMEOUT after deadline + grace, and so does the session', async () => {
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp', requestTimeoutMs: 500 });
    try {
      const f = await c.open('a.bin');
      holdReads(Infinity);
      const t0 = performance.now();
      const p = c.read(f, 0, 100);
      expect(await within(p, 5000)).toBe('ERR_FILE_TIMEOUT');
      // 500 ms to the Cancel, 500 ms more for its answer.
      expect(performance.now() - t0).toBeGreaterThanOrEqual(900);
      await expect(p).rejects.toThrow(/no answer from the server within 500 ms, nor to its Cancel/);
      // Given up: what comes next fails at once with the same error, not after another wait.
      expect(await within(c.open('a.bin'), 100)).toBe('ERR_FILE_TIMEOUT');
    } finally {
      await c.end();
    }
  }, 20_000);

  it('but it answers the Cancel: only that read fails (ERR_FILE_TIMEOUT); the session goes on, byte-exact', async () => {
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp', requestTimeoutMs: 1000 });
    try {
      const f = await c.open('a.bin');
      holdReads(1);
      const p = c.read(f, 0, 5000);
      // Released inside the grace (1000–2000 ms): the server finds the read cancelled, drops its
      // data (nothing lands in the sink) and answers Cancelled.
      setTimeout(() => held.splice(0).forEach((r) => r()), 1400);
      expect(await within(p, 5000)).toBe('ERR_FILE_TIMEOUT');
      await expect(p).rejects.toThrow(/no answer from the server within 1000 ms/);
      // The sink is reused by the next reads: they must see their own bytes.
      expect(Buffer.from(await c.read(f, 0, 10_000)).equals(Buffer.from(data))).toBe(true);
      expect(Buffer.from(await c.read(f, 5000, 100)).equals(Buffer.from(data.subarray(5000, 5100)))).toBe(true);
      await c.close(f);
    } finally {
      await c.end();
    }
  }, 20_000);

  it('sabre get --request-timeout 1000 against an open that never comes back: exit 1, one line, in time', async () => {
    Jail.prototype.open = function (this: Jail, ...a: Parameters<Jail['open']>): ReturnType<Jail['open']> {
      return new Promise((res) => held.push(() => res(origOpen.apply(this, a))));
    };
    const child = spawn(process.execPath, [MAIN, 'get', `127.0.0.1:${srv.address.port}/a.bin`, join(dir, 'out.bin'), '--token', TOKEN, '--transport', 'tcp', '--request-timeout', '1000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (b) => (err += b));
    const rc = await new Promise<number | string>((res) => {
      const t = setTimeout(() => {
        child.kill('SIGKILL');
        res('still running after 15 s, killed');
      }, 15_000);
      child.on('exit', (code) => {
        clearTimeout(t);
        res(code ?? -1);
      });
    });
    expect(rc, err).toBe(1);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toMatch(/get: open a\.bin: no answer from the server within 1000 ms/);
    expect(fs.existsSync(join(dir, 'out.bin'))).toBe(false);
  }, 30_000);

  it('--request-timeout must be a whole number of ms (usage error, exit 2)', async () => {
    const child = spawn(process.execPath, [MAIN, 'ls', '127.0.0.1:1', '--token', TOKEN, '--request-timeout', 'soon'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (b) => (err += b));
    const rc = await new Promise<number | null>((res) => child.on('exit', res));
    expect(rc).toBe(2);
    expect(err).toMatch(/--request-timeout must be an integer/);
  }, 20_000);
});
