// readv against a file whose size changed after it was opened. The client used to cut the
// pieces to the size the file had at open, not to what the server read: when the file shrank,
// what an earlier request had left in the sink came back as data. The server now reads the
// entries in order and stops at the first short one, and the client fills the pieces from the
// completion's byte count alone.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, type FileServer, serveFiles } from '../../src/index.js';
import { tempDir } from './helpers.js';

const TOKEN = 'readv-token';

describe('readv after the file changed size', () => {
  let dir: string;
  let srv: FileServer;
  let c: FileClient;

  beforeAll(async () => {
    dir = tempDir('readv');
    srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'] });
    // One sink: every read lands in the same registered memory, so stale bytes are there to leak.
    c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp', sinks: 1 });
  }, 30_000);

  afterAll(async () => {
    await c?.end();
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const collapse of [true, false]) {
    it(`a file that shrank: only the bytes it holds now come back (collapse ${collapse})`, async () => {
      const p = join(dir, `shrink-${collapse}.bin`);
      fs.writeFileSync(p, Buffer.alloc(8192, 'A'));
      const f = await c.open(`shrink-${collapse}.bin`);
      expect(f.size).toBe(8192);
      const pieces = [{ position: 0, length: 4096 }, { position: 4096, length: 4096 }];
      const full = await c.readv(f, pieces, { collapse });
      expect(full.map((x) => Buffer.from(x).toString())).toEqual(['A'.repeat(4096), 'A'.repeat(4096)]);
      // Same inode, new content, 100 bytes: the sink still holds 8192 'A's from the read above.
      fs.writeFileSync(p, Buffer.alloc(100, 'B'));
      const now = await c.readv(f, pieces, { collapse });
      expect(now.map((x) => x.length)).toEqual([100, 0]);
      expect(Buffer.from(now[0]!).toString()).toBe('B'.repeat(100));
      await c.close(f);
    });
  }

  it('a file that grew: the new bytes come back; pieces are filled in order and end at the first short one', async () => {
    const p = join(dir, 'grow.bin');
    fs.writeFileSync(p, Buffer.alloc(1000, 'C'));
    const f = await c.open('grow.bin');
    fs.appendFileSync(p, Buffer.alloc(1000, 'D'));
    const got = await c.readv(f, [{ position: 900, length: 200 }, { position: 1900, length: 200 }, { position: 0, length: 10 }]);
    expect(got.map((x) => x.length)).toEqual([200, 100, 0]);
    expect(Buffer.from(got[0]!).toString()).toBe('C'.repeat(100) + 'D'.repeat(100));
    expect(Buffer.from(got[1]!).toString()).toBe('D'.repeat(100));
    await c.close(f);
  });
});
