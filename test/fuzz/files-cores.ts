// The file service's sans-I/O cores under a hostile client: a control pipe (PipeServer) and an
// RDMA connection (ServerConnection), each driven the way the shell (src/files/server.ts) drives
// it, one input at a time. The attacker plays the protocol well enough to get past each gate —
// it computes the pipe proof from the server's challenge, authenticates the connection with a
// key the session minted, pays for its messages with the credits the server granted — and then
// breaks one rule at a time: frames cut anywhere and headers that lie, proofs and resume keys
// that are wrong, requests with every field at its edges, ids reused, credits overrun, slots
// out of range, Cancel / InterruptRequest / Credit aimed at anything. The file system behind the
// connection is a model that completes the work the server asks for with plausible results.
import { randomBytes } from 'node:crypto';
import { authKey, pipeClientProof, sessionKey } from '../../src/files/auth.js';
import { ClientConnection } from '../../src/files/client-core.js';
import { writeFields } from '../../src/files/layout.js';
import { type Body, HDR_LEN, bodyLength, decodeHeader, encodeMessage } from '../../src/files/messages.js';
import { PipeReader, PipeServer, encodePipeFrame, newPipeCounters } from '../../src/files/pipe.js';
import { type FsOp, type FsResult, PREAUTH_RECEIVE, type ServerAction, ServerConnection, DEFAULT_SERVER_LIMITS, newServerCounters, receiveSize } from '../../src/files/server-core.js';
import { SessionTable } from '../../src/files/sessions.js';
import { FILE_MAX_PATH, FILE_PIPE_MAX_BODY, FILE_PIPE_NEGOTIATE_REQ, FileFlag, FileOp, FilePipeType, FileStatus } from '../../src/wire/spec.js';
import type { Gen } from './rng.js';
import { edgeU16, edgeU32, edgeU8, mutate } from './surface.js';
import { pollAll } from '../../src/core/sans-io.js';

const random = (n: number): Uint8Array => new Uint8Array(randomBytes(n));
const TOKEN = 'fuzz-token';

/** A path: ordinary, at the length limits, escaping, with NULs, or not UTF-8 at all. */
export function hostilePath(g: Gen): Uint8Array {
  const te = new TextEncoder();
  switch (g.int(10)) {
    case 0: return te.encode('a'.repeat(g.pick([FILE_MAX_PATH, FILE_MAX_PATH + 1, 255, 256])));
    case 1: return te.encode(g.pick(['..', '../x', 'a/../../b', '/etc/passwd', './', '', '.', 'a//b', 'a/./b']));
    case 2: return te.encode(`a\u0000b`);
    case 3: return Uint8Array.from([0xc3, 0x28, 0xff, 0xfe]);
    case 4: return te.encode('é/'.repeat(1 + g.int(100)));
    case 5: return te.encode('a/'.repeat(1 + g.int(2000)).slice(0, FILE_MAX_PATH));
    default: return te.encode(g.pick(['f', 'dir/f', 'x.txt', 'sub']));
  }
}

// ---- the control pipe ---------------------------------------------------------------------

export class PipeSession {
  readonly sessions = new SessionTable({ maxSessions: 4 }, random);
  readonly counters = newPipeCounters();
  readonly server: PipeServer;
  readonly #reader = new PipeReader();
  now = 0;
  closed: string | undefined;
  #nc = random(32);
  #ns: Uint8Array | undefined;
  #resumeKey: Uint8Array | undefined;
  #stage = 0;
  /** Bytes of a frame still to send (a frame cut into several inputs). */
  #rest: Uint8Array | undefined;
  last: Uint8Array = new Uint8Array(0);
  cls = '';

  constructor(public g: Gen) {
    this.server = new PipeServer({ token: TOKEN, sessions: this.sessions, offer: { providers: 7, udpPort: 1, tcpPort: 2, inprocId: 'x'.repeat(g.pick([0, 1, 255, 256])) }, random, counters: this.counters, now: 0, handshakeMs: 5000 });
  }

  #next(): Uint8Array {
    const g = this.g;
    switch (this.#stage) {
      case 0: return encodePipeFrame(FilePipeType.Hello, this.#nc);
      case 1: return encodePipeFrame(FilePipeType.Proof, this.#ns && !g.chance(0.05) ? pipeClientProof(TOKEN, this.#nc, this.#ns) : random(32));
      case 2: return encodePipeFrame(FilePipeType.ResumeKeyRequest);
      default: {
        const b = new Uint8Array(FILE_PIPE_NEGOTIATE_REQ.size);
        writeFields(FILE_PIPE_NEGOTIATE_REQ, b, 0, { resumeKey: this.#resumeKey && !g.chance(0.05) ? this.#resumeKey : random(24), providers: g.chance(0.7) ? 1 + g.int(7) : edgeU32(g) });
        return encodePipeFrame(FilePipeType.NegotiateRequest, b);
      }
    }
  }

  step(): string | undefined {
    const g = this.g;
    if (this.closed) return 'pipe closed';
    let chunk: Uint8Array;
    const k = g.int(100);
    if (this.#rest) {
      chunk = this.#rest;
      this.#rest = undefined;
      this.cls = 'rest';
    } else if (k < 70) {
      chunk = this.#next();
      this.cls = `frame/${this.#stage}`;
      if (g.chance(0.1)) {
        chunk = mutate(g, chunk);
        this.cls += '/mutated';
      }
      if (this.#stage < 3) this.#stage++;
    } else if (k < 80) {
      // A header announcing a body at the limits (and, mostly, not the body).
      const type = g.int(12);
      const len = g.pick([FILE_PIPE_MAX_BODY, FILE_PIPE_MAX_BODY + 1, 0xffff, 0xffff_ffff, 0, 1, 32]);
      const f = encodePipeFrame(type, new Uint8Array(0));
      const dv = new DataView(f.buffer);
      for (const at of [0, 4]) if (at + 4 <= f.length && g.chance(0.5)) dv.setUint32(at, len);
      chunk = new Uint8Array([...f, ...g.bytes(g.int(64))]);
      this.cls = 'header-lies';
    } else if (k < 88) {
      chunk = encodePipeFrame(g.pick([0, 2, 4, 6, 8, 9, 10, 255, 1, 3, 5, 7]), g.bytes(g.pick([0, 1, 24, 28, 31, 32, 33, g.int(FILE_PIPE_MAX_BODY + 1)])));
      this.cls = 'frame/any-type';
    } else if (k < 95) {
      chunk = g.bytes(g.int(40));
      this.cls = 'garbage';
    } else {
      this.cls = 'tick';
      this.last = new Uint8Array(0);
      this.now += g.pick([1, 4999, 5000, 5001, 1e9]);
      this.server.handleTimeout(this.now);
      return this.#drain();
    }
    if (chunk.length > 1 && g.chance(0.2)) {
      const cut = 1 + g.int(chunk.length - 1);
      this.#rest = chunk.subarray(cut);
      chunk = chunk.subarray(0, cut);
      this.cls += '/cut';
    }
    this.last = chunk;
    this.server.handleReceive(chunk, this.now);
    return this.#drain();
  }

  #drain(): string | undefined {
    for (const a of pollAll(this.server)) {
      if (a.kind === 'close') {
        this.closed = a.reason;
        // The shell: the session dies with its pipe.
        if (this.server.session) this.sessions.close(this.server.session);
        continue;
      }
      for (const f of this.#reader.push(a.bytes)) {
        if (f.type === FilePipeType.Challenge) this.#ns = f.body.slice();
        if (f.type === FilePipeType.ResumeKeyResponse) this.#resumeKey = f.body.slice(0, 24);
      }
      if (this.#reader.error) throw new Error(`the pipe server wrote a frame its own reader refuses: ${this.#reader.error}`);
    }
    return this.closed;
  }
}

// ---- the RDMA connection ------------------------------------------------------------------

const LIMITS = { ...DEFAULT_SERVER_LIMITS, maxWriteSize: 4096, maxReadWriteSize: 64 * 1024, maxVectors: 8, maxOpenFiles: 4, rwDepth: 2, authTimeoutMs: 5000, credits: 8 };

export class ConnSession {
  readonly sessions = new SessionTable({}, random);
  readonly counters = newServerCounters();
  readonly conn: ServerConnection;
  now = 0;
  /** Receives the server has posted (a message with none is refused by the transport: RNR). */
  recvQ: number[] = [];
  #nextRecv = 1;
  /** Credits the server granted the attacker. */
  credits = 1;
  readonly fs: { token: number; work: FsOp }[] = [];
  readonly writes: number[] = [];
  readonly ids: number[] = [];
  #nextId = 1;
  #nextHandle = 1;
  terminated: string | undefined;
  released = false;
  authenticated = false;
  last: Uint8Array = new Uint8Array(0);
  cls = '';

  constructor(public g: Gen) {
    const pre = this.#nextRecv++;
    this.recvQ.push(pre);
    this.conn = new ServerConnection({ limits: LIMITS, sessions: this.sessions, counters: this.counters, now: 0, preauthRecvId: pre });
  }

  /** The AuthenticateRequest, built by the client core with a key the session minted; mutated in a share. */
  authenticate(): string | undefined {
    const g = this.g;
    const s = this.sessions.open(sessionKey(TOKEN, random(32), random(32)))!;
    const keyId = this.sessions.mintKey(s, this.now)!;
    const c = new ClientConnection({ credits: 8, statusSlots: g.pick([8, 8, 8, 1, 255, 0]), receiveSize: 128 });
    c.start({ resumeKey: g.chance(0.97) ? s.resumeKey : random(24), keyId, kAuth: authKey(s.kSession, keyId), nonce: random(16), statusAddr: g.chance(0.9) ? 4096 : 0, statusRkey: g.chance(0.9) ? 0x1234 : 0 });
    const send = pollAll(c).find((a) => a.kind === 'send');
    if (!send || send.kind !== 'send') throw new Error('the client core did not send its AuthenticateRequest');
    let b = send.bytes;
    this.cls = 'auth';
    if (g.chance(0.1)) {
      b = mutate(g, b);
      this.cls = 'auth/mutated';
    }
    return this.#deliver(b);
  }

  #deliver(b: Uint8Array): string | undefined {
    this.last = b;
    const recvId = this.recvQ.shift();
    if (recvId === undefined) return 'no receive posted (rnr)';
    if (b.length > (this.authenticated ? receiveSize(LIMITS) : PREAUTH_RECEIVE)) {
      // Longer than the buffer: the receive completes in error and the shell closes the connection.
      this.conn.close();
      return this.#drain() ?? 'longer than the receive buffer (the shell closes the connection)';
    }
    this.credits--;
    this.conn.handleReceive(recvId, b, this.now);
    return this.#drain();
  }

  #drain(): string | undefined {
    for (const a of pollAll(this.conn)) this.#act(a);
    return this.terminated;
  }

  #act(a: ServerAction): void {
    switch (a.kind) {
      case 'post':
        for (let i = 0; i < a.n; i++) this.recvQ.push(this.#nextRecv++);
        return;
      case 'repost':
        this.recvQ.push(a.recvId);
        return;
      case 'send':
      case 'block': {
        const h = decodeHeader(a.bytes);
        if (!h.ok) throw new Error(`the server sent a message that does not decode (${h.error})`);
        this.credits += h.value.creditsGranted;
        if (h.value.opcode === FileOp.AuthenticateResponse) this.authenticated = true;
        return;
      }
      case 'write':
        if (a.length < 0 || a.at < 0 || a.at + a.length > LIMITS.maxReadWriteSize) throw new Error(`a write of staging [${a.at}, +${a.length}) outside the ${LIMITS.maxReadWriteSize}-byte buffer`);
        this.writes.push(a.token);
        return;
      case 'fs':
        this.fs.push({ token: a.token, work: a.work });
        return;
      case 'terminate':
        this.terminated = `terminate ${a.status}: ${a.reason}`;
        return;
      case 'released':
        this.released = true;
        return;
      default:
        return;
    }
  }

  #hdr(op: number, body?: Body): { h: Parameters<typeof encodeMessage>[1]; body: Body } {
    const g = this.g;
    const id = g.chance(0.9) ? this.#nextId++ : g.chance(0.5) && this.ids.length ? g.pick(this.ids) : edgeU32(g);
    this.ids.push(id);
    if (this.ids.length > 64) this.ids.shift();
    return {
      h: {
        opcode: op, flags: g.chance(0.8) ? g.pick([0, FileFlag.Interrupt, FileFlag.Collapse, FileFlag.Interrupt | FileFlag.Collapse]) : edgeU8(g),
        creditsRequested: g.chance(0.8) ? 8 : edgeU16(g), creditsGranted: g.chance(0.8) ? g.int(2) : edgeU16(g),
        slot: g.chance(0.8) ? g.int(8) : edgeU16(g), requestId: id, info: g.chance(0.5) && this.ids.length ? g.pick(this.ids) : edgeU32(g),
      },
      body: body ?? { op } as Body,
    };
  }

  #request(): string | undefined {
    const g = this.g;
    const te = new TextDecoder();
    const fileId = g.chance(0.7) ? 1 + g.int(4) : edgeU32(g);
    const safe = (): number => g.pick([0, 1, 4095, 4096, 65536, 2 ** 32, 2 ** 53 - 1, g.int(1 << 20)]);
    const len = (): number => g.pick([0, 1, 4096, 4097, 65536, 65537, 0x7fff_ffff, 0xffff_ffff, g.int(8192)]);
    let body: Body;
    let data: Uint8Array = new Uint8Array(0);
    switch (g.int(10)) {
      case 0: case 1: body = { op: FileOp.RegisterFile, access: g.chance(0.7) ? g.pick([1, 2, 3, 6, 0x22, 0x62, 0x0e]) : edgeU32(g), mode: edgeU32(g), path: te.decode(hostilePath(g)) }; break;
      case 2: body = { op: FileOp.Read, fileId, length: len(), offset: safe(), sinkAddr: safe(), sinkRkey: edgeU32(g) }; break;
      case 3: body = { op: FileOp.ReadV, fileId, sinkAddr: safe(), sinkRkey: edgeU32(g), entries: Array.from({ length: g.pick([1, 2, 8, 9, 64]) }, () => ({ offset: safe(), sinkAddr: safe(), length: len() })) }; break;
      case 4: {
        const n = g.pick([0, 1, 100, 4096, 4097]);
        data = g.bytes(n);
        body = { op: FileOp.Write, fileId, offset: safe(), length: n, dataOff: 0 } as Body;
        break;
      }
      case 5: {
        const entries = Array.from({ length: g.pick([1, 2, 8, 9]) }, () => ({ offset: safe(), length: g.int(600) }));
        data = g.bytes(entries.reduce((s, e) => s + e.length, 0));
        body = { op: FileOp.WriteV, fileId, entries, dataOff: 0, dataLen: data.length } as Body;
        break;
      }
      case 6: body = { op: FileOp.Close, fileId, discard: g.int(2) }; break;
      case 7: body = { op: FileOp.List, cookie: edgeU32(g), sinkLength: g.pick([0, 39, 40, 4096, 65536, 65537, 0xffff_ffff]), sinkAddr: safe(), sinkRkey: edgeU32(g), path: te.decode(hostilePath(g)) }; break;
      default: body = { op: g.pick([FileOp.Cancel, FileOp.Credit, FileOp.InterruptRequest, FileOp.DeltaCredit, FileOp.StatusResponse]) } as Body;
    }
    const { h } = this.#hdr(body.op, body);
    if (body.op === FileOp.StatusResponse) body = { op: FileOp.StatusResponse, status: edgeU32(g), aux: edgeU32(g), value: safe() };
    let b: Uint8Array;
    try {
      b = new Uint8Array(HDR_LEN + bodyLength(body) + data.length);
      encodeMessage(b, h, body);
      b.set(data, b.length - data.length);
    } catch {
      // A field the encoder will not write (a path too long to encode): send its bytes raw.
      b = g.bytes(HDR_LEN + g.int(64));
    }
    this.cls = `req/${body.op}`;
    if (g.chance(0.1)) {
      b = mutate(g, b);
      this.cls += '/mutated';
    }
    if (this.credits <= 0 && !g.chance(0.05)) return 'the attacker holds no credit (held back)';
    return this.#deliver(b);
  }

  /** The file system finishes a piece of work: plausible results (and, in a share, errors). */
  #fsDone(): string | undefined {
    const g = this.g;
    const i = g.chance(0.7) ? 0 : g.int(this.fs.length);
    const [w] = this.fs.splice(i, 1);
    if (!w) return 'no file-system work pending';
    this.cls = `fs/${w.work.op}`;
    const fail = g.chance(0.1);
    let r: FsResult;
    const work = w.work;
    if (fail) r = { status: g.pick([FileStatus.NotFound, FileStatus.IoError, FileStatus.PathOutside, FileStatus.LinkedFile, FileStatus.Exists]) };
    else if (work.op === 'open') r = { status: FileStatus.Success, handle: this.#nextHandle++, value: g.pick([0, 1, 2 ** 53 - 1, g.int(1 << 20)]) };
    else if (work.op === 'read') r = { status: FileStatus.Success, value: g.int(work.length + 1) };
    else if (work.op === 'readv') {
      const parts = work.entries.map((e) => g.int(e.length + 1));
      r = { status: FileStatus.Success, value: parts.reduce((s, x) => s + x, 0), parts };
    } else if (work.op === 'list') r = { status: FileStatus.Success, value: g.int(work.maxBytes + 1), next: g.chance(0.5) ? 0 : edgeU32(g) };
    else if (work.op === 'write') r = { status: FileStatus.Success, value: work.length };
    else r = { status: FileStatus.Success, value: 0 };
    this.last = new Uint8Array(0);
    this.conn.handleFsDone(w.token, r, this.now);
    if (g.chance(0.02)) this.conn.handleFsDone(w.token, r, this.now);
    return this.#drain();
  }

  step(): string | undefined {
    const g = this.g;
    if (this.released) return 'connection released';
    const k = g.int(100);
    if (k < 45) return this.#request();
    if (k < 65 && this.fs.length) return this.#fsDone();
    this.last = new Uint8Array(0);
    if (k < 80 && this.writes.length) {
      this.cls = 'write-done';
      this.conn.handleWriteDone(g.chance(0.95) ? this.writes.shift()! : edgeU32(g), this.now);
      return this.#drain();
    }
    if (k < 88) {
      this.cls = 'raw';
      const b = g.bytes(g.pick([0, 1, HDR_LEN - 1, HDR_LEN, HDR_LEN + 1, g.int(200)]));
      if (b.length >= 1 && g.chance(0.7)) b[0] = 1 + g.int(16);
      return this.#deliver(b);
    }
    if (k < 92) {
      this.cls = 'tick';
      this.now += g.pick([1, 4999, 5000, 1e9]);
      this.conn.handleTimeout(this.now);
      return this.#drain();
    }
    if (k < 97) {
      this.cls = 'credit-target';
      this.conn.setCreditTarget(g.chance(0.5) ? g.int(20) : edgeU32(g));
      return this.#drain();
    }
    this.cls = 'close';
    this.conn.close();
    return this.#drain();
  }
}
