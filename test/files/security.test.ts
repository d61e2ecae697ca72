// Issue 14, point 4, item by item, against a real server over real sockets: nothing outside the
// served directory can be read, written, listed or created; requests before authentication, a
// wrong, unknown, expired or replayed key, a credit overrun, oversized and over-vectored
// requests, too many open files and writes to a read-only server are refused with a status and
// counted, and the connection is terminated where the protocol says so. And the token never
// crosses the wire in clear.
import fs from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, type FileServer, serveFiles } from '../../src/index.js';
import { FileAccess, FileFlag, FileOp, FileStatus } from '../../src/wire/files-spec.js';
import { PipeReader, encodePipeFrame } from '../../src/files/pipe.js';
import { pipeServerProof } from '../../src/files/auth.js';
import { FILE_PIPE_WELCOME, FilePipeType } from '../../src/wire/files-spec.js';
import { writeFields } from '../../src/files/layout.js';
import { randomBytes } from 'node:crypto';
import { Raw, negotiate } from './raw.js';
import { tempDir, until } from './helpers.js';

const TOKEN = 'security-token-0123456789';

async function refusal(p: Promise<unknown>): Promise<{ code: string; status: number | undefined; message: string }> {
  try {
    await p;
  } catch (e) {
    const x = e as { code: string; status?: number; message: string };
    return { code: x.code, status: x.status, message: x.message };
  }
  throw new Error('expected a refusal');
}

describe('nothing outside DIR can be read, written, listed or created', () => {
  let root: string;
  let dir: string;
  let outside: string;
  let srv: FileServer;
  let c: FileClient;

  beforeAll(async () => {
    root = tempDir('sec');
    dir = join(root, 'served');
    outside = join(root, 'outside');
    fs.mkdirSync(dir);
    fs.mkdirSync(outside);
    fs.writeFileSync(join(outside, 'secret.txt'), 'secret');
    fs.writeFileSync(join(dir, 'inside.txt'), 'inside');
    fs.mkdirSync(join(dir, 'sub'));
    fs.symlinkSync(join(outside, 'secret.txt'), join(dir, 'link-out'));
    fs.symlinkSync(outside, join(dir, 'dir-out'));
    fs.symlinkSync('inside.txt', join(dir, 'link-in'));
    fs.symlinkSync(join(outside, 'missing'), join(dir, 'dangling'));
    fs.linkSync(join(outside, 'secret.txt'), join(dir, 'hard'));
    srv = await serveFiles(dir, { token: TOKEN, transports: ['udp'] });
    c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN });
  }, 30_000);

  afterAll(async () => {
    await c?.end();
    await srv?.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('".." anywhere in a path', async () => {
    for (const p of ['..', '../outside/secret.txt', 'sub/../../outside/secret.txt', 'sub/..']) {
      expect((await refusal(c.open(p))).status, p).toBe(FileStatus.PathOutside);
    }
    expect((await refusal(c.list('..'))).status).toBe(FileStatus.PathOutside);
    expect((await refusal(c.open('../outside/new.txt', { flags: 'replace' }))).status).toBe(FileStatus.PathOutside);
  });

  it('absolute paths', async () => {
    expect((await refusal(c.open(join(outside, 'secret.txt')))).status).toBe(FileStatus.PathOutside);
    expect((await refusal(c.open('/etc/passwd'))).status).toBe(FileStatus.PathOutside);
    expect((await refusal(c.list('/'))).status).toBe(FileStatus.PathOutside);
  });

  it('names with NUL', async () => {
    expect((await refusal(c.open('inside.txt\0.png'))).status).toBe(FileStatus.PathOutside);
    expect((await refusal(c.open('a\0b', { flags: 'w' }))).status).toBe(FileStatus.PathOutside);
  });

  it('symbolic links pointing out: to a file, to a directory, dangling; a link inside is followed', async () => {
    expect((await refusal(c.open('link-out'))).status).toBe(FileStatus.PathOutside);
    expect((await refusal(c.open('dir-out/secret.txt'))).status).toBe(FileStatus.PathOutside);
    expect((await refusal(c.list('dir-out'))).status).toBe(FileStatus.PathOutside);
    expect((await refusal(c.open('dir-out/created.txt', { flags: 'replace' }))).status).toBe(FileStatus.PathOutside);
    expect((await refusal(c.open('dir-out/created2.txt', { flags: 'w' }))).status).toBe(FileStatus.PathOutside);
    // Writing "through" a dangling link would create the file outside.
    expect((await refusal(c.open('dangling', { flags: 'w' }))).status).toBe(FileStatus.PathOutside);
    expect(fs.existsSync(join(outside, 'missing'))).toBe(false);
    expect(fs.readdirSync(outside)).toEqual(['secret.txt']);
    const f = await c.open('link-in');
    expect(new TextDecoder().decode(await c.read(f, 0, 100))).toBe('inside');
    await c.close(f);
  });

  it('hard-link tricks: a file with a second link is refused; a put over it replaces the name, not the file outside', async () => {
    expect((await refusal(c.open('hard'))).status).toBe(FileStatus.LinkedFile);
    expect((await refusal(c.open('hard', { flags: 'r+' }))).status).toBe(FileStatus.LinkedFile);
    expect((await refusal(c.open('hard', { flags: 'w' }))).status).toBe(FileStatus.LinkedFile);
    expect(fs.readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret'); // 'w' did not truncate it
    const f = await c.open('hard', { flags: 'replace' });
    await c.write(f, 0, new TextEncoder().encode('replaced'));
    await c.close(f);
    expect(fs.readFileSync(join(dir, 'hard'), 'utf8')).toBe('replaced');
    expect(fs.readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret');
  });

  it('a put over a symbolic link replaces the link itself, never its target', async () => {
    const f = await c.open('link-out', { flags: 'replace' });
    await c.write(f, 0, new TextEncoder().encode('new'));
    await c.close(f);
    expect(fs.lstatSync(join(dir, 'link-out')).isSymbolicLink()).toBe(false);
    expect(fs.readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret');
  });

  it('every refusal was counted', () => {
    const s = srv.stats();
    expect(s.refusedPath).toBeGreaterThanOrEqual(16);
    expect(s.refusedLinked).toBe(3);
  });
});

describe('refusals on the RDMA connection (raw client)', () => {
  let dir: string;
  let srv: FileServer;

  beforeAll(async () => {
    dir = tempDir('sec-raw');
    fs.writeFileSync(join(dir, 'f.bin'), Buffer.alloc(4096, 7));
    srv = await serveFiles(dir, {
      // Keys live long here: on a loaded machine a 300 ms key expired between a raw client's
      // negotiation and its first request, failing cases that are not about expiry.
      token: TOKEN, transports: ['tcp'], sessions: { keyTtlMs: 30_000 },
      limits: { maxOpenFiles: 3, maxVectors: 4, maxReadWriteSize: 65536, maxWriteSize: 16384, credits: 8 },
    });
  }, 30_000);

  afterAll(async () => {
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a request before authentication: StatusResponse(NotAuthenticated, Terminate), counted, connection closed', async () => {
    const r = await Raw.open(srv.address.port, TOKEN);
    const before = srv.stats().beforeAuth;
    r.message({ opcode: FileOp.Read, creditsGranted: 4, requestId: 1 }, { op: FileOp.Read, fileId: 1, length: 10, offset: 0, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey });
    expect(await r.until(() => r.terminal() !== undefined)).toBe(true);
    expect((r.terminal()!.body as { status: number }).status).toBe(FileStatus.NotAuthenticated);
    expect(srv.stats().beforeAuth).toBe(before + 1);
    await until(() => srv.stats().liveConnections === 0, 5000, 'the connection to be torn down');
    await r.close();
  });

  it('a wrong key (a MAC from another key): AccessDenied, terminated, counted', async () => {
    const r = await Raw.open(srv.address.port, TOKEN);
    const before = srv.stats().authBadMac;
    r.authenticate({ kAuth: new Uint8Array(32).fill(9) });
    expect(await r.until(() => r.terminal() !== undefined)).toBe(true);
    expect((r.terminal()!.body as { status: number }).status).toBe(FileStatus.AccessDenied);
    expect(srv.stats().authBadMac).toBe(before + 1);
    await r.close();
  });

  it('a replayed key: the first connection binds, the same key on a second connection is refused', async () => {
    const r = await Raw.open(srv.address.port, TOKEN);
    r.authenticate();
    expect(await r.until((g) => g.some((x) => x.hdr.opcode === FileOp.StatusResponse))).toBe(true);
    expect(r.got.map((g) => g.hdr.opcode).slice(0, 2)).toEqual([FileOp.AuthenticateResponse, FileOp.StatusResponse]);
    expect(r.terminal()).toBeUndefined();
    const before = srv.stats().authUnknownKey;
    const again = await Raw.onto(r.neg, r.pipe, srv.address.port);
    again.authenticate();
    expect(await again.until(() => again.terminal() !== undefined)).toBe(true);
    expect((again.terminal()!.body as { status: number }).status).toBe(FileStatus.AccessDenied);
    expect(srv.stats().authUnknownKey).toBe(before + 1);
    await again.close();
    await r.close();
  });

  it('an unknown resume key and an expired key are refused', async () => {
    const r = await Raw.open(srv.address.port, TOKEN);
    const unknown = srv.stats().authUnknownSession;
    r.authenticate({ resumeKey: new Uint8Array(24).fill(1) });
    expect(await r.until(() => r.terminal() !== undefined)).toBe(true);
    expect(srv.stats().authUnknownSession).toBe(unknown + 1);
    await r.close();
    // The expired key on a server of its own whose keys live 300 ms.
    const short = await serveFiles(dir, { token: TOKEN, transports: ['tcp'], sessions: { keyTtlMs: 300 } });
    try {
      const { neg, pipe } = await negotiate(short.address.port, TOKEN);
      const t0 = Date.now();
      await until(() => Date.now() - t0 > 400, 2000, 'the key to expire (ttl 300 ms)');
      const late = await Raw.onto(neg, pipe, short.address.port);
      const expired = short.stats().authExpiredKey;
      late.authenticate();
      expect(await late.until(() => late.terminal() !== undefined)).toBe(true);
      expect(short.stats().authExpiredKey).toBe(expired + 1);
      await late.close();
    } finally {
      await short.close();
    }
  });

  it('a credit overrun terminates the connection (counted)', async () => {
    const r = await Raw.open(srv.address.port, TOKEN);
    // Two credits for the server (its AuthenticateResponse and StatusResponse) and no more: it
    // cannot re-grant on its own, so what it granted is all this client may send.
    r.authenticate({ grant: 2 });
    expect(await r.until((g) => g.some((x) => x.hdr.opcode === FileOp.StatusResponse))).toBe(true);
    const granted = r.got.reduce((a, g) => a + g.hdr.creditsGranted, 0);
    const before = srv.stats().creditOverruns;
    const live = srv.stats().liveConnections;
    // Credit-only messages, each granting nothing back, past every credit we were given.
    for (let i = 0; i < granted + 3; i++) r.message({ opcode: FileOp.Credit }, { op: FileOp.Credit });
    await until(() => srv.stats().creditOverruns === before + 1, 10_000, 'the overrun to be counted');
    await until(() => srv.stats().liveConnections === live - 1, 10_000, 'the connection to be torn down');
    await r.close();
  });

  it('oversized and over-vectored requests are refused with LimitExceeded; the connection goes on', async () => {
    const r = await Raw.open(srv.address.port, TOKEN);
    r.authenticate();
    expect(await r.until((g) => g.some((x) => x.hdr.opcode === FileOp.StatusResponse))).toBe(true);
    const done = (id: number): (() => boolean) => () => r.got.some((g) => g.hdr.opcode === FileOp.Completion && g.hdr.requestId === id);
    const result = (id: number): { status: number; aux: number; value: number } => r.got.find((g) => g.hdr.opcode === FileOp.Completion && g.hdr.requestId === id)!.body as never;
    const I = FileFlag.Interrupt;
    r.message({ opcode: FileOp.RegisterFile, flags: I, requestId: 1, slot: 1, creditsGranted: 8 }, { op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f.bin' });
    expect(await r.until(done(1))).toBe(true);
    const fid = result(1).aux;
    const before = srv.stats().refusedLimit;
    r.message({ opcode: FileOp.Read, flags: I, requestId: 2, slot: 2, creditsGranted: 1 }, { op: FileOp.Read, fileId: fid, length: 65537, offset: 0, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey });
    const five = Array.from({ length: 5 }, (_, i) => ({ offset: i, length: 1, sinkAddr: 0 }));
    r.message({ opcode: FileOp.ReadV, flags: I | FileFlag.Collapse, requestId: 3, slot: 3, creditsGranted: 1 }, { op: FileOp.ReadV, fileId: fid, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey, entries: five });
    r.message({ opcode: FileOp.Read, flags: I, requestId: 4, slot: 4, creditsGranted: 1 }, { op: FileOp.Read, fileId: fid, length: 100, offset: 0, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey });
    expect(await r.until(() => done(2)() && done(3)() && done(4)())).toBe(true);
    expect(result(2).status).toBe(FileStatus.LimitExceeded);
    expect(result(3).status).toBe(FileStatus.LimitExceeded);
    expect(result(4)).toMatchObject({ status: FileStatus.Success, value: 100 });
    expect(r.sink.buffer[99]).toBe(7);
    expect(srv.stats().refusedLimit).toBe(before + 2);
    await r.close();
  });

  it('a Write past maxWriteSize, a WriteV past maxVectors, a ReadV whose total passes maxReadWriteSize: LimitExceeded, counted, the connection goes on', async () => {
    const r = await Raw.open(srv.address.port, TOKEN);
    r.authenticate();
    expect(await r.until((g) => g.some((x) => x.hdr.opcode === FileOp.StatusResponse))).toBe(true);
    const done = (id: number): (() => boolean) => () => r.got.some((g) => g.hdr.opcode === FileOp.Completion && g.hdr.requestId === id);
    const result = (id: number): { status: number; aux: number; value: number } => r.got.find((g) => g.hdr.opcode === FileOp.Completion && g.hdr.requestId === id)!.body as never;
    const I = FileFlag.Interrupt;
    r.message({ opcode: FileOp.RegisterFile, flags: I, requestId: 1, slot: 1, creditsGranted: 8 }, { op: FileOp.RegisterFile, access: FileAccess.Read | FileAccess.Write, mode: 0, path: 'limits.bin' });
    expect(await r.until(done(1))).toBe(true);
    // limits.bin does not exist yet: open it for writing with Create.
    if (result(1).status !== FileStatus.Success) {
      r.message({ opcode: FileOp.RegisterFile, flags: I, requestId: 9, slot: 9, creditsGranted: 1 }, { op: FileOp.RegisterFile, access: FileAccess.Read | FileAccess.Write | FileAccess.Create, mode: 0o644, path: 'limits.bin' });
      expect(await r.until(done(9))).toBe(true);
    }
    const fid = (result(1).status === FileStatus.Success ? result(1) : result(9)).aux;
    const before = srv.stats().refusedLimit;
    // 16 385 bytes of data (maxWriteSize 16 384), really carried: the message fits the server's
    // receive buffer (its maxVectors entries of room besides), so it is the limit that refuses it.
    const big = new Uint8Array(16_385).fill(5);
    r.message({ opcode: FileOp.Write, flags: I, requestId: 2, slot: 2, creditsGranted: 1 }, { op: FileOp.Write, fileId: fid, offset: 0, length: big.length, dataOff: 0 }, big);
    const five = Array.from({ length: 5 }, (_, i) => ({ offset: i * 10, length: 1 }));
    r.message({ opcode: FileOp.WriteV, flags: I | FileFlag.Collapse, requestId: 3, slot: 3, creditsGranted: 1 },
      { op: FileOp.WriteV, fileId: fid, entries: five, dataOff: 0, dataLen: 5 }, new Uint8Array(5).fill(6));
    // Two entries, each within the limit, 80 000 bytes together (maxReadWriteSize 65 536).
    const two = [{ offset: 0, length: 40_000, sinkAddr: 0 }, { offset: 40_000, length: 40_000, sinkAddr: 0 }];
    r.message({ opcode: FileOp.ReadV, flags: I | FileFlag.Collapse, requestId: 4, slot: 4, creditsGranted: 1 }, { op: FileOp.ReadV, fileId: fid, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey, entries: two });
    // Within every limit: goes through on the same connection.
    r.message({ opcode: FileOp.Write, flags: I, requestId: 5, slot: 5, creditsGranted: 1 }, { op: FileOp.Write, fileId: fid, offset: 0, length: 3, dataOff: 0 }, new Uint8Array([1, 2, 3]));
    expect(await r.until(() => [2, 3, 4, 5].every((id) => done(id)())), JSON.stringify({ failed: r.failed, got: r.got.map((g) => [g.hdr.opcode, g.hdr.requestId, g.body]) })).toBe(true);
    expect(result(2).status).toBe(FileStatus.LimitExceeded);
    expect(result(3).status).toBe(FileStatus.LimitExceeded);
    expect(result(4).status).toBe(FileStatus.LimitExceeded);
    expect(result(5)).toMatchObject({ status: FileStatus.Success, value: 3 });
    expect(srv.stats().refusedLimit).toBe(before + 3);
    // Nothing of the refused writes reached the file.
    expect([...fs.readFileSync(join(dir, 'limits.bin'))]).toEqual([1, 2, 3]);
    expect(r.terminal()).toBeUndefined();
    await r.close();
  });

  it('a Send longer than the server\'s receive buffer: the connection is terminated and torn down, nothing of it written', async () => {
    const r = await Raw.open(srv.address.port, TOKEN);
    r.authenticate();
    expect(await r.until((g) => g.some((x) => x.hdr.opcode === FileOp.StatusResponse))).toBe(true);
    const done = (id: number): (() => boolean) => () => r.got.some((g) => g.hdr.opcode === FileOp.Completion && g.hdr.requestId === id);
    const I = FileFlag.Interrupt;
    r.message({ opcode: FileOp.RegisterFile, flags: I, requestId: 1, slot: 1, creditsGranted: 8 }, { op: FileOp.RegisterFile, access: FileAccess.Write | FileAccess.Create, mode: 0o644, path: 'overlong.bin' });
    expect(await r.until(done(1))).toBe(true);
    const fid = (r.got.find((g) => g.hdr.opcode === FileOp.Completion && g.hdr.requestId === 1)!.body as { aux: number }).aux;
    const live = srv.stats().liveConnections;
    const before = srv.stats().receiveErrors;
    // maxWriteSize 16 384 and 4 vectors: the receive buffers are 16 488 bytes (rounded to 16 512).
    const huge = new Uint8Array(40_000).fill(8);
    r.message({ opcode: FileOp.Write, flags: I, requestId: 2, slot: 2, creditsGranted: 1 }, { op: FileOp.Write, fileId: fid, offset: 0, length: huge.length, dataOff: 0 }, huge);
    await until(() => srv.stats().liveConnections === live - 1, 10_000, 'the connection to be torn down');
    expect(srv.stats().receiveErrors).toBe(before + 1);
    expect(done(2)()).toBe(false);
    expect(fs.statSync(join(dir, 'overlong.bin')).size).toBe(0);
    await r.close();
  });

  it('too many open files: TooManyOpenFiles past the negotiated maximum (counted)', async () => {
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
    expect(c.limits.maxOpenFiles).toBe(3);
    const before = srv.stats().refusedTooManyOpen;
    const open = [await c.open('f.bin'), await c.open('f.bin'), await c.open('f.bin')];
    expect((await refusal(c.open('f.bin'))).status).toBe(FileStatus.TooManyOpenFiles);
    expect(srv.stats().refusedTooManyOpen).toBe(before + 1);
    await c.close(open[0]!);
    await c.close(await c.open('f.bin'));
    await c.end();
  });
});

describe('--read-only refuses every write', () => {
  it('put, open for writing, create: ReadOnly, counted; reads still work', async () => {
    const dir = tempDir('sec-ro');
    fs.writeFileSync(join(dir, 'f.txt'), 'ro');
    const srv = await serveFiles(dir, { token: TOKEN, transports: ['udp'], readOnly: true });
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN });
    try {
      for (const flags of ['r+', 'w', 'wx', 'replace'] as const) expect((await refusal(c.open('f.txt', { flags }))).status, flags).toBe(FileStatus.ReadOnly);
      fs.writeFileSync(join(dir, 'local.bin'), 'x');
      expect((await refusal(c.put(join(dir, 'local.bin'), 'new.bin'))).status).toBe(FileStatus.ReadOnly);
      expect(fs.existsSync(join(dir, 'new.bin'))).toBe(false);
      expect(srv.stats().refusedReadOnly).toBe(5);
      const f = await c.open('f.txt');
      expect(new TextDecoder().decode(await c.read(f, 0, 10))).toBe('ro');
    } finally {
      await c.end();
      await srv.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the control pipe', () => {
  let dir: string;
  let srv: FileServer;
  beforeAll(async () => {
    dir = tempDir('sec-pipe');
    srv = await serveFiles(dir, { token: TOKEN, transports: ['udp'], sessions: { maxSessions: 2 } });
  });
  afterAll(async () => {
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('mutual: a server that does not hold the token is refused by the client (its Welcome MAC is checked)', async () => {
    // An impostor: it answers Hello with a Challenge and any Proof with Welcome(Success), but can
    // only sign that Welcome with some other token.
    let closedByClient = false;
    let sentWelcome = false;
    const impostor = net.createServer((s) => {
      const reader = new PipeReader();
      let nc = new Uint8Array(0);
      const ns = new Uint8Array(randomBytes(32));
      s.on('data', (b: Buffer) => {
        for (const f of reader.push(new Uint8Array(b))) {
          if (f.type === FilePipeType.Hello) {
            nc = f.body.slice();
            s.write(encodePipeFrame(FilePipeType.Challenge, ns));
          } else if (f.type === FilePipeType.Proof) {
            const w = new Uint8Array(FILE_PIPE_WELCOME.size);
            writeFields(FILE_PIPE_WELCOME, w, 0, { status: FileStatus.Success, mac: pipeServerProof('not-the-token', nc, ns) });
            s.write(encodePipeFrame(FilePipeType.Welcome, w));
            sentWelcome = true;
          } else s.write(encodePipeFrame(FilePipeType.Welcome, new Uint8Array(FILE_PIPE_WELCOME.size)));
        }
      });
      s.on('end', () => (closedByClient = true));
      s.on('close', () => (closedByClient = true));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => impostor.listen(0, '127.0.0.1', r));
    try {
      const port = (impostor.address() as net.AddressInfo).port;
      const e = await refusal(FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, timeoutMs: 5000 }));
      expect(sentWelcome).toBe(true);
      expect(e.status).toBe(FileStatus.AccessDenied);
      expect(e.message).toMatch(/could not prove it holds the token/);
      await until(() => closedByClient, 5000, 'the client to close the pipe');
    } finally {
      await new Promise<void>((r) => impostor.close(() => r()));
    }
  });

  it('a wrong token is refused (constant-time HMAC check, counted) and no session is made', async () => {
    const before = srv.stats().pipeAuthFailed;
    const e = await refusal(FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: 'wrong' }));
    expect(e.code).toBe('ERR_FILE_ACCESS_DENIED');
    expect(e.message).toMatch(/refused the token/);
    expect(srv.stats().pipeAuthFailed).toBe(before + 1);
    expect(srv.stats().sessions).toBe(0);
  });

  it('the token never crosses the wire in clear: a tap between client and server sees only nonces and MACs', async () => {
    const seen: Buffer[] = [];
    const tap = net.createServer((down) => {
      const up = net.connect(srv.address.port, '127.0.0.1');
      down.on('data', (b) => (seen.push(b), up.write(b)));
      up.on('data', (b) => (seen.push(b), down.write(b)));
      down.on('close', () => up.destroy());
      up.on('close', () => down.destroy());
      down.on('error', () => {});
      up.on('error', () => {});
    });
    await new Promise<void>((r) => tap.listen(0, '127.0.0.1', r));
    const c = await FileClient.connect(`127.0.0.1:${(tap.address() as net.AddressInfo).port}`, { token: TOKEN });
    await c.end();
    tap.close();
    const all = Buffer.concat(seen);
    expect(all.length).toBeGreaterThan(100);
    expect(all.includes(Buffer.from(TOKEN))).toBe(false);
    expect(all.includes(Buffer.from(TOKEN.slice(0, 8)))).toBe(false);
  });

  it('a frame longer than the maximum closes the pipe unread (counted)', async () => {
    const before = srv.stats().pipeMalformed;
    const s = net.connect(srv.address.port, '127.0.0.1');
    const big = encodePipeFrame(1, new Uint8Array(32));
    new DataView(big.buffer).setUint32(0, 1 << 20);
    s.write(big);
    await new Promise((r) => s.once('close', r));
    expect(srv.stats().pipeMalformed).toBe(before + 1);
  });

  it('sessions are bounded: past the maximum, the Welcome says SessionLimit', async () => {
    const a = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN });
    const b = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN });
    const e = await refusal(FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN }));
    expect(e.status).toBe(FileStatus.SessionLimit);
    expect(srv.stats().sessionLimit).toBe(1);
    await a.end();
    await b.end();
    await until(() => srv.stats().sessions === 0, 5000, 'sessions to end');
  });
});
