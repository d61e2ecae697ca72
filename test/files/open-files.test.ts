// The server-wide cap on open files (ServeOptions.maxOpenFilesTotal, src/files/open-files.ts): its
// default from the process's soft descriptor limit, the check of the option, and the cap across
// two connections in process (the attack it answers, under a real descriptor limit, is
// test/attack/files-fd-exhaust.test.ts).
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { defaultMaxOpenFiles, FALLBACK_MAX_OPEN_FILES, softFdLimit } from '../../src/files/open-files.js';
import { statusCode } from '../../src/files/status.js';
import { FileStatus } from '../../src/wire/files-spec.js';
import { servedDir, tempDir, until } from './helpers.js';

const limits = (soft: string): string =>
  `Limit                     Soft Limit           Hard Limit           Units     \nMax processes             63704                63704                processes \nMax open files            ${soft}                 4096                 files     \n`;

describe('maxOpenFilesTotal', () => {
  it('defaults to a quarter of the soft fd limit (at least 16; 256 when it cannot be read)', () => {
    expect(softFdLimit(limits('1024'))).toBe(1024);
    expect(defaultMaxOpenFiles(limits('1024'))).toBe(256);
    expect(defaultMaxOpenFiles(limits('400'))).toBe(100);
    expect(defaultMaxOpenFiles(limits('20'))).toBe(16);
    expect(defaultMaxOpenFiles(limits('unlimited'))).toBe(1 << 20);
    expect(defaultMaxOpenFiles('nothing here')).toBe(FALLBACK_MAX_OPEN_FILES);
    expect(defaultMaxOpenFiles()).toBeGreaterThanOrEqual(16); // this process's
  });

  it('a value that would leave the cap off is refused before anything is opened', async () => {
    const dir = tempDir('open-files-opt');
    try {
      for (const v of [0, -1, 1.5, Number.NaN, Infinity]) {
        await expect(serveFiles(dir, { token: 'open-files-option-0123456789', transports: ['tcp'], maxOpenFilesTotal: v })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('across connections', () => {
    const TOKEN = 'open-files-cap-0123456789abcdef';
    const served = servedDir('open-files-cap', { token: TOKEN, transports: ['tcp'], maxOpenFilesTotal: 3 }, { 'a.txt': 'a', 'b.txt': 'b' });

    it('3 files open in all: a second connection is refused past them, counted; room comes back at a close', async () => {
      const srv = served.srv;
      const c1 = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
      const c2 = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
      try {
        const f1 = await c1.open('a.txt');
        await c1.open('b.txt');
        await c2.open('new.bin', { flags: 'replace' });
        expect(srv.stats().openFiles).toBe(3);
        const err = await c2.open('a.txt').then(() => undefined, (e: { code?: string }) => e.code);
        expect(err).toBe(statusCode(FileStatus.TooManyOpenFiles));
        expect(srv.stats().openFilesRefused).toBe(1);
        expect(srv.stats().refusedTooManyOpen).toBe(0); // not the connection's own cap
        await c1.close(f1);
        expect(srv.stats().openFiles).toBe(2);
        const g = await c2.open('a.txt');
        expect(new TextDecoder().decode(await c2.read(g, 0, 10))).toBe('a');
      } finally {
        await c1.end();
        await c2.end();
      }
      // The connections' files are closed as they go (the count follows each close's end).
      await until(() => srv.stats().openFiles === 0, 5000, 'the files of the ended connections to be closed');
    });
  });
});
