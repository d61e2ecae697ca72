// A hostile file server, as the client sees it: the real server with its file system made to lie
// (JailFile.read / write and Jail.list patched in this process), so that its completions claim
// more bytes than the client asked for, or list cookies that never end. The client must check
// every count the server sends against what it asked before using it: a clear ERR_FILE_PROTOCOL,
// never bytes beyond what was asked, a count larger than the request, or a list that never ends.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, type FileServer, serveFiles } from '../../src/index.js';
import { Jail, JailFile } from '../../src/files/jail.js';
import { tempDir } from '../files/helpers.js';

const TOKEN = 'attack-lying-token-0123456789';
const origRead = JailFile.prototype.read;
const origWrite = JailFile.prototype.write;
const origList = Jail.prototype.list;

describe('a server whose completions overstate what it did', () => {
  let dir: string;
  let srv: FileServer;
  let c: FileClient;
  beforeAll(async () => {
    dir = tempDir('attack-lying');
    fs.writeFileSync(join(dir, 'small.txt'), 'x'.repeat(100));
    for (let i = 0; i < 4; i++) fs.writeFileSync(join(dir, `e${i}`), '');
    srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'] });
    c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
  }, 30_000);
  afterEach(() => {
    JailFile.prototype.read = origRead;
    JailFile.prototype.write = origWrite;
    Jail.prototype.list = origList;
  });
  afterAll(async () => {
    await c?.end();
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a Read answered with 64 bytes more than asked: ERR_FILE_PROTOCOL, not a RangeError or extra bytes', async () => {
    const f = await c.open('small.txt');
    JailFile.prototype.read = async function (into: Uint8Array, length: number, position: number): Promise<number> {
      const n = await origRead.call(this, into, length, position);
      into.fill(0xee, n, n + 64);
      return n + 64;
    };
    await expect(c.read(f, 0, 100)).rejects.toMatchObject({ code: 'ERR_FILE_PROTOCOL' });
    const t = new Uint8Array(100);
    await expect(c.readInto(f, 0, t)).rejects.toMatchObject({ code: 'ERR_FILE_PROTOCOL' });
    JailFile.prototype.read = origRead;
    expect(new TextDecoder().decode(await c.read(f, 0, 100))).toBe('x'.repeat(100));
    await c.close(f);
  });

  it('a Write answered with more bytes written than were sent: ERR_FILE_PROTOCOL', async () => {
    const f = await c.open('w.bin', { flags: 'w' });
    JailFile.prototype.write = async function (from: Uint8Array, position: number): Promise<number> {
      return (await origWrite.call(this, from, position)) + 64;
    };
    await expect(c.write(f, 0, new Uint8Array(100))).rejects.toMatchObject({ code: 'ERR_FILE_PROTOCOL' });
    await expect(c.writev(f, [{ position: 0, data: new Uint8Array(10) }, { position: 10, data: new Uint8Array(10) }])).rejects.toMatchObject({ code: 'ERR_FILE_PROTOCOL' });
    JailFile.prototype.write = origWrite;
    expect(await c.write(f, 0, new Uint8Array(100))).toBe(100);
    await c.close(f);
  });

  it('List cookies that never end (the same cookie again, or pages without entries): ERR_FILE_PROTOCOL, not a loop', async () => {
    let calls = 0;
    // Bounded: past 300 pages the lie stops, so the old client ends too (with 300 pages).
    Jail.prototype.list = async function (parts: readonly string[], cookie: number, out: Uint8Array) {
      calls++;
      const r = await origList.call(this, parts, 0, out);
      return { ...r, next: calls >= 300 ? 0 : 1 };
    };
    await expect(c.list()).rejects.toMatchObject({ code: 'ERR_FILE_PROTOCOL' });
    expect(calls).toBeLessThan(300);
    calls = 0;
    Jail.prototype.list = async function (_parts: readonly string[], cookie: number, _out: Uint8Array) {
      calls++;
      return { status: 0, bytes: 0, next: calls >= 300 ? 0 : cookie + 1 };
    };
    await expect(c.list()).rejects.toMatchObject({ code: 'ERR_FILE_PROTOCOL' });
    expect(calls).toBeLessThan(300);
    Jail.prototype.list = origList;
    expect((await c.list()).map((e) => e.name).sort()).toEqual(['e0', 'e1', 'e2', 'e3', 'small.txt', 'w.bin']);
  });
});

describe('a read stream over a server whose read comes back short before the end', () => {
  let dir: string;
  let srv: FileServer;
  let c: FileClient;
  const body = new Uint8Array(4000).map((_, i) => i % 251);
  beforeAll(async () => {
    dir = tempDir('attack-lying-stream');
    fs.writeFileSync(join(dir, 'f.bin'), body);
    srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'] });
    c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
  }, 30_000);
  afterAll(async () => {
    JailFile.prototype.read = origRead;
    await c?.end();
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('what the stream gives is a prefix of the file: no gap where the short read was', async () => {
    // The first 1000-byte read gets 500 (the end of the file, for all the client can tell);
    // the reads after it get their full 1000.
    JailFile.prototype.read = async function (into: Uint8Array, length: number, position: number): Promise<number> {
      const n = await origRead.call(this, into, length, position);
      return position === 0 ? Math.min(n, 500) : n;
    };
    const { createRemoteReadStream } = await import('../../src/files/streams.js');
    const parts: Buffer[] = [];
    for await (const b of createRemoteReadStream(c, 'f.bin', { chunkSize: 1000 })) parts.push(b as Buffer);
    const got = new Uint8Array(Buffer.concat(parts));
    expect(Buffer.from(got).equals(Buffer.from(body.subarray(0, got.length)))).toBe(true);
  });
});
