// A dedup transfer's answers ({ ok, status, why } as a msgpack value) are the server's word. A
// hostile server answering with a status that is not a number or a reason that is not a string
// (msgpack's map {"toString": 1}: String() of it throws) made the client fail with a TypeError
// or an error code made up from the value ("ERR_FILE_STATUS_ABC"), not the stable
// ERR_FILE_MALFORMED of a malformed dedup answer. The server here is the real one, its replies
// rewritten on their way out (Channel.send patched in this process: it sends the replies).
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, type FileServer, serveFiles } from '../../src/index.js';
import { Channel } from '../../src/channel/channel.js';
import { tempDir } from '../files/helpers.js';

const TOKEN = 'attack-lying-dedup-0123456789';
const origSend = Channel.prototype.send;

describe('a server whose dedup answers are not what the protocol says', () => {
  let dir: string;
  let local: string;
  let srv: FileServer;
  let c: FileClient;
  beforeAll(async () => {
    dir = tempDir('attack-lying-dedup');
    local = tempDir('attack-lying-dedup-local');
    fs.writeFileSync(join(dir, 'present.bin'), 'x'.repeat(1000));
    srv = await serveFiles(dir, { token: TOKEN, transports: ['tcp'] });
    c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
  }, 30_000);
  afterEach(() => {
    Channel.prototype.send = origSend;
  });
  afterAll(async () => {
    await c?.end();
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  });

  for (const [what, ok, lie] of [
    ['a reason whose String() throws', false, { why: { toString: 1 } }],
    ['a status that is a string', false, { status: 'abc' }],
    ['a status that is a map', false, { status: { toString: 1 } }],
    ['a status no table has', false, { status: 9999 }],
    ['a refusal with status Success', false, { status: 0 }],
    ['a size that is a map', true, { size: { toString: 1 } }],
    ['a size that is negative', true, { size: -5 }],
  ] as const) {
    it(`${what}: ERR_FILE_MALFORMED`, async () => {
      Channel.prototype.send = function (this: Channel, msg: unknown, opts?: Parameters<Channel['send']>[1]) {
        const m = msg as { ok?: unknown };
        return origSend.call(this, m && typeof m === 'object' && m.ok === ok ? { ...m, ...lie } : msg, opts);
      };
      // A missing file is refused with { ok: false, status, why }; a present one announced with { ok: true, size }.
      const e = await c.get(ok ? 'present.bin' : 'missing.bin', join(local, 'x'), { dedup: true }).catch((err: unknown) => err);
      expect(e).toMatchObject({ code: 'ERR_FILE_MALFORMED' });
      expect(String((e as Error).message)).toMatch(/malformed dedup answer/);
    }, 30_000);
  }
});
