// Dedup transfers started at once on one FileClient. Each negotiates a fresh key on the control
// pipe; PipeClient.negotiate() sent nothing while another negotiation was in flight, so the
// second transfer never got its NegotiateResponse and failed after timeoutMs with
// ERR_FILE_TIMEOUT; and one refused negotiation closed the pipe client for good (every later
// dedup transfer of the session failed). Now every negotiate sends its request, the answers
// (in order) go to the waiters in order, and a refusal rejects only its own waiter.
// Each case failed before the fix.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { pipeServerProof } from '../../src/files/auth.js';
import { writeFields } from '../../src/files/layout.js';
import { encodePipeFrame, PipeClient } from '../../src/files/pipe.js';
import { FILE_PIPE_NEGOTIATE_RESP, FILE_PIPE_RESUME_KEY, FILE_PIPE_WELCOME, FilePipeType, FileProvider, FileStatus } from '../../src/wire/files-spec.js';
import { pollAll } from '../../src/core/sans-io.js';
import { tempDir } from './helpers.js';

const TOKEN = 'files-dedup-concurrent-token-0123456789';
const why = (r: PromiseSettledResult<unknown>[]): string[] => r.map((x) => (x.status === 'rejected' ? `${(x.reason as { code?: string }).code}: ${(x.reason as Error).message}` : 'ok'));

describe('concurrent dedup transfers on one client', () => {
  let dir: string;
  const a = new Uint8Array(randomBytes(64 << 10));
  const b = new Uint8Array(randomBytes(64 << 10));
  beforeAll(() => {
    dir = tempDir('dedup-concurrent');
    fs.mkdirSync(join(dir, 'srv'));
    fs.writeFileSync(join(dir, 'a.bin'), a);
    fs.writeFileSync(join(dir, 'b.bin'), b);
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('two puts, then two gets, at once: all complete, byte-exact', async () => {
    const srv = await serveFiles(join(dir, 'srv'), { token: TOKEN, transports: ['tcp'] });
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 4000 });
    try {
      expect(why(await Promise.allSettled([c.put(join(dir, 'a.bin'), 'a.bin', { dedup: true }), c.put(join(dir, 'b.bin'), 'b.bin', { dedup: true })]))).toEqual(['ok', 'ok']);
      expect(Buffer.from(fs.readFileSync(join(dir, 'srv', 'b.bin'))).equals(Buffer.from(b))).toBe(true);
      expect(why(await Promise.allSettled([c.get('a.bin', join(dir, 'a2.bin'), { dedup: true }), c.get('b.bin', join(dir, 'b2.bin'), { dedup: true })]))).toEqual(['ok', 'ok']);
      expect(Buffer.from(fs.readFileSync(join(dir, 'a2.bin'))).equals(Buffer.from(a))).toBe(true);
      expect(Buffer.from(fs.readFileSync(join(dir, 'b2.bin'))).equals(Buffer.from(b))).toBe(true);
    } finally {
      await c.end();
      await srv.close();
    }
  }, 30_000);

  it('a server that holds one key per session: the second put is refused (ERR_FILE_SESSION_LIMIT), the first and a later one complete', async () => {
    const srv = await serveFiles(join(dir, 'srv'), { token: TOKEN, transports: ['tcp'], sessions: { maxPendingKeys: 1 } });
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 4000 });
    try {
      // Both NegotiateRequests go before the server sees the first key used: it refuses the one it
      // answers second (which put asks first is the event loop's: each reads its file first).
      const r = await Promise.allSettled([c.put(join(dir, 'a.bin'), 'a1.bin', { dedup: true }), c.put(join(dir, 'b.bin'), 'b1.bin', { dedup: true })]);
      expect(why(r).filter((x) => x === 'ok')).toHaveLength(1);
      expect((r.find((x) => x.status === 'rejected') as PromiseRejectedResult).reason).toMatchObject({ code: 'ERR_FILE_SESSION_LIMIT' });
      // The refusal was that negotiation's, not the pipe's.
      await c.put(join(dir, 'b.bin'), 'b1.bin', { dedup: true });
      expect(Buffer.from(fs.readFileSync(join(dir, 'srv', 'b1.bin'))).equals(Buffer.from(b))).toBe(true);
    } finally {
      await c.end();
      await srv.close();
    }
  }, 30_000);
});

describe('PipeClient: negotiations in flight at once', () => {
  function frame(L: Parameters<typeof writeFields>[0], v: Record<string, number | Uint8Array>): Uint8Array {
    const x = new Uint8Array(L.size);
    writeFields(L, x, 0, v);
    return x;
  }
  const answer = (status: number): Uint8Array => encodePipeFrame(FilePipeType.NegotiateResponse, frame(FILE_PIPE_NEGOTIATE_RESP, {
    status, providers: status === FileStatus.Success ? FileProvider.tcp : 0, inprocIdLen: 0, udpPort: 1, tcpPort: 2, keyId: new Uint8Array(randomBytes(16)),
  }));
  /** A PipeClient past its handshake, its first (connect's) negotiation answered. */
  function ready(): PipeClient {
    const token = 'pipe-client-unit-token-0123456789';
    const drawn: Uint8Array[] = [];
    const pc = new PipeClient({ token, providers: FileProvider.tcp, random: (n) => (drawn.push(new Uint8Array(randomBytes(n))), drawn.at(-1)!) });
    // The client's nonce: its first random draw (sent in the Hello).
    const nc = drawn[0]!;
    const ns = new Uint8Array(randomBytes(32));
    pc.handleReceive(encodePipeFrame(FilePipeType.Challenge, ns), 0);
    pc.handleReceive(encodePipeFrame(FilePipeType.Welcome, frame(FILE_PIPE_WELCOME, { status: FileStatus.Success, mac: pipeServerProof(token, nc, ns) })), 0);
    pc.handleReceive(encodePipeFrame(FilePipeType.ResumeKeyResponse, frame(FILE_PIPE_RESUME_KEY, { resumeKey: new Uint8Array(24) })), 0);
    pc.handleReceive(answer(FileStatus.Success), 0);
    expect(pollAll(pc).map((e) => e.kind)).toEqual(['write', 'write', 'write', 'write', 'negotiated']);
    expect(pc.state).toBe('ready');
    return pc;
  }

  it('each negotiate() sends a request; the answers come out in order; a refusal is one error, not the pipe closed', () => {
    const pc = ready();
    pc.negotiate();
    pc.negotiate();
    pc.negotiate();
    expect(pollAll(pc).map((e) => e.kind)).toEqual(['write', 'write', 'write']);
    pc.handleReceive(answer(FileStatus.Success), 0);
    pc.handleReceive(answer(FileStatus.SessionLimit), 0);
    pc.handleReceive(answer(FileStatus.Success), 0);
    const ev = pollAll(pc);
    expect(ev.map((e) => (e.kind === 'error' ? `error fatal=${e.fatal}` : e.kind))).toEqual(['negotiated', 'error fatal=false', 'negotiated']);
    expect(pc.state).toBe('ready');
    pc.negotiate();
    expect(pollAll(pc).map((e) => e.kind)).toEqual(['write']);
    // An answer nobody asked for is a broken server: that closes the pipe.
    pc.handleReceive(answer(FileStatus.Success), 0);
    pc.handleReceive(answer(FileStatus.Success), 0);
    expect(pollAll(pc).map((e) => (e.kind === 'error' ? `error fatal=${e.fatal}` : e.kind))).toEqual(['negotiated', 'error fatal=true']);
    expect(pc.state).toBe('closed');
  });
});
