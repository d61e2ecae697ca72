// An attacker holding one unauthenticated connection per source address, from many addresses,
// fills the server's global unauthenticated cap; each newer one evicts one pending connection.
// Which one: the oldest of the source holding the most. With every source holding one, that is a
// tie, and it used to go to the source first in the table — the one whose entry is oldest, i.e. a
// host that kept a connection all along: an honest host already holding a session. Its next
// pipe (or RDMA connection) was then closed by the very next stranger's connect, whatever
// older strangers still waited, so one attacker connect per honest handshake locked that host out.
// Now a tie goes to the oldest pending connection. Pipes (raw, on the wire) and RDMA connections
// (FileClient over udp) from 127.0.0.x, each case with its own server.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { describe, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { pipeClientProof } from '../../src/files/auth.js';
import { encodePipeFrame, type PipeFrame, PipeReader } from '../../src/files/pipe.js';
import { readFields } from '../../src/files/layout.js';
import { FILE_NONCE_LEN, FILE_PIPE_WELCOME, FilePipeType, FileStatus } from '../../src/wire/files-spec.js';
import { tempDirsRemovedAfter, until } from '../files/helpers.js';

const TOKEN = 'evict-many-sources-0123456789abcdef';
const tempDir = tempDirsRemovedAfter();

interface RawPipe {
  s: net.Socket;
  frames: PipeFrame[];
  closed: () => boolean;
}

function openPipe(port: number, from: string, done: (f: () => void) => void): RawPipe {
  const s = net.connect({ host: '127.0.0.1', port, localAddress: from });
  done(() => void s.destroy());
  const reader = new PipeReader();
  const frames: PipeFrame[] = [];
  let closed = false;
  s.on('data', (b: Buffer) => frames.push(...reader.push(new Uint8Array(b))));
  s.on('error', () => {});
  s.on('close', () => (closed = true));
  return { s, frames, closed: () => closed };
}

/** Hello, Challenge, Proof made with `TOKEN`: resolves with the Welcome's status (or the frame type that came instead). */
async function login(p: RawPipe): Promise<{ type: number; status?: number }> {
  const nc = new Uint8Array(randomBytes(FILE_NONCE_LEN));
  p.s.write(encodePipeFrame(FilePipeType.Hello, nc));
  await until(() => p.frames.length >= 1 || p.closed(), 3000, 'the Challenge');
  if (p.frames[0]?.type !== FilePipeType.Challenge) return { type: p.frames[0]?.type ?? -1 };
  p.s.write(encodePipeFrame(FilePipeType.Proof, pipeClientProof(TOKEN, nc, p.frames[0].body)));
  await until(() => p.frames.length >= 2 || p.closed(), 3000, 'the Welcome');
  const w = p.frames[1];
  return w?.type === FilePipeType.Welcome ? { type: w.type, status: readFields(FILE_PIPE_WELCOME, w.body, 0).status } : { type: w?.type ?? -1 };
}

describe.concurrent('strangers from many addresses, one unauthenticated connection each, against the global cap', () => {
  it('pipes: the next stranger evicts the oldest stranger, not the newest pipe of a host holding a session', async ({ expect, onTestFinished }) => {
    const dir = tempDir('evict-sources-pipes');
    const srv = await serveFiles(dir, { port: 0, token: TOKEN, transports: ['tcp'], maxUnauthenticatedPipes: 4 });
    onTestFinished(() => srv.close());
    const port = srv.address.port;
    const done = (f: () => void): void => onTestFinished(f);
    // The honest host holds a session (an authenticated pipe) all along.
    const session = openPipe(port, '127.0.0.1', done);
    expect(await login(session)).toEqual({ type: FilePipeType.Welcome, status: FileStatus.Success });
    // Four strangers fill the cap, one each from 127.0.0.2 … 127.0.0.5.
    const strangers = [2, 3, 4, 5].map((i) => openPipe(port, `127.0.0.${i}`, done));
    await until(() => srv.stats().unauthenticatedPipes === 4, 3000, 'four strangers held');
    // The honest host's second pipe: Hello, and its Challenge (it is admitted, a stranger evicted).
    const second = openPipe(port, '127.0.0.1', done);
    const nc = new Uint8Array(randomBytes(FILE_NONCE_LEN));
    second.s.write(encodePipeFrame(FilePipeType.Hello, nc));
    await until(() => second.frames.length >= 1, 3000, 'the Challenge');
    expect(second.frames[0]!.type).toBe(FilePipeType.Challenge);
    expect(srv.stats().pipesEvicted).toBe(1);
    // One more stranger: some pending pipe goes for it.
    strangers.push(openPipe(port, '127.0.0.6', done));
    await until(() => srv.stats().pipesEvicted === 2, 3000, 'the second eviction');
    // The honest pipe is the newest but one: older strangers wait. It proves the token and is welcome.
    second.s.write(encodePipeFrame(FilePipeType.Proof, pipeClientProof(TOKEN, nc, second.frames[0]!.body)));
    await until(() => second.frames.length >= 2 || second.closed(), 3000, 'the Welcome');
    expect(second.frames[1]?.type).toBe(FilePipeType.Welcome);
    expect(readFields(FILE_PIPE_WELCOME, second.frames[1]!.body, 0).status).toBe(FileStatus.Success);
    // The strangers evicted are the two oldest.
    await until(() => strangers.filter((p) => p.closed()).length === 2, 3000, 'two strangers closed');
    expect(strangers.map((p) => p.closed())).toEqual([true, true, false, false, false]);
  }, 10_000);
});
