// A hostile file server, as the client sees it: its AuthenticateResponse announces limits the
// client cannot live with. The client cut reads and writes at maxReadWriteSize / maxWriteSize
// unchecked: with 0, readInto and write stepped through the request by 0 bytes (a synchronous
// loop: the process froze, its memory growing) and get/put threw raw TypeErrors; a huge size
// would make it register sinks of gigabytes. Now every limit is checked on arrival and the
// connect fails with ERR_FILE_PROTOCOL naming the field (and fitToSegments never answers < 1).
// All of it failed before the fix: the connects succeeded.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, FileServer, serveFiles } from '../../src/index.js';
import { Jail } from '../../src/files/jail.js';
import { fitToSegments } from '../../src/files/client.js';
import { ClientConnection, LIMIT_RANGES } from '../../src/files/client-core.js';
import { connectionServerProof } from '../../src/files/auth.js';
import { writeFields } from '../../src/files/layout.js';
import { HDR_LEN, bodyLength, encodeMessage } from '../../src/files/messages.js';
import { HDR_AREA } from '../../src/files/client-session.js';
import { pollAll } from '../../src/core/sans-io.js';
import { FILE_AUTH_RESP, FileOp, FileStatus } from '../../src/wire/files-spec.js';
import { tempDir } from '../files/helpers.js';

const TOKEN = 'attack-client-limits-token-0123456789';

// The real server, announcing what its limits say: made without serveFiles, which refuses such
// limits (src/files/serve-checks.ts), so it plays a hostile or broken server.
describe('a server announcing a limit of 0: the connect fails with ERR_FILE_PROTOCOL naming it', () => {
  let dir: string;
  beforeAll(() => {
    dir = tempDir('attack-client-limits');
    fs.writeFileSync(join(dir, 'a.bin'), new Uint8Array(10_000).fill(7));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const field of ['maxReadWriteSize', 'maxWriteSize', 'maxVectors'] as const) {
    it(`${field} 0`, async () => {
      let srv: FileServer | undefined;
      try {
        await expect(serveFiles(dir, { token: TOKEN, transports: ['tcp'], limits: { [field]: 0 } })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
        srv = new FileServer(await Jail.open(dir), { transports: ['tcp'], limits: { [field]: 0 } }, TOKEN);
        await srv.start();
        const r = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 5000 }).then(
          async (c) => {
            // The old client connected; end it before the loop a get/readInto would start.
            await c.end();
            return new Error('connected');
          },
          (e: Error) => e,
        );
        expect(r).toMatchObject({ code: 'ERR_FILE_PROTOCOL', message: expect.stringContaining(`${field} 0`) });
      } finally {
        await srv?.close();
      }
    }, 20_000);
  }
});

// Limits a server could announce but no test should make a real server allocate (4 GiB of
// staging): the client core fed a forged AuthenticateResponse that proves the key.
describe('the client core checks every announced limit', () => {
  const good = { maxReceiveSize: 4096, maxReadWriteSize: 65536, maxWriteSize: 16384, maxVectors: 4, maxOpenFiles: 4, rwDepth: 2, creditsMax: 4 };
  function auth(limits: typeof good): { state: string; failed: unknown } {
    const kAuth = new Uint8Array(32).fill(1);
    const nonce = new Uint8Array(16).fill(2);
    const c = new ClientConnection({ credits: 4, statusSlots: 4, receiveSize: 128 });
    c.start({ resumeKey: new Uint8Array(24), keyId: new Uint8Array(16), kAuth, nonce, statusAddr: 0x1000, statusRkey: 7 });
    pollAll(c);
    const resp = { status: FileStatus.Success, ...limits };
    const tmp = new Uint8Array(FILE_AUTH_RESP.size);
    writeFields(FILE_AUTH_RESP, tmp, 0, resp);
    const params = tmp.slice(0, FILE_AUTH_RESP.fields.mac.offset);
    const body = { op: FileOp.AuthenticateResponse, ...resp, mac: connectionServerProof(kAuth, nonce, params), params } as const;
    const b = new Uint8Array(HDR_LEN + bodyLength(body));
    encodeMessage(b, { opcode: FileOp.AuthenticateResponse, flags: 0, creditsRequested: 4, creditsGranted: 2, slot: 0, requestId: 0, info: 0 }, body);
    c.handleReceive(b, 0);
    return { state: c.state, failed: pollAll(c).find((a) => a.kind === 'failed') };
  }

  it('sane limits are taken', () => {
    expect(auth(good)).toEqual({ state: 'authenticated', failed: undefined });
  });
  const cases: [keyof typeof good, number][] = [
    ['maxReadWriteSize', 0], ['maxReadWriteSize', 0xffff_ffff], ['maxReadWriteSize', (16 << 20) + 1],
    ['maxWriteSize', 0], ['maxWriteSize', 1 << 30], ['maxVectors', 0], ['maxVectors', 1000],
    ['maxReceiveSize', 0], ['maxOpenFiles', 0], ['rwDepth', 0], ['creditsMax', 0],
  ];
  for (const [field, v] of cases) {
    it(`${field} ${v}: refused, ERR_FILE_PROTOCOL naming the field`, () => {
      const r = auth({ ...good, [field]: v });
      expect(r.state).toBe('closed');
      expect(r.failed).toMatchObject({ code: 'ERR_FILE_PROTOCOL', message: expect.stringContaining(`${field} ${v} (must be`) });
    });
  }

  it('the largest readv the cap allows fits one request header area', () => {
    const n = LIMIT_RANGES.maxVectors[1];
    const entries = Array.from({ length: n }, () => ({ offset: 0, length: 1, sinkAddr: 0 }));
    expect(HDR_LEN + bodyLength({ op: FileOp.ReadV, fileId: 1, sinkAddr: 0, sinkRkey: 0, entries })).toBeLessThanOrEqual(HDR_AREA);
    expect(HDR_LEN + bodyLength({ op: FileOp.WriteV, fileId: 1, entries: entries.map((e) => ({ offset: e.offset, length: e.length })), dataOff: 0, dataLen: n })).toBeLessThanOrEqual(HDR_AREA);
  });
});

describe('fitToSegments never answers less than 1 (the second guard)', () => {
  it.each([[0, 0, 1400], [0, 48, 1400], [1, 48, 1400], [100, 0, 0x7fff_ffff]])('max %i, hdr %i, mss %i', (max, hdr, mss) => {
    expect(fitToSegments(max, hdr, mss)).toBeGreaterThanOrEqual(1);
  });
});
