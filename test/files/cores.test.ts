// The two file-service state machines against each other, no I/O (./harness.ts): the protocol
// sequence, every I/O operation, both completion modes, cancel, the limits.
import { describe, expect, it } from 'vitest';
import { RESERVE } from '../../src/files/credits.js';
import { decodeDirEntries } from '../../src/files/dirents.js';
import { FILE_AUTH_RESP, FILE_EVICTIONS, FileAccess, FileOp, FileStatus } from '../../src/wire/files-spec.js';
import { connectionServerProof } from '../../src/files/auth.js';
import { ClientConnection } from '../../src/files/client-core.js';
import { writeFields } from '../../src/files/layout.js';
import { HDR_LEN, bodyLength, encodeMessage } from '../../src/files/messages.js';
import { Harness } from './harness.js';
import { pollAll } from '../../src/core/sans-io.js';

const bytes = (n: number, seed = 1): Uint8Array => {
  const b = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
};

function ready(h: Harness): void {
  h.authenticate();
  expect(h.failed).toBeUndefined();
  expect(h.ready).toBe(true);
  expect(h.violations).toEqual([]);
}

function open(h: Harness, path: string, access: number, interrupt = true): number {
  const d = h.run({ op: FileOp.RegisterFile, access, mode: 0o644, path }, { interrupt });
  expect(d.status, `open ${path}`).toBe(FileStatus.Success);
  return d.aux;
}

describe('file service cores: authentication', () => {
  it('authenticate request → response → status response, then the client is granted its credits', () => {
    const h = new Harness({ seed: 3 });
    ready(h);
    expect(h.client.limits!.maxWriteSize).toBe(64 * 1024);
    expect(h.client.credits.send).toBeGreaterThan(0);
    expect(h.counters.authenticated).toBe(1);
    // request → response → status response, in that order, on the wire.
    const sent = h.serverLog.filter((a) => a.kind === 'send').map((a) => (a as { bytes: Uint8Array }).bytes[0]);
    expect(sent.slice(0, 2)).toEqual([FileOp.AuthenticateResponse, FileOp.StatusResponse]);
  });

  it('the server provisions its receive memory only after a valid authentication', () => {
    const h = new Harness();
    expect(h.serverRq.length).toBe(1);
    ready(h);
    const kinds = h.serverLog.map((a) => a.kind);
    expect(kinds.indexOf('provision')).toBeGreaterThanOrEqual(0);
    expect(kinds.indexOf('provision')).toBeLessThan(kinds.indexOf('post'));
    expect(h.serverRq.length).toBe(h.limits.credits + RESERVE);
  });
});

describe('file service cores: a connection closed for a newer one before it authenticated (server evict)', () => {
  it('its AuthenticateRequest is answered StatusResponse(SessionLimit, Terminate) with the reason\'s code: the client names the bound; the key is not consumed, nothing registered', () => {
    const h = new Harness();
    h.server.evict(FILE_EVICTIONS[0].code, h.now + 2000);
    expect(h.server.pollTimeout()).toBe(h.now + 2000);
    h.authenticate();
    expect(h.ready).toBe(false);
    expect(h.failed).toEqual({
      code: 'ERR_FILE_SESSION_LIMIT', status: FileStatus.SessionLimit,
      message: 'the server refused: too many unauthenticated connections from your host (maxUnauthenticatedPerHost); closed before it authenticated, for a newer connection',
    });
    expect(h.counters).toMatchObject({ evictionsTold: 1, evictionsUntold: 0, authenticated: 0, authFailed: 0 });
    expect(h.serverLog.map((a) => a.kind)).not.toContain('provision');
    expect(h.violations).toEqual([]);
  });

  it('no message by its deadline (at most its login deadline): it goes untold, counted', () => {
    const h = new Harness();
    h.server.evict(FILE_EVICTIONS[3].code, h.now + 10 * h.limits.authTimeoutMs);
    expect(h.server.pollTimeout()).toBe(h.now + h.limits.authTimeoutMs);
    h.tick(h.limits.authTimeoutMs);
    expect(h.counters).toMatchObject({ evictionsTold: 0, evictionsUntold: 1, authTimeouts: 0 });
    expect(h.serverLog.filter((a) => a.kind === 'send')).toEqual([]);
    expect(h.serverLog.map((a) => a.kind)).toContain('terminate');
  });
});

describe('file service cores: the client checks the server', () => {
  // The AuthenticateResponse of a server (or a man in the middle of the RDMA path) that holds
  // `kAuth`, answering the client's request `req`.
  function response(kAuth: Uint8Array, nonce: Uint8Array): Uint8Array {
    const resp = { status: FileStatus.Success, maxReceiveSize: 4096, maxReadWriteSize: 65536, maxWriteSize: 16384, maxVectors: 4, maxOpenFiles: 4, rwDepth: 2, creditsMax: 4 };
    const tmp = new Uint8Array(FILE_AUTH_RESP.size);
    writeFields(FILE_AUTH_RESP, tmp, 0, resp);
    const params = tmp.slice(0, FILE_AUTH_RESP.fields.mac.offset);
    const body = { op: FileOp.AuthenticateResponse, ...resp, mac: connectionServerProof(kAuth, nonce, params), params } as const;
    const b = new Uint8Array(HDR_LEN + bodyLength(body));
    encodeMessage(b, { opcode: FileOp.AuthenticateResponse, flags: 0, creditsRequested: 4, creditsGranted: 2, slot: 0, requestId: 0, info: 0 }, body);
    return b;
  }

  for (const [who, right] of [['the server that holds the key', true], ['a server that does not', false]] as const) {
    it(`AuthenticateResponse from ${who}: ${right ? 'accepted' : 'refused (AccessDenied), counted, the connection closed'}`, () => {
      const kAuth = new Uint8Array(32).fill(1);
      const nonce = new Uint8Array(16).fill(2);
      const c = new ClientConnection({ credits: 4, statusSlots: 4, receiveSize: 128 });
      c.start({ resumeKey: new Uint8Array(24), keyId: new Uint8Array(16), kAuth, nonce, statusAddr: 0x1000, statusRkey: 7 });
      pollAll(c);
      c.handleReceive(response(right ? kAuth : new Uint8Array(32).fill(9), nonce), 0);
      const acts = pollAll(c);
      const failed = acts.find((a) => a.kind === 'failed');
      if (right) {
        expect(failed).toBeUndefined();
        expect(c.state).toBe('authenticated');
        expect(c.counters.serverUnproven).toBe(0);
      } else {
        expect(failed).toMatchObject({ status: FileStatus.AccessDenied, message: expect.stringMatching(/could not prove/) });
        expect(c.state).toBe('closed');
        expect(c.limits).toBeUndefined();
        expect(c.counters.serverUnproven).toBe(1);
        // Nothing more goes out on a refused connection.
        expect(() => c.request({ op: FileOp.List, cookie: 0, sinkLength: 4096, sinkAddr: 0, sinkRkey: 1, path: '' })).toThrow();
      }
    });
  }
});

describe('file service cores: I/O', () => {
  it('read and vectored read (with and without Collapse) land byte-exact in the client sink', () => {
    const data = bytes(300_000, 5);
    const h = new Harness({ seed: 7, files: { 'a.bin': data } });
    ready(h);
    const fid = open(h, 'a.bin', FileAccess.Read);
    const sink = 1 << 20;
    const d = h.run({ op: FileOp.Read, fileId: fid, length: 100_000, offset: 12_345, sinkAddr: sink, sinkRkey: 1 });
    expect(d).toEqual({ status: 0, value: 100_000, aux: 0 });
    expect(Buffer.from(h.mem.subarray(sink, sink + 100_000)).equals(Buffer.from(data.subarray(12_345, 112_345)))).toBe(true);
    // Short read at the end of the file.
    const e = h.run({ op: FileOp.Read, fileId: fid, length: 4096, offset: 299_000, sinkAddr: sink, sinkRkey: 1 });
    expect(e.value).toBe(1000);
    // ReadV, collapsed: the entries follow each other in one sink run.
    const entries = [{ offset: 10, length: 100, sinkAddr: 0 }, { offset: 200_000, length: 5000, sinkAddr: 0 }, { offset: 7, length: 1, sinkAddr: 0 }];
    const v = h.run({ op: FileOp.ReadV, fileId: fid, sinkAddr: 2 << 20, sinkRkey: 1, entries }, { interrupt: true, collapse: true });
    expect(v.value).toBe(5101);
    const want = Buffer.concat(entries.map((x) => Buffer.from(data.subarray(x.offset, x.offset + x.length))));
    expect(Buffer.from(h.mem.subarray(2 << 20, (2 << 20) + 5101)).equals(want)).toBe(true);
    // ReadV, scattered: each entry to its own sink.
    const sc = [{ offset: 0, length: 64, sinkAddr: 3 << 20 }, { offset: 64, length: 64, sinkAddr: (3 << 20) + 1000 }];
    h.run({ op: FileOp.ReadV, fileId: fid, sinkAddr: 0, sinkRkey: 1, entries: sc });
    expect(Buffer.from(h.mem.subarray(3 << 20, (3 << 20) + 64)).equals(Buffer.from(data.subarray(0, 64)))).toBe(true);
    expect(Buffer.from(h.mem.subarray((3 << 20) + 1000, (3 << 20) + 1064)).equals(Buffer.from(data.subarray(64, 128)))).toBe(true);
    expect(h.violations).toEqual([]);
  });

  it('write and vectored write (Collapse) carried by Sends; Replace reaches its name only on close', () => {
    const h = new Harness({ seed: 11 });
    ready(h);
    const fid = open(h, 'out.bin', FileAccess.Write | FileAccess.Create | FileAccess.Replace);
    const a = bytes(50_000, 2);
    expect(h.run({ op: FileOp.Write, fileId: fid, offset: 0, length: a.length, dataOff: 0 }, { interrupt: true, data: a }).value).toBe(50_000);
    const b = bytes(3000, 9);
    const wv = h.run({ op: FileOp.WriteV, fileId: fid, entries: [{ offset: 50_000, length: 1000 }, { offset: 52_000, length: 2000 }], dataOff: 0, dataLen: 3000 },
      { interrupt: true, collapse: true, data: b });
    expect(wv).toEqual({ status: 0, value: 3000, aux: 0 });
    expect(h.files.has('out.bin')).toBe(false);
    expect(h.run({ op: FileOp.Close, fileId: fid, discard: 0 }).status).toBe(0);
    const f = h.files.get('out.bin')!;
    expect(f.length).toBe(54_000);
    expect(Buffer.from(f.subarray(0, 50_000)).equals(Buffer.from(a))).toBe(true);
    expect(Buffer.from(f.subarray(50_000, 51_000)).equals(Buffer.from(b.subarray(0, 1000)))).toBe(true);
    expect(Buffer.from(f.subarray(52_000, 54_000)).equals(Buffer.from(b.subarray(1000)))).toBe(true);
  });

  it('WriteV without the Collapse flag is refused', () => {
    const h = new Harness();
    ready(h);
    const fid = open(h, 'x', FileAccess.Write | FileAccess.Create);
    const d = h.run({ op: FileOp.WriteV, fileId: fid, entries: [{ offset: 0, length: 4 }], dataOff: 0, dataLen: 4 }, { interrupt: true, data: bytes(4) });
    expect(d.status).toBe(FileStatus.InvalidParameter);
  });

  it('list pages through a directory with cookies', () => {
    const files: Record<string, Uint8Array> = {};
    for (let i = 0; i < 50; i++) files[`d/f${String(i).padStart(3, '0')}-${'x'.repeat(i)}`] = bytes(i);
    const h = new Harness({ files });
    ready(h);
    const names: string[] = [];
    let cookie = 0;
    let pages = 0;
    do {
      const d = h.run({ op: FileOp.List, cookie, sinkLength: 512, sinkAddr: 4 << 20, sinkRkey: 1, path: 'd' });
      expect(d.status).toBe(0);
      const ents = decodeDirEntries(h.mem.subarray(4 << 20, (4 << 20) + d.value));
      if (typeof ents === 'string') throw new Error(ents);
      names.push(...ents.map((e) => e.name));
      cookie = d.aux;
      pages++;
    } while (cookie !== 0 && pages < 100);
    expect(pages).toBeGreaterThan(3);
    expect(names).toEqual(Object.keys(files).map((k) => k.slice(2)).sort());
  });

  it('polling mode: the block is written by plain RDMA Write and found by looking; an InterruptRequest brings an InterruptResponse by Send', () => {
    const data = bytes(10_000);
    const h = new Harness({ files: { f: data }, holdFs: true, noPolling: true });
    ready(h);
    // Open with the file system released by hand.
    const oid = h.client.request({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f' }, { interrupt: true });
    h.pump();
    h.releaseFs();
    h.pump();
    const fid = h.done.get(oid)!.aux;
    const before = h.client.counters.polledCompletions;
    const id = h.client.request({ op: FileOp.Read, fileId: fid, length: 1000, offset: 0, sinkAddr: 1 << 20, sinkRkey: 1 }, { interrupt: false });
    h.pump();
    expect(h.done.has(id)).toBe(false);
    h.client.interruptRequest(id);
    h.pump();
    h.releaseFs();
    h.pump();
    expect(h.done.get(id)).toEqual({ status: 0, value: 1000, aux: 0 });
    expect(h.client.counters.polledCompletions).toBe(before + 1);
    // The InterruptResponse named the request: the client was told to look at its slot.
    expect(h.clientLog.some((a) => a.kind === 'check' && a.id === id)).toBe(true);
    expect(h.counters.interruptRequests).toBe(1);
    // The InterruptResponse went by Send.
    expect(h.serverLog.some((a) => a.kind === 'send' && a.bytes[0] === FileOp.InterruptResponse)).toBe(true);
  });

  it('cancel: a read waiting for a staging buffer completes Cancelled; a read in the file system drops its data', () => {
    const h = new Harness({ files: { f: bytes(1 << 16) }, holdFs: true, limits: { rwDepth: 1 } });
    ready(h);
    const oid = h.client.request({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f' }, { interrupt: true });
    h.pump();
    h.releaseFs();
    h.pump();
    const fid = h.done.get(oid)!.aux;
    const r1 = h.client.request({ op: FileOp.Read, fileId: fid, length: 4096, offset: 0, sinkAddr: 1 << 20, sinkRkey: 1 }, { interrupt: true });
    const r2 = h.client.request({ op: FileOp.Read, fileId: fid, length: 4096, offset: 0, sinkAddr: 2 << 20, sinkRkey: 1 }, { interrupt: true });
    h.pump();
    h.client.cancel(r2);
    h.client.cancel(r1);
    h.pump();
    expect(h.done.get(r2)?.status).toBe(FileStatus.Cancelled);
    h.releaseFs();
    h.pump();
    expect(h.done.get(r1)?.status).toBe(FileStatus.Cancelled);
    expect(h.mem[1 << 20]).toBe(0);
    expect(h.counters.cancelled).toBe(2);
  });
});

describe('file service cores: limits and refusals (counted, the connection lives on)', () => {
  it('oversized and over-vectored requests, unknown handles, too many open files, read-only', () => {
    const h = new Harness({ files: { f: bytes(10) }, limits: { maxOpenFiles: 2, maxVectors: 4 } });
    ready(h);
    const fid = open(h, 'f', FileAccess.Read);
    expect(h.run({ op: FileOp.Read, fileId: fid, length: h.limits.maxReadWriteSize + 1, offset: 0, sinkAddr: 0, sinkRkey: 1 }).status).toBe(FileStatus.LimitExceeded);
    const many = Array.from({ length: 5 }, (_, i) => ({ offset: i, length: 1, sinkAddr: 0 }));
    expect(h.run({ op: FileOp.ReadV, fileId: fid, sinkAddr: 0, sinkRkey: 1, entries: many }).status).toBe(FileStatus.LimitExceeded);
    expect(h.run({ op: FileOp.Read, fileId: 999, length: 1, offset: 0, sinkAddr: 0, sinkRkey: 1 }).status).toBe(FileStatus.InvalidHandle);
    expect(h.run({ op: FileOp.Write, fileId: fid, offset: 0, length: 1, dataOff: 0 }, { interrupt: true, data: bytes(1) }).status).toBe(FileStatus.InvalidHandle);
    open(h, 'f', FileAccess.Read);
    expect(h.run({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f' }).status).toBe(FileStatus.TooManyOpenFiles);
    expect(h.counters.refusedLimit).toBe(2);
    expect(h.counters.refusedTooManyOpen).toBe(1);
    expect(h.counters.refusedHandle).toBe(2);
    // Still working.
    expect(h.run({ op: FileOp.Read, fileId: fid, length: 10, offset: 0, sinkAddr: 0, sinkRkey: 1 }).value).toBe(10);
    const ro = new Harness({ limits: { readOnly: true } });
    ready(ro);
    expect(ro.run({ op: FileOp.RegisterFile, access: FileAccess.Write | FileAccess.Create, mode: 0, path: 'g' }).status).toBe(FileStatus.ReadOnly);
    expect(ro.counters.refusedReadOnly).toBe(1);
  });

  it('paths outside the directory are refused by their text before any file-system work', () => {
    const h = new Harness();
    ready(h);
    for (const p of ['../x', 'a/../../x', '/etc/passwd', 'a\0b', '..']) {
      expect(h.run({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: p }).status, p).toBe(FileStatus.PathOutside);
    }
    expect(h.counters.refusedPath).toBe(5);
    expect(h.serverLog.filter((a) => a.kind === 'fs')).toEqual([]);
  });
});
