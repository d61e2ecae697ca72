// Replace puts at commit time, over real sockets and real files:
// - Replace|Create|Exclusive is exclusive when it commits, not only when it opens: the commit is
//   link(2) of the temporary to the name (EEXIST: the close fails with Exists, the name keeps
//   what it held) then unlink of the temporary. Before, the open checked the name was free and
//   the close renamed over whatever was there since: two exclusive creates of one name both
//   reported Success and the first writer's bytes were silently replaced.
// - A failed fsync at commit closes the file's descriptor (it was left open: a leak per failure).
// - An open that finishes after server.close() freed its connection closes what it opened.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { FileAccess, FileOp, FileStatus } from '../../src/wire/files-spec.js';
import { Jail, JailFile } from '../../src/files/jail.js';
import { Conn } from '../../src/files/server-conn.js';
import { DEFAULT_SERVER_LIMITS, newServerCounters } from '../../src/files/server-core.js';
import { SessionTable } from '../../src/files/sessions.js';
import { OpenFileBudget } from '../../src/files/open-files.js';
import { boundRaw } from './raw.js';
import { servedDir, tempDir } from './helpers.js';

const TOKEN = 'replace-exclusive-token-0123456789';
const EXCL = FileAccess.Write | FileAccess.Create | FileAccess.Exclusive | FileAccess.Replace;
const temporaries = (dir: string): string[] => fs.readdirSync(dir).filter((n) => n.startsWith('.sabre-'));

describe('Replace | Create | Exclusive commits only to a name that is still free', () => {
  const s = servedDir('excl', { port: 0, token: TOKEN, transports: ['tcp'] });

  it('two exclusive creates of one name: the first close wins, the second fails with Exists', async () => {
    const a = await boundRaw(s.srv.address.port, TOKEN);
    const b = await boundRaw(s.srv.address.port, TOKEN);
    try {
      const fa = await a.ask(FileOp.RegisterFile, { op: FileOp.RegisterFile, access: EXCL, mode: 0o644, path: 'ex.bin' });
      const fb = await b.ask(FileOp.RegisterFile, { op: FileOp.RegisterFile, access: EXCL, mode: 0o644, path: 'ex.bin' });
      // Both opens find the name free: neither temporary is under it yet.
      expect([fa.status, fb.status]).toEqual([FileStatus.Success, FileStatus.Success]);
      expect((await a.ask(FileOp.Write, { op: FileOp.Write, fileId: fa.aux, offset: 0, length: 1, dataOff: 0 }, new Uint8Array([0x41]))).status).toBe(FileStatus.Success);
      expect((await b.ask(FileOp.Write, { op: FileOp.Write, fileId: fb.aux, offset: 0, length: 1, dataOff: 0 }, new Uint8Array([0x42]))).status).toBe(FileStatus.Success);
      expect((await a.ask(FileOp.Close, { op: FileOp.Close, fileId: fa.aux, discard: 0 })).status).toBe(FileStatus.Success);
      expect((await b.ask(FileOp.Close, { op: FileOp.Close, fileId: fb.aux, discard: 0 })).status).toBe(FileStatus.Exists);
      expect(fs.readFileSync(join(s.dir, 'ex.bin'), 'latin1')).toBe('A');
      // The winner's file has one link (servable), and no temporary is left behind.
      expect(fs.statSync(join(s.dir, 'ex.bin')).nlink).toBe(1);
      expect(temporaries(s.dir)).toEqual([]);
    } finally {
      await a.r.close();
      await b.r.close();
    }
  });

  it('a name a local user made (a file, a dangling symbolic link) between open and close is kept', async () => {
    const { r, ask } = await boundRaw(s.srv.address.port, TOKEN);
    try {
      for (const [name, make] of [['local.bin', (p: string) => fs.writeFileSync(p, 'local')], ['dangling.bin', (p: string) => fs.symlinkSync('nowhere', p)]] as const) {
        const f = await ask(FileOp.RegisterFile, { op: FileOp.RegisterFile, access: EXCL, mode: 0o644, path: name });
        expect(f.status).toBe(FileStatus.Success);
        await ask(FileOp.Write, { op: FileOp.Write, fileId: f.aux, offset: 0, length: 3, dataOff: 0 }, new Uint8Array([1, 2, 3]));
        make(join(s.dir, name));
        expect((await ask(FileOp.Close, { op: FileOp.Close, fileId: f.aux, discard: 0 })).status, name).toBe(FileStatus.Exists);
      }
      expect(fs.readFileSync(join(s.dir, 'local.bin'), 'utf8')).toBe('local');
      expect(fs.readlinkSync(join(s.dir, 'dangling.bin'))).toBe('nowhere');
      expect(temporaries(s.dir)).toEqual([]);
      // Without Exclusive, Replace still replaces what is there.
      const f = await ask(FileOp.RegisterFile, { op: FileOp.RegisterFile, access: FileAccess.Write | FileAccess.Create | FileAccess.Replace, mode: 0o644, path: 'local.bin' });
      await ask(FileOp.Write, { op: FileOp.Write, fileId: f.aux, offset: 0, length: 3, dataOff: 0 }, new Uint8Array([0x6e, 0x65, 0x77]));
      expect((await ask(FileOp.Close, { op: FileOp.Close, fileId: f.aux, discard: 0 })).status).toBe(FileStatus.Success);
      expect(fs.readFileSync(join(s.dir, 'local.bin'), 'utf8')).toBe('new');
    } finally {
      await r.close();
    }
  });
});

describe('a Replace put\'s descriptor is closed whatever the commit does', () => {
  it('an fsync that fails (EINVAL on a FIFO) closes the descriptor and unlinks the temporary', async () => {
    const dir = tempDir('fsync-fail');
    try {
      const fifo = join(dir, 'fifo');
      execFileSync('mkfifo', [fifo]);
      // O_RDWR on a FIFO does not wait for a peer (Linux); fsync(2) of it fails with EINVAL.
      const fd = fs.openSync(fifo, fs.constants.O_RDWR | fs.constants.O_NONBLOCK);
      const dfd = fs.openSync(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      const tmp = `.sabre-${randomBytes(8).toString('hex')}.part`;
      fs.writeFileSync(join(dir, tmp), 'x');
      const f = new JailFile(fd, 0, { dir: dfd, tmp, name: 'out.bin', beneath: {} as never }, true);
      expect(await f.close(true)).toBe(FileStatus.InvalidParameter);
      // The descriptor no longer names the FIFO (closed; the number may have been reused since).
      let names: string | undefined;
      try {
        names = fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        names = undefined;
      }
      expect(names).not.toBe(fifo);
      expect(fs.existsSync(join(dir, tmp))).toBe(false);
      expect(fs.existsSync(join(dir, 'out.bin'))).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an open that completes after its connection was released closes the file and gives its budget back', async () => {
    const dir = tempDir('late-open');
    try {
      const jail = await Jail.open(dir);
      const budget = new OpenFileBudget(8);
      const conn = new Conn({ sessions: new SessionTable({}, (n) => new Uint8Array(randomBytes(n))), counters: newServerCounters(), openFiles: budget },
        {} as never, {} as never, 0, DEFAULT_SERVER_LIMITS);
      // A jail whose open finishes only when the test says so: server.close() frees the
      // connection (after its 2 s) while the open is still in the file system.
      let finish!: () => void;
      const gate = new Promise<void>((res) => (finish = res));
      let opened: JailFile | undefined;
      const slow = {
        open: async (...a: Parameters<Jail['open']>) => {
          await gate;
          const o = await jail.open(...a);
          if ('file' in o) opened = o.file;
          return o;
        },
      } as unknown as Jail;
      const access = FileAccess.Write | FileAccess.Create | FileAccess.Replace;
      const r = conn.doFs(slow, { op: 'open', parts: ['late.bin'], access, mode: 0o644, fsync: false });
      conn.release();
      finish();
      expect((await r).status).toBe(FileStatus.ShuttingDown);
      expect(conn.files.size).toBe(0);
      expect(budget.open).toBe(0);
      expect(opened).toBeDefined();
      // Closed: a second close gets the first one's result, and the temporary is gone.
      expect(await opened!.close(true)).toBe(FileStatus.Success);
      expect(fs.readdirSync(dir)).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
