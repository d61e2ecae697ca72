// The CLI meeting a peer that is not sabre: one line that says so, never a stack trace or a hang.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sabreBg } from './helpers.js';

describe('a CLI pointed at an HTTP server', () => {
  let http: Server;
  let port = 0;
  beforeAll(async () => {
    http = createServer((_req, res) => res.end('hello'));
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    port = (http.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => http.close(() => r())));

  // In the background: the HTTP server lives in this process and must keep answering.
  const run = async (args: string[]): Promise<{ code: number | null; stderr: string }> => {
    const c = sabreBg(args);
    const t = setTimeout(() => c.child.kill('SIGKILL'), 20_000);
    const code = await c.exited;
    clearTimeout(t);
    return { code, stderr: c.err() };
  };

  it('perf says the peer is not a perf server, in one line, exit 1', async () => {
    const r = await run(['perf', 'write_bw', '127.0.0.1', '-p', String(port), '-n', '10']);
    expect(r.code, 'killed: the client hung').toBe(1);
    expect(r.stderr).toMatch(/not a sabre perf server/);
    expect(r.stderr).not.toMatch(/SyntaxError|at .*\.js:\d+/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('get says the peer is not a sabre file server, in one line', async () => {
    const r = await run(['get', `127.0.0.1:${port}/x`, '/tmp/sabre-strangers-x', '--token', 'a-token-of-some-length']);
    expect(r.code, 'killed: the client hung').toBe(1);
    expect(r.stderr).toMatch(/not a sabre file server/);
    expect(r.stderr).not.toMatch(/frame version/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
