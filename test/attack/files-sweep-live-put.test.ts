// Two file servers on one directory (a restart that overlaps the old process): the second one,
// told partSweepAgeMs 0 ("no other server serves this"), sweeps the first one's live put's
// temporary at its start. Checked, as a defence: the put does not report success — its Close
// fails (the temporary is gone, so nothing is renamed into place), the name never appears with
// the put's bytes, and no part file is left behind. With the default age the live put's
// temporary (written a moment ago) is kept and the same put completes. Real servers, tcp.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { tempDir } from '../files/helpers.js';

const TOKEN = 'sweep-live-put-token-0123456789abcdef';
const made: string[] = [];
afterAll(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true });
});
const parts = (d: string): string[] => fs.readdirSync(d).filter((n) => /^\.sabre-[0-9a-f]{16}\.part$/.test(n));

describe('a second server sweeping a live put of the first', () => {
  for (const [what, age] of [['partSweepAgeMs 0: the put fails at its Close, nothing lands', 0], ['the default age: the young temporary is kept and the put lands', undefined]] as const) {
    it(what, async () => {
      const root = tempDir('sweep-live');
      made.push(root);
      fs.writeFileSync(join(root, 'x.bin'), 'old');
      const a = await serveFiles(root, { token: TOKEN, transports: ['tcp'] });
      let c: FileClient | undefined;
      try {
        c = await FileClient.connect(`127.0.0.1:${a.address.port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 10_000 });
        const f = await c.open('x.bin', { flags: 'replace' });
        const body = new Uint8Array(200_000).fill(7);
        await c.write(f, 0, body);
        expect(parts(root)).toHaveLength(1);
        const b = await serveFiles(root, { token: TOKEN, transports: ['inproc'], ...(age !== undefined ? { partSweepAgeMs: age } : {}) });
        await b.close();
        const closed = await c.close(f).then(() => undefined, (e: unknown) => e);
        if (age === 0) {
          expect(closed).toBeInstanceOf(Error);
          expect(fs.readFileSync(join(root, 'x.bin'), 'utf8')).toBe('old');
        } else {
          expect(closed).toBeUndefined();
          expect(Buffer.compare(fs.readFileSync(join(root, 'x.bin')), body)).toBe(0);
        }
        expect(parts(root)).toEqual([]);
      } finally {
        await c?.end().catch(() => {});
        await a.close();
      }
    }, 30_000);
  }
});
