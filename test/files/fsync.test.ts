// Durability (issue 14, point 5): a put asked to fsync (put({ fsync }), `sabre put --fsync`) or
// served with fsync (serveFiles({ fsync }), `sabre serve --fsync`) really fsyncs the uploaded
// file and its directory before the rename, and a put that asks for nothing does not. fs.fsync
// is wrapped before the file service is loaded (the jail binds it when its module loads); each
// call records what the descriptor names (/proc/self/fd) as it happens.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

const synced: string[] = [];
const realFsync = fs.fsync;
vi.spyOn(fs, 'fsync').mockImplementation(((fd: number, cb: (e: NodeJS.ErrnoException | null) => void) => {
  try {
    synced.push(fs.readlinkSync(`/proc/self/fd/${fd}`));
  } catch {
    synced.push(`fd ${fd}`);
  }
  return realFsync(fd, cb);
}) as typeof fs.fsync);

const { FileClient, serveFiles } = await import('../../src/index.js');
const { tempDir } = await import('./helpers.js');

const TOKEN = 'fsync-token';

describe.skipIf(!fs.existsSync('/proc/self/fd'))('put --fsync fsyncs the file and its directory before the rename', () => {
  let dir: string;
  let local: string;

  beforeAll(() => {
    dir = fs.realpathSync(tempDir('fsync'));
    local = tempDir('fsync-local');
    fs.writeFileSync(join(local, 'src.bin'), Buffer.alloc(300_000, 4));
  });

  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  });

  it.each([
    ['the client asks (put { fsync: true })', false, true, true],
    ['the server is run with fsync', true, false, true],
    ['nobody asks', false, false, false],
  ])('%s', async (_what, serverFsync, clientFsync, want) => {
    const srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'], fsync: serverFsync });
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
    try {
      synced.length = 0;
      const name = `up-${String(serverFsync)}-${String(clientFsync)}.bin`;
      await c.put(join(local, 'src.bin'), name, { fsync: clientFsync });
      expect(fs.statSync(join(dir, name)).size).toBe(300_000);
      if (!want) {
        expect(synced).toEqual([]);
        return;
      }
      // The file was synced under its temporary name (in the served directory, not yet renamed),
      // then the directory that the rename changed.
      expect(synced).toHaveLength(2);
      const [file, parent] = synced as [string, string];
      expect(file.startsWith(`${dir}/`)).toBe(true);
      expect(file).not.toBe(join(dir, name));
      expect(fs.existsSync(file)).toBe(false); // renamed away since
      expect(parent).toBe(dir);
    } finally {
      await c.end();
      await srv.close();
    }
  });
});
