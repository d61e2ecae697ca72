// Drives one ClientConnection and one ServerConnection against each other with no I/O: an rc
// link modelled as two FIFOs (Sends and RDMA Writes of one direction arrive in posting order),
// receive queues counted on both sides, an in-memory file system behind the server's 'fs'
// actions, client memory as one array, and a seeded scheduler that interleaves the two
// directions and the file system. After every step it checks the credit invariant: what one
// side may still send, plus what it has in flight, never exceeds the receives the other side
// really has posted — so no message can ever find no receive (RNR) and no grant is stale.
import { randomBytes } from 'node:crypto';
import { ClientConnection, sealOf, type ClientAction } from '../../src/files/client-core.js';
import { encodeDirEntries, type DirEntry } from '../../src/files/dirents.js';
import { HDR_LEN, STATUS_BLOCK_LEN, type Body } from '../../src/files/messages.js';
import { type FsOp, type FsResult, type ServerAction, ServerConnection, type ServerLimits, DEFAULT_SERVER_LIMITS, newServerCounters } from '../../src/files/server-core.js';
import { SessionTable } from '../../src/files/sessions.js';
import { authKey, sessionKey } from '../../src/files/auth.js';
import { RESERVE } from '../../src/files/credits.js';
import { FILE_SLOT_BYTES, FileAccess, FileStatus } from '../../src/wire/files-spec.js';
import { rng } from '../sim/random.js';
import { pollAll } from '../../src/core/sans-io.js';

export interface Done {
  status: number;
  value: number;
  aux: number;
}

type Item =
  | { k: 'send'; bytes: Uint8Array; data?: Uint8Array }
  | { k: 'write'; addr: number; bytes: Uint8Array; token: number }
  | { k: 'block'; addr: number; bytes: Uint8Array; imm?: number };

export interface HarnessOptions {
  seed?: number;
  limits?: Partial<ServerLimits>;
  clientCredits?: number;
  statusSlots?: number;
  /** Hold file-system completions until released (to make reads wait). */
  holdFs?: boolean;
  files?: Record<string, Uint8Array>;
  /** Do not look at polling slots on every step (only 'check' actions complete them). */
  noPolling?: boolean;
}

export class Harness {
  readonly sessions: SessionTable;
  readonly counters = newServerCounters();
  readonly limits: ServerLimits;
  server!: ServerConnection;
  client!: ClientConnection;
  now = 0;
  readonly r: () => number;
  readonly files = new Map<string, Uint8Array>();
  readonly mem = new Uint8Array(8 << 20);
  readonly statusAddr = 0;
  readonly statusSlots: number;
  readonly done = new Map<number, Done>();
  /** Requests the client failed on its own ('reject': an answer that does not decode). */
  readonly rejected = new Map<number, { code: string; message: string }>();
  failed: { code: string; message: string; status?: number } | undefined;
  ready = false;
  terminated: { reason: string; status: number } | undefined;
  released = false;
  /** c→s and s→c in flight, in posting order. */
  c2s: Item[] = [];
  s2c: Item[] = [];
  /** Receive queues as the QPs hold them. */
  serverRq: number[] = [];
  clientRq = 0;
  serverRecvBuf = new Map<number, Uint8Array>();
  #nextRecvId = 1;
  fsQueue: { token: number; result: () => FsResult }[] = [];
  readonly staging: Uint8Array[];
  readonly #handles = new Map<number, { path: string; access: number; tmp?: Uint8Array }>();
  #nextHandle = 1;
  violations: string[] = [];
  rnr = 0;
  /** Every action the server emitted, for assertions. */
  serverLog: ServerAction[] = [];
  clientLog: ClientAction[] = [];
  kAuth: Uint8Array = new Uint8Array(0);
  resumeKey: Uint8Array = new Uint8Array(0);
  keyId: Uint8Array = new Uint8Array(0);
  readonly holdFs: boolean;
  noPolling: boolean;

  constructor(o: HarnessOptions = {}) {
    this.r = rng(o.seed ?? 1);
    this.limits = { ...DEFAULT_SERVER_LIMITS, maxWriteSize: 64 * 1024, maxReadWriteSize: 256 * 1024, ...o.limits };
    this.statusSlots = o.statusSlots ?? 32;
    this.holdFs = o.holdFs ?? false;
    this.noPolling = o.noPolling ?? false;
    this.sessions = new SessionTable({}, (n) => new Uint8Array(randomBytes(n)));
    this.staging = Array.from({ length: this.limits.rwDepth }, () => new Uint8Array(this.limits.maxReadWriteSize));
    for (const [k, v] of Object.entries(o.files ?? {})) this.files.set(k, v);
    this.newConnection(o.clientCredits ?? 8);
  }

  /** A session with a fresh key, as the pipe would leave it. */
  mintKey(): { resumeKey: Uint8Array; keyId: Uint8Array; kAuth: Uint8Array } {
    const k = sessionKey('token', new Uint8Array(32), new Uint8Array(32).fill(1));
    let s = this.#session;
    if (!s) s = this.#session = this.sessions.open(k)!;
    const keyId = this.sessions.mintKey(s, this.now)!;
    return { resumeKey: s.resumeKey, keyId, kAuth: authKey(s.kSession, keyId) };
  }

  #session: ReturnType<SessionTable['open']>;

  /** A new RDMA connection (new QPs, new cores); the old one is dropped. */
  newConnection(clientCredits: number, clientOverride?: ClientConnection): void {
    this.c2s = [];
    this.s2c = [];
    this.serverRq = [];
    this.ready = false;
    this.failed = undefined;
    this.terminated = undefined;
    this.released = false;
    const pre = this.#nextRecvId++;
    this.serverRq.push(pre);
    this.server = new ServerConnection({ limits: this.limits, sessions: this.sessions, counters: this.counters, now: this.now, preauthRecvId: pre });
    this.client = clientOverride ?? new ClientConnection({ credits: clientCredits, statusSlots: this.statusSlots, receiveSize: 128 });
    this.clientRq = clientCredits + RESERVE;
  }

  authenticate(key = this.mintKey(), nonce = new Uint8Array(16).fill(7)): void {
    this.kAuth = key.kAuth;
    this.resumeKey = key.resumeKey;
    this.keyId = key.keyId;
    this.client.start({ ...key, nonce, statusAddr: this.statusAddr, statusRkey: 0x1234 });
    this.pump();
  }

  // -------------------------------------------------------------------------------------------

  #server(a: ServerAction[]): void {
    for (const x of a) {
      this.serverLog.push(x);
      switch (x.kind) {
        case 'post':
          for (let i = 0; i < x.n; i++) this.serverRq.push(this.#nextRecvId++);
          break;
        case 'repost':
          this.serverRq.push(x.recvId);
          break;
        case 'retire':
          this.serverRecvBuf.delete(x.recvId);
          break;
        case 'send':
          this.s2c.push({ k: 'send', bytes: x.bytes });
          break;
        case 'write':
          this.s2c.push({ k: 'write', addr: x.remoteAddr, bytes: this.staging[x.staging]!.slice(x.at, x.at + x.length), token: x.token });
          break;
        case 'block':
          this.s2c.push({ k: 'block', addr: x.remoteAddr, bytes: x.bytes, ...(x.imm !== undefined ? { imm: x.imm } : {}) });
          break;
        case 'fs':
          this.fsQueue.push({ token: x.token, result: () => this.#fs(x.work) });
          break;
        case 'terminate':
          this.terminated = { reason: x.reason, status: x.status };
          break;
        case 'released':
          this.released = true;
          break;
        default:
          break;
      }
    }
  }

  #client(a: ClientAction[]): void {
    for (const x of a) {
      this.clientLog.push(x);
      switch (x.kind) {
        case 'send':
          if (x.slot !== undefined) this.mem.fill(0, this.statusAddr + x.slot * FILE_SLOT_BYTES, this.statusAddr + (x.slot + 1) * FILE_SLOT_BYTES);
          this.c2s.push({ k: 'send', bytes: x.bytes, ...(x.data instanceof Uint8Array ? { data: x.data } : {}) });
          break;
        case 'repost':
          this.clientRq++;
          break;
        case 'check': {
          const at = this.statusAddr + x.slot * FILE_SLOT_BYTES;
          const b = this.mem.subarray(at, at + STATUS_BLOCK_LEN);
          if (sealOf(b) === x.id) {
            const copy = b.slice();
            b.fill(0);
            this.client.handleStatusBlock(x.slot, copy, false, this.now);
          }
          break;
        }
        case 'complete':
          this.done.set(x.id, { status: x.status, value: x.value, aux: x.aux });
          break;
        case 'reject':
          this.rejected.set(x.id, { code: x.code, message: x.message });
          break;
        case 'ready':
          this.ready = true;
          break;
        case 'failed':
          this.failed = { code: x.code, message: x.message, ...(x.status !== undefined ? { status: x.status } : {}) };
          break;
      }
    }
  }

  #fs(w: FsOp): FsResult {
    switch (w.op) {
      case 'open': {
        const path = w.parts.join('/');
        const exists = this.files.has(path);
        if (!exists && !(w.access & FileAccess.Create)) return { status: FileStatus.NotFound };
        if (exists && w.access & FileAccess.Create && w.access & FileAccess.Exclusive) return { status: FileStatus.Exists };
        if (!exists && !(w.access & FileAccess.Replace)) this.files.set(path, new Uint8Array(0));
        if (w.access & FileAccess.Truncate && !(w.access & FileAccess.Replace)) this.files.set(path, new Uint8Array(0));
        const h = this.#nextHandle++;
        this.#handles.set(h, { path, access: w.access, ...(w.access & FileAccess.Replace ? { tmp: new Uint8Array(0) } : {}) });
        return { status: FileStatus.Success, handle: h, value: this.files.get(path)?.length ?? 0 };
      }
      case 'read': {
        const f = this.files.get(this.#handles.get(w.handle)!.path)!;
        const part = f.subarray(Math.min(w.position, f.length), Math.min(w.position + w.length, f.length));
        this.staging[w.staging]!.set(part, 0);
        return { status: FileStatus.Success, value: part.length };
      }
      case 'readv': {
        const f = this.files.get(this.#handles.get(w.handle)!.path)!;
        const parts: number[] = [];
        let total = 0;
        for (const e of w.entries) {
          // As the real server: the first short entry ends the request.
          const short = parts.length > 0 && parts[parts.length - 1]! < w.entries[parts.length - 1]!.length;
          const part = short ? f.subarray(0, 0) : f.subarray(Math.min(e.position, f.length), Math.min(e.position + e.length, f.length));
          this.staging[w.staging]!.set(part, e.at);
          parts.push(part.length);
          total += part.length;
        }
        return { status: FileStatus.Success, value: total, parts };
      }
      case 'write':
      case 'writev': {
        const h = this.#handles.get(w.handle)!;
        const src = this.serverRecvBuf.get(w.recvId)!;
        const entries = w.op === 'write' ? [{ position: w.position, length: w.length }] : w.entries;
        let at = w.dataOff;
        let total = 0;
        for (const e of entries) {
          let f = h.tmp ?? this.files.get(h.path)!;
          if (f.length < e.position + e.length) {
            const g = new Uint8Array(e.position + e.length);
            g.set(f);
            f = g;
          }
          f.set(src.subarray(at, at + e.length), e.position);
          if (h.tmp) h.tmp = f;
          else this.files.set(h.path, f);
          at += e.length;
          total += e.length;
        }
        return { status: FileStatus.Success, value: total };
      }
      case 'close': {
        const h = this.#handles.get(w.handle)!;
        if (h.tmp && w.commit) this.files.set(h.path, h.tmp);
        this.#handles.delete(w.handle);
        return { status: FileStatus.Success };
      }
      case 'list': {
        const names = [...this.files.keys()].filter((k) => (w.parts.length === 0 ? !k.includes('/') : k.startsWith(w.parts.join('/') + '/'))).sort();
        const entries: DirEntry[] = names.map((n) => ({ name: n.split('/').pop()!, type: 'file', mode: 0o644, size: this.files.get(n)!.length, mtimeMs: 0 }));
        const [bytes, count] = encodeDirEntries(this.staging[w.staging]!.subarray(0, w.maxBytes), entries, w.cookie);
        const next = w.cookie + count;
        return { status: FileStatus.Success, value: bytes, next: next < entries.length ? next : 0 };
      }
    }
  }

  get openHandles(): number {
    return this.#handles.size;
  }

  // -------------------------------------------------------------------------------------------

  #check(): void {
    // Credits the client may spend + its messages in flight <= receives the server has posted.
    const c2sSends = this.c2s.filter((i) => i.k === 'send').length;
    if (this.server.state !== 'closing' && this.server.state !== 'closed' && this.client.state !== 'closed') {
      if (this.client.credits.send + c2sSends > this.serverRq.length) {
        this.violations.push(`client may send ${this.client.credits.send} + ${c2sSends} in flight but the server has ${this.serverRq.length} receives posted`);
      }
      const s2cConsuming = this.s2c.filter((i) => i.k === 'send' || (i.k === 'block' && i.imm !== undefined)).length;
      if (this.server.credits.send + s2cConsuming > this.clientRq) {
        this.violations.push(`server may send ${this.server.credits.send} + ${s2cConsuming} in flight but the client has ${this.clientRq} receives posted`);
      }
    }
  }

  /** Run one event; false when nothing is left to run. */
  step(): boolean {
    const choices: (() => void)[] = [];
    if (this.c2s.length > 0 && (this.serverRq.length > 0 || this.c2s[0]!.k !== 'send')) choices.push(() => this.#deliverC2S());
    if (this.s2c.length > 0) {
      const head = this.s2c[0]!;
      const consumes = head.k === 'send' || (head.k === 'block' && head.imm !== undefined);
      if (!consumes || this.clientRq > 0) choices.push(() => this.#deliverS2C());
    }
    if (this.fsQueue.length > 0 && !this.holdFs) choices.push(() => this.releaseFs(Math.floor(this.r() * this.fsQueue.length)));
    if (choices.length === 0) {
      if ((this.c2s.length > 0 && this.serverRq.length === 0) || (this.s2c.length > 0 && this.clientRq === 0)) this.rnr++;
      return false;
    }
    choices[Math.floor(this.r() * choices.length)]!();
    this.#poll();
    this.#check();
    return true;
  }

  /** Complete file-system work `i` of the queue (tests that hold the file system). */
  releaseFs(i = 0): void {
    const [w] = this.fsQueue.splice(i, 1);
    if (!w) return;
    this.server.handleFsDone(w.token, w.result(), this.now);
    this.#server(pollAll(this.server));
  }

  #deliverC2S(): void {
    const it = this.c2s.shift()!;
    if (it.k !== 'send') return;
    const recvId = this.serverRq.shift()!;
    const msg = it.data ? concat(it.bytes, it.data) : it.bytes;
    this.serverRecvBuf.set(recvId, msg);
    this.server.handleReceive(recvId, msg, this.now);
    this.#server(pollAll(this.server));
    this.#client(pollAll(this.client));
  }

  #deliverS2C(): void {
    const it = this.s2c.shift()!;
    if (it.k === 'write') {
      this.mem.set(it.bytes, it.addr);
      this.server.handleWriteDone(it.token, this.now);
      this.#server(pollAll(this.server));
    } else if (it.k === 'block') {
      this.mem.set(it.bytes, it.addr);
      if (it.imm !== undefined) {
        this.clientRq--;
        const at = this.statusAddr + it.imm * FILE_SLOT_BYTES;
        this.client.handleStatusBlock(it.imm, this.mem.slice(at, at + STATUS_BLOCK_LEN), true, this.now);
      }
    } else {
      this.clientRq--;
      this.client.handleReceive(it.bytes, this.now);
    }
    this.#client(pollAll(this.client));
    this.#server(pollAll(this.server));
  }

  #poll(): void {
    for (const { slot, id } of this.noPolling ? [] : this.client.pollingSlots()) {
      const at = this.statusAddr + slot * FILE_SLOT_BYTES;
      const b = this.mem.subarray(at, at + STATUS_BLOCK_LEN);
      if (sealOf(b) === id) {
        const copy = b.slice();
        b.fill(0);
        this.client.handleStatusBlock(slot, copy, false, this.now);
      }
    }
    this.#client(pollAll(this.client));
    this.#server(pollAll(this.server));
  }

  /** Run until nothing moves (bounded). */
  pump(max = 100_000): number {
    let n = 0;
    this.#client(pollAll(this.client));
    this.#server(pollAll(this.server));
    while (n < max && this.step()) n++;
    return n;
  }

  /** A request through the client core; pumps to completion and returns its result. */
  run(body: Body, o: { interrupt?: boolean; collapse?: boolean; data?: Uint8Array } = { interrupt: true }): Done {
    const id = this.client.request(body, o);
    this.pump();
    const d = this.done.get(id);
    if (!d) throw new Error(`request ${id} (${body.op}) did not complete; failed=${JSON.stringify(this.failed)} violations=${this.violations.join('; ')}`);
    return d;
  }

  tick(ms: number): void {
    this.now += ms;
    this.server.handleTimeout(this.now);
    this.#server(pollAll(this.server));
  }

  /** Inject raw bytes as if the client QP had sent them (hostile client). */
  injectC2S(bytes: Uint8Array): void {
    this.c2s.push({ k: 'send', bytes });
  }
}

export function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const o = new Uint8Array(a.length + b.length);
  o.set(a);
  o.set(b, a.length);
  return o;
}

export const HDR = HDR_LEN;
