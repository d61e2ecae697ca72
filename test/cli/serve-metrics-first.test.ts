// `sabre serve --metrics-port M` whose metrics cannot be served (the port taken; prom-client
// missing fails the same call) fails before the service binds its ports or prints a token: one
// line, exit 1. Before: the service came up, printed its token, then exited 1.
import net from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sabreAsync } from './helpers.js';

const servers: net.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

describe('sabre serve --metrics-port', () => {
  it('a metrics port that is taken: one line, exit 1, no token printed', async () => {
    const busy = net.createServer();
    servers.push(busy);
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const port = (busy.address() as net.AddressInfo).port;
    const dir = mkdtempSync(join(tmpdir(), 'sabre-serve-metrics-'));
    const r = await sabreAsync(['serve', dir, '--port', '0', '--metrics-port', String(port)], 30_000, { SABRE_TOKEN: '' });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/already in use/);
    expect(r.stdout).not.toMatch(/token|sabre serve:/);
  });
});
