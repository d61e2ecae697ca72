// What an authenticated hostile client cannot do with reads, sinks and open files (an audit's
// hypotheses that held up, kept as regression checks; raw messages over real sockets):
// - reads past EOF, at offset 2^53 - 1, of length 0, ReadV with overlapping and past-EOF entries:
//   answered, and only the bytes read reach the sink (nothing stale from the staging buffer);
// - a Read whose sink runs past the client's registered region: the client's NIC refuses the
//   server's RDMA Write (a region registered right after the sink stays untouched), the server
//   tears that connection down and keeps serving others;
// - files opened and never closed (Replace temporaries written to, at the per-connection cap): the
//   65th is refused; dropping the pipe closes them all, unlinks every temporary, gives the
//   server-wide budget back.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Access, FileClient, type FileServer, serveFiles } from '../../src/index.js';
import { FileAccess, FileFlag, FileOp, FileStatus } from '../../src/wire/files-spec.js';
import { Raw } from './raw.js';
import { tempDir, until } from './helpers.js';

const TOKEN = 'hostile-reads-token-0123456789';
const I = FileFlag.Interrupt;

async function bound(srvPort: number): Promise<{ r: Raw; ask: (h: { opcode: number; flags?: number }, body: never, data?: Uint8Array) => Promise<{ status: number; aux: number; value: number }> }> {
  const r = await Raw.open(srvPort, TOKEN);
  r.authenticate();
  if (!(await r.until((g) => g.some((x) => x.hdr.opcode === FileOp.StatusResponse)))) throw new Error('not bound');
  let id = 0;
  const ask = async (h: { opcode: number; flags?: number }, body: never, data?: Uint8Array): Promise<{ status: number; aux: number; value: number }> => {
    const rid = ++id;
    r.message({ opcode: h.opcode, flags: h.flags ?? I, requestId: rid, slot: rid % 60, creditsGranted: 1 }, body, data);
    const ok = await r.until((g) => g.some((x) => x.hdr.opcode === FileOp.Completion && x.hdr.requestId === rid), 10_000);
    if (!ok) throw new Error(`no completion for request ${rid} (${r.failed ?? 'no failure'})`);
    return r.got.find((x) => x.hdr.opcode === FileOp.Completion && x.hdr.requestId === rid)!.body as never;
  };
  return { r, ask };
}

describe('file service: what a hostile client cannot do', () => {
  let dir: string;
  let srv: FileServer;
  beforeAll(async () => {
    dir = tempDir('hostile-reads');
    fs.writeFileSync(join(dir, 'long.bin'), new Uint8Array(60_000).fill(0x11));
    fs.writeFileSync(join(dir, 'short.bin'), 'abc');
    srv = await serveFiles(dir, { port: 0, token: TOKEN, transports: ['tcp'] });
  });
  afterAll(async () => {
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads past EOF and at 2^53 - 1 place only the bytes read; nothing stale from staging', async () => {
    const { r, ask } = await bound(srv.address.port);
    try {
      const long = await ask({ opcode: FileOp.RegisterFile }, { op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'long.bin' } as never);
      const short = await ask({ opcode: FileOp.RegisterFile }, { op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'short.bin' } as never);
      // Fill staging with 0x11 (the long file), then read the short one into a sink of 0xEE.
      expect((await ask({ opcode: FileOp.Read }, { op: FileOp.Read, fileId: long.aux, length: 60_000, offset: 0, sinkAddr: r.sink.addr + (1 << 20), sinkRkey: r.sink.rkey } as never)).value).toBe(60_000);
      for (let k = 0; k < 4; k++) await ask({ opcode: FileOp.Read }, { op: FileOp.Read, fileId: long.aux, length: 60_000, offset: 0, sinkAddr: r.sink.addr + (1 << 20), sinkRkey: r.sink.rkey } as never);
      r.sink.buffer.fill(0xee, 0, 65_536);
      const a = await ask({ opcode: FileOp.Read }, { op: FileOp.Read, fileId: short.aux, length: 60_000, offset: 0, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey } as never);
      expect(a).toMatchObject({ status: FileStatus.Success, value: 3 });
      expect([...r.sink.buffer.subarray(0, 5)]).toEqual([0x61, 0x62, 0x63, 0xee, 0xee]);
      expect(r.sink.buffer.subarray(3, 65_536).every((b) => b === 0xee)).toBe(true);
      // At the largest offset, of length 0, past EOF: answered, nothing written.
      expect(await ask({ opcode: FileOp.Read }, { op: FileOp.Read, fileId: short.aux, length: 60_000, offset: 2 ** 53 - 1, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey } as never)).toMatchObject({ value: 0 });
      expect(await ask({ opcode: FileOp.Read }, { op: FileOp.Read, fileId: short.aux, length: 0, offset: 5, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey } as never)).toMatchObject({ status: FileStatus.Success, value: 0 });
      // ReadV: overlapping entries, then one past EOF, then one that would be in the file again.
      r.sink.buffer.fill(0xee, 0, 65_536);
      const v = await ask({ opcode: FileOp.ReadV, flags: I | FileFlag.Collapse }, {
        op: FileOp.ReadV, fileId: short.aux, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey,
        entries: [{ offset: 0, length: 2, sinkAddr: 0 }, { offset: 1, length: 2, sinkAddr: 0 }, { offset: 2, length: 10, sinkAddr: 0 }, { offset: 0, length: 3, sinkAddr: 0 }],
      } as never);
      expect(v).toMatchObject({ status: FileStatus.Success, value: 5 });
      expect([...r.sink.buffer.subarray(0, 18)]).toEqual([0x61, 0x62, 0x62, 0x63, 0x63, ...Array(13).fill(0xee)]);
      expect(r.terminal()).toBeUndefined();
    } finally {
      await r.close();
    }
  });

  it('a Read whose sink runs past the client\'s region: refused by the client, the connection torn down, others served', async () => {
    const { r, ask } = await bound(srv.address.port);
    const canary = r.sink.pd.regMr(1 << 16, Access.LocalWrite);
    canary.buffer.fill(0x5a);
    try {
      const long = await ask({ opcode: FileOp.RegisterFile }, { op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'long.bin' } as never);
      const live = srv.stats().liveConnections;
      r.message({ opcode: FileOp.Read, flags: I, requestId: 99, slot: 9, creditsGranted: 1 },
        { op: FileOp.Read, fileId: long.aux, length: 60_000, offset: 0, sinkAddr: r.sink.addr + r.sink.length - 100, sinkRkey: r.sink.rkey });
      await until(() => srv.stats().liveConnections === live - 1, 15_000, 'the connection to be torn down');
      expect(canary.buffer.every((b) => b === 0x5a)).toBe(true);
      expect(r.sink.buffer.subarray(r.sink.length - 100).some((b) => b === 0x11)).toBe(false);
      const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp' });
      const f = await c.open('short.bin');
      expect(new TextDecoder().decode(await c.read(f, 0, 3))).toBe('abc');
      await c.end();
    } finally {
      await r.close();
    }
  });

  it('64 Replace temporaries written and never closed: the 65th refused; the pipe dropped closes and unlinks all', async () => {
    const { r, ask } = await bound(srv.address.port);
    const before = srv.stats().openFiles;
    let refused = 0;
    try {
      for (let i = 0; i < 65; i++) {
        const o = await ask({ opcode: FileOp.RegisterFile }, { op: FileOp.RegisterFile, access: FileAccess.Write | FileAccess.Create | FileAccess.Replace, mode: 0o644, path: `t${i}.bin` } as never);
        if (o.status !== FileStatus.Success) {
          refused++;
          expect(o.status).toBe(FileStatus.TooManyOpenFiles);
          continue;
        }
        expect((await ask({ opcode: FileOp.Write }, { op: FileOp.Write, fileId: o.aux, offset: 1000, length: 4, dataOff: 0 } as never, new Uint8Array([1, 2, 3, 4]))).status).toBe(FileStatus.Success);
      }
      expect(refused).toBe(1);
      expect(fs.readdirSync(dir).filter((n) => n.endsWith('.part')).length).toBe(64);
      expect(srv.stats().openFiles).toBe(before + 64);
    } finally {
      await r.close();
    }
    await until(() => srv.stats().openFiles === before && srv.stats().sessions === 0, 10_000, 'the files to be closed');
    await until(() => fs.readdirSync(dir).filter((n) => n.endsWith('.part')).length === 0, 10_000, 'the temporaries to be unlinked');
    expect(fs.readdirSync(dir).filter((n) => /^t\d+\.bin$/.test(n))).toEqual([]);
  });
});
