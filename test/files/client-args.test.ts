// FileClient checks positions, lengths and handles locally: a misused call rejects with
// ERR_INVALID_ARGUMENT before anything travels, never as a RangeError or TypeError from inside
// the client, and never as a request the server has to call malformed.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, type FileServer, type RemoteFile, serveFiles } from '../../src/index.js';
import { tempDir } from './helpers.js';

const TOKEN = 'client-args-token';

describe('FileClient argument checks', () => {
  let dir: string;
  let srv: FileServer;
  let c: FileClient;
  let f: RemoteFile;

  beforeAll(async () => {
    dir = tempDir('args');
    fs.writeFileSync(join(dir, 'a.bin'), Buffer.alloc(4096, 7));
    srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'] });
    c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
    f = await c.open('a.bin', { flags: 'r+' });
  }, 30_000);

  afterAll(async () => {
    await c?.end();
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const invalid = { name: 'SabreError', code: 'ERR_INVALID_ARGUMENT' };

  it('a read longer than any Uint8Array', async () => {
    await expect(c.read(f, 0, 2 ** 40)).rejects.toMatchObject(invalid);
  });

  it('negative, fractional and unsafe positions fail locally, the server sees no request', async () => {
    const before = srv.stats().malformed ?? 0;
    for (const pos of [-1, 0.5, 2 ** 60, Number.NaN]) {
      await expect(c.read(f, pos, 16), `read at ${pos}`).rejects.toMatchObject(invalid);
      await expect(c.write(f, pos, new Uint8Array(4)), `write at ${pos}`).rejects.toMatchObject(invalid);
      await expect(c.readv(f, [{ position: pos, length: 4 }]), `readv at ${pos}`).rejects.toMatchObject(invalid);
      await expect(c.writev(f, [{ position: pos, data: new Uint8Array(4) }]), `writev at ${pos}`).rejects.toMatchObject(invalid);
    }
    await expect(c.read(f, 0, -1)).rejects.toMatchObject(invalid);
    expect(srv.stats().malformed ?? 0).toBe(before);
  });

  it('readv and writev of no pieces: ERR_INVALID_ARGUMENT (not a limit "0 exceeds 64")', async () => {
    await expect(c.readv(f, [])).rejects.toMatchObject({ ...invalid, message: expect.stringMatching(/at least one piece/) });
    await expect(c.writev(f, [])).rejects.toMatchObject({ ...invalid, message: expect.stringMatching(/at least one piece/) });
  });

  it('close() without a file says how to end the client', async () => {
    await expect((c.close as unknown as () => Promise<void>)()).rejects.toMatchObject({ ...invalid, message: expect.stringMatching(/end\(\)/) });
  });

  it('the client still works after the refusals', async () => {
    const b = await c.read(f, 0, 16);
    expect(Array.from(b)).toEqual(new Array(16).fill(7));
  });
});
