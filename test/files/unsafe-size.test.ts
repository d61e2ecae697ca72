// Sizes past 2^53 − 1. Offsets and sizes cross the wire as safe integers; a file larger than
// that cannot be described to a client. A Write (or a WriteV entry) ending past it is refused
// (InvalidParameter), so no client can make such a file; one a local user made is refused at
// open (LimitExceeded) instead of answered with a Completion the client cannot decode; and a
// client given such a Completion anyway fails that one request with ERR_FILE_PROTOCOL at once,
// its session going on (it used to drop the block, time the request out and give the session up).
//
// The tests over real files need a file system that holds sparse files that large: tmpfs (also
// xfs, btrfs; ext4 stops at 16 TiB). They use /dev/shm and are skipped where it is not tmpfs.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, type FileServer, serveFiles } from '../../src/index.js';
import { FileAccess, FileFlag, FileOp, FileStatus } from '../../src/wire/files-spec.js';
import { Harness } from './harness.js';
import { boundRaw } from './raw.js';

const TOKEN = 'unsafe-size-token-0123456789';
const SHM = '/dev/shm';
const shmIsTmpfs = (() => {
  try {
    return fs.readFileSync('/proc/mounts', 'utf8').split('\n').some((l) => l.split(' ')[1] === SHM && l.split(' ')[2] === 'tmpfs');
  } catch {
    return false;
  }
})();

describe.skipIf(!shmIsTmpfs)('a file past 2^53 - 1 bytes (served directory on tmpfs)', () => {
  const s = {} as { srv: FileServer; dir: string };
  beforeAll(async () => {
    s.dir = fs.mkdtempSync(join(SHM, 'sabre-files-unsafe-'));
    s.srv = await serveFiles(s.dir, { port: 0, token: TOKEN, transports: ['tcp'] });
  }, 30_000);
  afterAll(async () => {
    await s.srv?.close();
    if (s.dir) fs.rmSync(s.dir, { recursive: true, force: true });
  });

  it('a Write or a WriteV entry ending past 2^53 - 1 is refused (InvalidParameter), one ending at it is done', async () => {
    const { r, ask } = await boundRaw(s.srv.address.port, TOKEN);
    try {
      const f = await ask(FileOp.RegisterFile, { op: FileOp.RegisterFile, access: FileAccess.Write | FileAccess.Create, mode: 0o644, path: 'huge.bin' });
      expect(f.status).toBe(FileStatus.Success);
      const data = new Uint8Array(16).fill(0x41);
      // 2^53 − 8 is a safe integer; 16 bytes from it end at 2^53 + 8.
      const w = await ask(FileOp.Write, { op: FileOp.Write, fileId: f.aux, offset: 2 ** 53 - 8, length: 16, dataOff: 0 }, data);
      expect(w.status).toBe(FileStatus.InvalidParameter);
      r.message({ opcode: FileOp.WriteV, flags: FileFlag.Interrupt | FileFlag.Collapse, requestId: 100, slot: 50, creditsGranted: 1 },
        { op: FileOp.WriteV, fileId: f.aux, entries: [{ offset: 0, length: 8 }, { offset: 2 ** 53 - 4, length: 8 }], dataOff: 0, dataLen: 16 }, data);
      expect(await r.until((g) => g.some((x) => x.hdr.opcode === FileOp.Completion && x.hdr.requestId === 100))).toBe(true);
      const wv = r.got.find((x) => x.hdr.opcode === FileOp.Completion && x.hdr.requestId === 100)!.body as unknown as { status: number };
      expect(wv.status).toBe(FileStatus.InvalidParameter);
      expect(fs.statSync(join(s.dir, 'huge.bin')).size).toBe(0);
      // Ending exactly at 2^53 − 1: the size is still a safe integer.
      const ok = await ask(FileOp.Write, { op: FileOp.Write, fileId: f.aux, offset: 2 ** 53 - 1 - 16, length: 16, dataOff: 0 }, data);
      expect(ok).toMatchObject({ status: FileStatus.Success, value: 16 });
      expect((await ask(FileOp.Close, { op: FileOp.Close, fileId: f.aux, discard: 0 })).status).toBe(FileStatus.Success);
      expect(fs.statSync(join(s.dir, 'huge.bin')).size).toBe(Number.MAX_SAFE_INTEGER);
    } finally {
      await r.close();
    }
  });

  it('a file a local user grew past 2^53 - 1 is refused at open (LimitExceeded) and the session goes on', async () => {
    const p = join(s.dir, 'local-huge.bin');
    const fd = fs.openSync(p, 'w');
    try {
      fs.writeSync(fd, Buffer.alloc(16, 0x42), 0, 16, 2 ** 53 - 8);
    } finally {
      fs.closeSync(fd);
    }
    expect(Number.isSafeInteger(fs.statSync(p).size)).toBe(false);
    const c = await FileClient.connect(`127.0.0.1:${s.srv.address.port}`, { token: TOKEN, transport: 'tcp', requestTimeoutMs: 10_000 });
    try {
      const t0 = Date.now();
      await expect(c.open('local-huge.bin')).rejects.toMatchObject({ code: 'ERR_FILE_LIMIT_EXCEEDED', status: FileStatus.LimitExceeded });
      // Answered, not timed out (generous: only a deadline would take 10 s).
      expect(Date.now() - t0).toBeLessThan(9000);
      // The listing clamps its size and still lists it.
      expect((await c.list('')).map((e) => e.name)).toContain('local-huge.bin');
      // With Truncate the file is made small first, and may be opened.
      const t = await c.open('local-huge.bin', { flags: 'w' });
      expect(t.size).toBe(0);
      await c.close(t);
    } finally {
      await c.end();
    }
  });
});

describe('a Completion the client cannot decode (a value past 2^53)', () => {
  for (const interrupt of [true, false]) {
    it(`fails that request with ERR_FILE_PROTOCOL, the connection goes on (${interrupt ? 'interrupt' : 'polling'})`, () => {
      const h = new Harness({ seed: 5, holdFs: true, files: { 'a.bin': new Uint8Array(10) } });
      h.authenticate();
      expect(h.ready).toBe(true);
      const id = h.client.request({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'a.bin' }, { interrupt });
      h.pump();
      expect(h.fsQueue.length).toBe(1);
      // What a server serving a file larger than 2^53 − 1 used to answer: the size as the value.
      const q = h.fsQueue[0]!;
      const real = q.result;
      q.result = () => ({ ...real(), value: 2 ** 53 + 8 });
      h.releaseFs(0);
      h.pump();
      expect(h.done.has(id)).toBe(false);
      expect(h.rejected.get(id)).toMatchObject({ code: 'ERR_FILE_PROTOCOL', message: expect.stringMatching(/does not decode/) });
      expect(h.failed).toBeUndefined();
      expect(h.client.counters.malformed).toBe(1);
      // Its slot is free again and later requests are answered.
      const next = h.client.request({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'a.bin' }, { interrupt });
      h.pump();
      for (let i = 0; i < 10 && h.fsQueue.length > 0; i++) {
        h.releaseFs(0);
        h.pump();
      }
      expect(h.done.get(next)).toMatchObject({ status: FileStatus.Success, value: 10 });
      expect(h.violations).toEqual([]);
    });
  }
});
