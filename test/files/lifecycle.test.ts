// Closing the file service's objects (src/core/lifecycle.ts): close() / end() run once and every
// call gets the same promise, settled only when the first has finished; what was pending fails
// with the documented code (ERR_FILE_CLOSED on the client).
import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { tempDir } from './helpers.js';

const TOKEN = 'lifecycle-token';

describe('file service lifecycle', () => {
  const dir = tempDir('lifecycle');
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('server.close() twice: the same promise, resolved once the devices are closed', async () => {
    const srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'] });
    const p1 = srv.close();
    const p2 = srv.close();
    expect(p2).toBe(p1);
    await p2;
    expect(Object.values(srv.devices).every((d) => d!.closed)).toBe(true);
    expect(srv.close()).toBe(p1);
  });

  it('workers reaches the server\'s udp and tcp devices (0 inline, 1 a NIC thread), and a client with either reads', async () => {
    fs.writeFileSync(`${dir}/w.txt`, 'w');
    for (const workers of [0, 1]) {
      const srv = await serveFiles(dir, { token: TOKEN, transports: ['udp', 'tcp'], workers });
      try {
        expect([srv.devices.udp!.workers, srv.devices.tcp!.workers]).toEqual([workers, workers]);
        for (const transport of ['udp', 'tcp'] as const) {
          const c = await FileClient.connect(srv.address, { token: TOKEN, transport, workers });
          try {
            const f = await c.open('w.txt');
            expect(Buffer.from(await c.read(f, 0, 1)).toString()).toBe('w');
            await c.close(f);
          } finally {
            await c.end();
          }
        }
      } finally {
        await srv.close();
      }
    }
  });

  it('client.end() twice: the same promise; a request pending at end() and one after it fail with ERR_FILE_CLOSED', async () => {
    const srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'] });
    try {
      const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
      const pending = c.list('');
      const e1 = c.end();
      const e2 = c.end();
      expect(e2).toBe(e1);
      await expect(pending).rejects.toMatchObject({ code: 'ERR_FILE_CLOSED' });
      await e1;
      await expect(c.list('')).rejects.toMatchObject({ code: 'ERR_FILE_CLOSED' });
    } finally {
      await srv.close();
    }
  });

  it('client.close(f) twice, at once or later: the same promise, one Close at the server; a replace put\'s file appears once', async () => {
    const srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'] });
    try {
      const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
      try {
        const f = await c.open('twice.txt', { flags: 'replace' });
        await c.write(f, 0, new TextEncoder().encode('once'));
        const c1 = c.close(f);
        const c2 = c.close(f);
        await expect(Promise.all([c1, c2])).resolves.toEqual([undefined, undefined]);
        await expect(c.close(f)).resolves.toBeUndefined();
        expect(c2).toBe(c1);
        expect(c.close(f)).toBe(c1);
        expect(fs.readFileSync(`${dir}/twice.txt`, 'utf8')).toBe('once');
      } finally {
        await c.end();
      }
    } finally {
      await srv.close();
    }
  });
});
