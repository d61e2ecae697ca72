// The file client: file operations on a session with a file server. The session
// (./client-session.ts, opened by ./client-connect.ts) is the authenticated RDMA connection and
// its request machinery; here each operation becomes requests: reads answered by the server's
// RDMA Writes into registered sinks, writes carried by Sends from registered buffers. Whole-file
// get and put are in ./client-transfer.ts.
//
//   const c = await FileClient.connect('10.0.0.5:7000', { token, transport: 'udp' });
//   const f = await c.open('data/x.bin');                 // { id, size }
//   const bytes = await c.read(f, 0, 4096);
//   await c.close(f); await c.end();
import { setMaxListeners } from 'node:events';
import { FileAccess, FileOp, FileStatus } from '../wire/files-spec.js';
import { type ConnectOptions, openSession, pipelineOf } from './client-connect.js';
import type { ClientConnection, NegotiatedLimits } from './client-core.js';
import type { ClientSession } from './client-session.js';
import { type TransferSide, getDedup, getFile, putDedup, putFile } from './client-transfer.js';
import { checkData, checkFile, checkPieces, checkPosition, checkReadLength, refused } from './client-args.js';
import type { OpenOptions, OpOptions, RemoteFile, TransferResult } from './client-types.js';
import { type DirEntry, MAX_LIST_ENTRIES, decodeDirEntries } from './dirents.js';
import type { Provider } from './server.js';
import { FileError, LocalCode, statusCode } from './status.js';

export type { ConnectOptions } from './client-connect.js';
export type { OpenOptions, OpOptions, RemoteFile, TransferResult } from './client-types.js';
export { fitToSegments } from './client-connect.js';

const FLAG_BITS: Record<NonNullable<OpenOptions['flags']>, number> = {
  r: FileAccess.Read,
  'r+': FileAccess.Read | FileAccess.Write,
  w: FileAccess.Write | FileAccess.Create | FileAccess.Truncate,
  wx: FileAccess.Write | FileAccess.Create | FileAccess.Exclusive,
  replace: FileAccess.Write | FileAccess.Create | FileAccess.Replace,
};

/** A count of bytes the server reports for a request of `asked` bytes: more is a protocol error. */
function overstated(n: number, asked: number, what: string): number {
  if (n > asked) throw new FileError(LocalCode.ProtocolError, `${what}: the server reports ${n} bytes for ${asked} asked`);
  return n;
}

export class FileClient {
  readonly transport: Provider;
  readonly limits: NegotiatedLimits;
  readonly server: { host: string; port: number };
  readonly #s: ClientSession;
  readonly #opts: ConnectOptions;
  /** What get and put use of this client. */
  readonly #side: TransferSide;

  private constructor(s: ClientSession, opts: ConnectOptions) {
    this.#s = s;
    this.#opts = opts;
    this.transport = s.transport;
    this.limits = s.limits;
    this.server = s.server;
    this.#side = {
      transport: s.transport,
      session: s,
      pipeline: () => this.pipeline,
      open: (path, o) => this.open(path, o),
      close: (f, o) => this.close(f, o),
      readChunk: (f, position, length, take, o) => this.#readChunk(f, position, length, take, o),
      writeChunk: (f, position, length, fill, o) => this.#writeChunk(f, position, length, fill, o),
    };
  }

  /**
   * Connect to the file server at `target` ('host:port' of its control pipe): prove the token,
   * negotiate a provider, connect and authenticate the RDMA connection.
   */
  static async connect(target: string | { host: string; port: number }, opts: ConnectOptions): Promise<FileClient> {
    return new FileClient(await openSession(target, opts), opts);
  }

  /**
   * The pipeline of get and put: `sinks` reads and `writeBuffers` writes in flight, cut at
   * `readChunk` / `writeChunk` bytes (the negotiated maxima fitted to the device's segment size).
   */
  get pipeline(): { sinks: number; writeBuffers: number; readChunk: number; writeChunk: number } {
    return pipelineOf(this.#opts, this.transport, this.limits as NegotiatedLimits | undefined, this.#s.mss);
  }

  #ok(d: { status: number }, what: string): void {
    if (d.status !== FileStatus.Success) throw FileError.of(d.status, what);
  }

  /** Open (register) `path`, relative to the served directory. */
  async open(path: string, o: OpenOptions = {}): Promise<RemoteFile> {
    const flags = o.flags ?? 'r';
    let access = FLAG_BITS[flags];
    if (access === undefined) throw new FileError('ERR_FILE_INVALID_PARAMETER', `unknown open flags '${flags}'`);
    if (o.fsync) access |= FileAccess.Fsync;
    const d = await this.#s.request({ op: FileOp.RegisterFile, access, mode: o.mode ?? 0o644, path }, `open ${path}`);
    this.#ok(d, `open ${path}`);
    return Object.freeze({ id: d.aux, path, size: d.value });
  }

  /**
   * Close `f`; for a 'replace' open this is when the file appears under its name — or, with
   * `discard`, when its temporary is thrown away and the name left as it was. A file closes once:
   * every later call (at once, or after) returns the first call's promise, whose `discard` counts.
   */
  close(f: RemoteFile, o: { discard?: boolean } = {}): Promise<void> {
    try {
      checkFile(f, 'close');
    } catch (e) {
      return Promise.reject(e);
    }
    let closing = this.#closing.get(f);
    if (!closing) {
      closing = this.#close(f, o.discard === true);
      this.#closing.set(f, closing);
    }
    return closing;
  }

  /** Each file's close: a second Close of its id would only fail at the server (the id is gone). */
  readonly #closing = new WeakMap<RemoteFile, Promise<void>>();

  async #close(f: RemoteFile, discard: boolean): Promise<void> {
    const d = await this.#s.request({ op: FileOp.Close, fileId: f.id, discard: discard ? 1 : 0 }, `close ${f.path}`);
    this.#ok(d, `close ${f.path}`);
  }

  /**
   * Cancel an operation this client started (the promise read / readv / write / writev / get /
   * put returned): its requests still waiting are dropped, those at the server are cancelled
   * there (a read in progress drops its data), and the promise rejects with
   * ERR_FILE_CANCELLED — or settles with its result if it was too late. False: not ours, or done.
   */
  cancel(op: Promise<unknown>): boolean {
    const ac = this.#controllers.get(op);
    if (!ac || ac.signal.aborted) return false;
    ac.abort();
    return true;
  }

  readonly #controllers = new WeakMap<Promise<unknown>, AbortController>();

  /** Run `fn` with a signal that aborts on the caller's signal or on cancel(promise). */
  #track<T>(o: { signal?: AbortSignal }, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const ac = new AbortController();
    // One listener per request in flight (a get keeps dozens): not a leak.
    setMaxListeners(0, ac.signal);
    const user = o.signal;
    if (user?.aborted) ac.abort();
    else if (user) {
      // One listener on the caller's signal however many operations share it.
      let set = this.#bySignal.get(user);
      if (!set) {
        const s = new Set<AbortController>();
        set = s;
        this.#bySignal.set(user, s);
        user.addEventListener('abort', () => {
          for (const x of s) x.abort();
        }, { once: true });
      }
      set.add(ac);
    }
    const p = fn(ac.signal);
    this.#controllers.set(p, ac);
    const done = (): void => {
      this.#controllers.delete(p);
      if (user) this.#bySignal.get(user)?.delete(ac);
    };
    p.then(done, done);
    return p;
  }

  readonly #bySignal = new WeakMap<AbortSignal, Set<AbortController>>();

  /** Read up to `length` bytes at `position` (fewer at the end of the file). */
  read(f: RemoteFile, position: number, length: number, o: OpOptions = {}): Promise<Uint8Array> {
    const bad = refused(() => {
      checkFile(f, 'read');
      checkPosition(position, 'read');
      checkReadLength(position, length, 'read');
    });
    if (bad) return bad;
    return this.#track(o, (signal) => this.#read(f, position, length, { ...o, signal }));
  }

  async #read(f: RemoteFile, position: number, length: number, o: OpOptions): Promise<Uint8Array> {
    const out = new Uint8Array(length);
    const n = await this.readInto(f, position, out, o);
    return n === length ? out : out.slice(0, n);
  }

  /** Read into `target` from `position`; returns the bytes read. Large reads go as several requests. */
  async readInto(f: RemoteFile, position: number, target: Uint8Array, o: OpOptions = {}): Promise<number> {
    checkFile(f, 'readInto');
    checkPosition(position, 'readInto');
    checkData(position, target, 'readInto');
    this.#s.check();
    const max = this.pipeline.readChunk;
    const parts: Promise<number>[] = [];
    for (let at = 0; at < target.length; at += max) {
      const len = Math.min(max, target.length - at);
      parts.push(this.#readChunk(f, position + at, len, (view, n) => target.set(view.subarray(0, n), at), o));
    }
    let total = 0;
    for (const [i, n] of (await Promise.all(parts)).entries()) {
      total += n;
      if (n < Math.min(max, target.length - i * max)) break;
    }
    return total;
  }

  /** One read of at most maxReadWriteSize through a leased sink; `take` sees the sink before it is reused. */
  async #readChunk(f: RemoteFile, position: number, length: number, take: (view: Uint8Array, n: number) => void | Promise<void>, o: OpOptions): Promise<number> {
    const s = await this.#s.sinkPool.acquire();
    try {
      const max = this.#s.limits.maxReadWriteSize;
      const d = await this.#s.request({ op: FileOp.Read, fileId: f.id, length, offset: position, sinkAddr: this.#s.sinks!.addr + s * max, sinkRkey: this.#s.sinks!.rkey }, `read ${f.path}`, o);
      this.#ok(d, `read ${f.path}`);
      overstated(d.value, length, `read ${f.path}`);
      await take(this.#s.sinks!.buffer.subarray(s * max, s * max + d.value), d.value);
      return d.value;
    } finally {
      this.#s.sinkPool.release(s);
    }
  }

  /**
   * Vectored read: one request, the server RDMA-writes each piece. `collapse` (default true):
   * the pieces land back to back in one sink run.
   */
  readv(f: RemoteFile, pieces: { position: number; length: number }[], o: OpOptions & { collapse?: boolean } = {}): Promise<Uint8Array[]> {
    const bad = refused(() => {
      checkFile(f, 'readv');
      checkPieces(pieces, 'readv', (p: { position: number; length: number }) => checkReadLength(p.position, p.length, 'readv'));
    });
    if (bad) return bad;
    return this.#track(o, (signal) => this.#readv(f, pieces, { ...o, signal }));
  }

  async #readv(f: RemoteFile, pieces: { position: number; length: number }[], o: OpOptions & { collapse?: boolean }): Promise<Uint8Array[]> {
    this.#s.check();
    const max = this.#s.limits.maxReadWriteSize;
    const total = pieces.reduce((a, p) => a + p.length, 0);
    if (pieces.length === 0 || pieces.length > this.#s.limits.maxVectors || total > max) {
      throw new FileError(statusCode(FileStatus.LimitExceeded), `readv of ${pieces.length} pieces, ${total} bytes exceeds the server's ${this.#s.limits.maxVectors} pieces / ${max} bytes`, FileStatus.LimitExceeded);
    }
    const collapse = o.collapse ?? true;
    const s = await this.#s.sinkPool.acquire();
    try {
      const base = this.#s.sinks!.addr + s * max;
      let at = 0;
      const entries = pieces.map((p) => {
        const e = { offset: p.position, length: p.length, sinkAddr: collapse ? 0 : base + at };
        at += p.length;
        return e;
      });
      const d = await this.#s.request({ op: FileOp.ReadV, fileId: f.id, sinkAddr: collapse ? base : 0, sinkRkey: this.#s.sinks!.rkey, entries }, `readv ${f.path}`, { ...o, collapse });
      this.#ok(d, `readv ${f.path}`);
      overstated(d.value, total, `readv ${f.path}`);
      const view = this.#s.sinks!.buffer.subarray(s * max, s * max + total);
      // The server reads the pieces in order and stops at the first short one (the end of the
      // file as it is now, not as it was at open): `value` bytes fill the pieces in order, and
      // the rest of the sink — whatever an earlier request left there — is never handed out.
      let off = 0;
      let left = d.value;
      return pieces.map((p) => {
        const n = Math.min(p.length, left);
        left -= n;
        const piece = view.slice(off, off + n);
        off += p.length;
        return piece;
      });
    } finally {
      this.#s.sinkPool.release(s);
    }
  }

  /** Write `data` at `position` (split into Sends of at most maxWriteSize); returns the bytes written. */
  write(f: RemoteFile, position: number, data: Uint8Array, o: OpOptions = {}): Promise<number> {
    const bad = refused(() => {
      checkFile(f, 'write');
      checkPosition(position, 'write');
      checkData(position, data, 'write');
    });
    if (bad) return bad;
    return this.#track(o, (signal) => this.#write(f, position, data, { ...o, signal }));
  }

  async #write(f: RemoteFile, position: number, data: Uint8Array, o: OpOptions): Promise<number> {
    this.#s.check();
    const max = this.pipeline.writeChunk;
    const parts: Promise<number>[] = [];
    for (let at = 0; at < data.length || (at === 0 && data.length === 0); at += max) {
      const piece = data.subarray(at, Math.min(data.length, at + max));
      parts.push(this.#writeChunk(f, position + at, piece.length, (view) => view.set(piece), o));
      if (data.length === 0) break;
    }
    return (await Promise.all(parts)).reduce((a, b) => a + b, 0);
  }

  async #writeChunk(f: RemoteFile, position: number, length: number, fill: (view: Uint8Array) => void | Promise<void>, o: OpOptions): Promise<number> {
    const b = await this.#s.dataPool.acquire();
    let sent = false;
    try {
      const max = this.#s.limits.maxWriteSize;
      await fill(this.#s.data!.buffer.subarray(b * max, b * max + length));
      sent = true;
      // The buffer goes back to the pool when the Send completes (see #onWc).
      const d = await this.#s.request({ op: FileOp.Write, fileId: f.id, offset: position, length, dataOff: 0 }, `write ${f.path}`, { ...o, data: { buf: b, length } });
      this.#ok(d, `write ${f.path}`);
      return overstated(d.value, length, `write ${f.path}`);
    } finally {
      if (!sent) this.#s.dataPool.release(b);
    }
  }

  /** Vectored write: the pieces are gathered into one Send (the Collapse flag). */
  writev(f: RemoteFile, pieces: { position: number; data: Uint8Array }[], o: OpOptions = {}): Promise<number> {
    const bad = refused(() => {
      checkFile(f, 'writev');
      checkPieces(pieces, 'writev', (p: { position: number; data: Uint8Array }) => checkData(p.position, p.data, 'writev'));
    });
    if (bad) return bad;
    return this.#track(o, (signal) => this.#writev(f, pieces, { ...o, signal }));
  }

  async #writev(f: RemoteFile, pieces: { position: number; data: Uint8Array }[], o: OpOptions): Promise<number> {
    this.#s.check();
    const total = pieces.reduce((a, p) => a + p.data.length, 0);
    if (pieces.length === 0 || pieces.length > this.#s.limits.maxVectors || total > this.#s.limits.maxWriteSize) {
      throw new FileError(statusCode(FileStatus.LimitExceeded), `writev of ${pieces.length} pieces, ${total} bytes exceeds the server's ${this.#s.limits.maxVectors} pieces / ${this.#s.limits.maxWriteSize} bytes`, FileStatus.LimitExceeded);
    }
    const b = await this.#s.dataPool.acquire();
    const max = this.#s.limits.maxWriteSize;
    const view = this.#s.data!.buffer.subarray(b * max, b * max + total);
    let at = 0;
    for (const p of pieces) {
      view.set(p.data, at);
      at += p.data.length;
    }
    const d = await this.#s.request({ op: FileOp.WriteV, fileId: f.id, entries: pieces.map((p) => ({ offset: p.position, length: p.data.length })), dataOff: 0, dataLen: total },
      `writev ${f.path}`, { ...o, collapse: true, data: { buf: b, length: total } });
    this.#ok(d, `writev ${f.path}`);
    return overstated(d.value, total, `writev ${f.path}`);
  }

  /** The entries of a directory (default: the served directory itself), all pages. */
  async list(path = '', o: OpOptions = {}): Promise<DirEntry[]> {
    this.#s.check();
    const out: DirEntry[] = [];
    let cookie = 0;
    const s = await this.#s.sinkPool.acquire();
    try {
      const max = this.#s.limits.maxReadWriteSize;
      const len = Math.min(max, 256 * 1024);
      do {
        const d = await this.#s.request({ op: FileOp.List, cookie, sinkLength: len, sinkAddr: this.#s.sinks!.addr + s * max, sinkRkey: this.#s.sinks!.rkey, path }, `ls ${path || '/'}`, o);
        this.#ok(d, `ls ${path || '/'}`);
        const page = decodeDirEntries(this.#s.sinks!.buffer.subarray(s * max, s * max + overstated(d.value, len, `ls ${path || '/'}`)));
        if (typeof page === 'string') throw new FileError(LocalCode.ProtocolError, `ls ${path || '/'}: ${page}`);
        out.push(...page);
        // The server's cookies must make progress: a page that goes on has entries and a later
        // cookie, and no directory lists more than the server's own bound, so a server cannot
        // keep this loop (and `out`) going for good.
        if (d.aux !== 0 && (d.aux <= cookie || page.length === 0 || out.length > MAX_LIST_ENTRIES)) {
          throw new FileError(LocalCode.ProtocolError, `ls ${path || '/'}: the server's listing does not progress (cookie ${cookie} -> ${d.aux}, ${page.length} entries, ${out.length} in all)`);
        }
        cookie = d.aux;
      } while (cookie !== 0);
      return out;
    } finally {
      this.#s.sinkPool.release(s);
    }
  }

  /** Download `remote` into the local file `local` (written to `local`.part, renamed at the end). */
  get(remote: string, local: string, o: { onProgress?: (done: number, total: number) => void; signal?: AbortSignal; dedup?: boolean } = {}): Promise<TransferResult> {
    if (o.dedup) return this.#track(o, () => getDedup(this.#side, remote, local));
    return this.#track(o, (signal) => getFile(this.#side, remote, local, { ...o, signal }));
  }

  /** Upload the local file `local` to `remote` (a Replace open: the name appears complete or not at all). */
  put(local: string, remote: string, o: { fsync?: boolean; onProgress?: (done: number, total: number) => void; signal?: AbortSignal; dedup?: boolean } = {}): Promise<TransferResult> {
    if (o.dedup) return this.#track(o, () => putDedup(this.#side, local, remote, o.fsync ?? false));
    return this.#track(o, (signal) => putFile(this.#side, local, remote, { ...o, signal }));
  }

  stats(): ClientConnection['counters'] & { outstanding: number; credits: number } {
    return this.#s.stats();
  }

  /** Close the RDMA connection and the pipe (the server frees the session). */
  end(): Promise<void> {
    return this.#s.end();
  }
}
