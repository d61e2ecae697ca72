// One RDMA connection of the file server (./server.ts): its QP, its core (./server-core.ts),
// the memory it registers once authenticated (receive buffers, staging, a scratch buffer for
// its messages) and the files it holds open, with the file-system work the core asks for.
import { performance } from 'node:perf_hooks';
import { Access } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import { FileStatus } from '../wire/files-spec.js';
import { RESERVE } from './credits.js';
import type { Jail, JailFile } from './jail.js';
import type { OpenFileBudget } from './open-files.js';
import { type FsOp, type FsResult, ServerConnection, type ServerCounters, type ServerLimits, receiveSize } from './server-core.js';
import type { SessionTable } from './sessions.js';

export interface RecvBuf {
  addr: number;
  length: number;
  lkey: number;
  mr: MemoryRegion;
  off: number;
}

/** The wrId of a terminal Send: its completion destroys the connection. */
export const TERMINAL_WR = -1;

/** One RDMA connection: its QP, its core, its memory, its open files. */
export class Conn {
  readonly qp: QueuePair;
  readonly core: ServerConnection;
  /** The limits of its provider (FileServer.limitsFor). */
  readonly limits: ServerLimits;
  readonly pd: ProtectionDomain;
  readonly bufs = new Map<number, RecvBuf>();
  readonly freeBufs: number[] = [];
  recvMrs: MemoryRegion[] = [];
  /** Registered at the first read or list (stagingMr): a session that only dedups never needs it. */
  #staging: MemoryRegion | undefined;
  #released = false;
  scratch: MemoryRegion | undefined;
  readonly files = new Map<number, JailFile>();
  nextHandle = 1;
  nextRecvId = 1;
  preauthSlot: number;
  destroyed = false;
  terminating = false;
  registered = 0;
  /** The login deadline (core/deadline.ts), until the connection authenticates or goes. */
  timer: { clear(): void } | undefined;
  /** Released by the core while its terminal message was in flight. */
  freeOnDestroy = false;
  /** Authenticated and bound to a session. */
  bound = false;
  /** Closed for a newer connection before it authenticated, and waiting to be told why (it counts against no bound). */
  waiting = false;
  /** The server's open files, all connections: each of `files` holds one of it until its close has finished. */
  readonly #budget: OpenFileBudget;

  constructor(srv: { sessions: SessionTable; counters: ServerCounters; openFiles: OpenFileBudget }, pd: ProtectionDomain, qp: QueuePair, preauthSlot: number, limits: ServerLimits) {
    this.#budget = srv.openFiles;
    this.pd = pd;
    this.qp = qp;
    this.preauthSlot = preauthSlot;
    this.limits = limits;
    this.core = new ServerConnection({ limits, sessions: srv.sessions, counters: srv.counters, now: performance.now(), preauthRecvId: 0 });
  }

  /** Its files closed (a Replace put abandoned), its memory deregistered. */
  release(): void {
    for (const f of this.files.values()) void f.close(false).catch(() => undefined).then(() => this.#budget.give());
    this.files.clear();
    for (const mr of this.recvMrs) if (mr.valid) mr.deregister();
    if (this.#staging?.valid) this.#staging.deregister();
    this.#released = true;
    if (this.scratch?.valid) this.scratch.deregister();
    this.recvMrs = [];
    this.registered = 0;
  }

  provisionScratch(): MemoryRegion {
    this.scratch = this.pd.regMr(4096, Access.LocalWrite);
    this.registered += 4096;
    return this.scratch;
  }

  provision(): void {
    const L = this.limits;
    const size = (receiveSize(L) + 63) & ~63;
    const n = L.credits + RESERVE;
    const mr = this.pd.regMr(size * n, Access.LocalWrite);
    this.recvMrs.push(mr);
    this.registered += size * n;
    for (let i = 0; i < n; i++) {
      const id = this.nextRecvId++;
      this.bufs.set(id, { addr: mr.addr + i * size, length: size, lkey: mr.lkey, mr, off: i * size });
      this.freeBufs.push(id);
    }
    if (!this.scratch) this.provisionScratch();
  }

  /**
   * The staging buffers of reads and lists, registered at first use: a registration zero-fills
   * the memory on the NIC while this thread waits, a cost a connection that never reads (a
   * dedup-only session: its bytes go over channels of their own) need not pay at login.
   */
  stagingMr(): MemoryRegion {
    if (this.#staging) return this.#staging;
    // Released: no new memory (a read that was in flight fails as it did on a deregistered region).
    if (this.#released) throw new SabreError(ErrorCode.Closed, 'the connection is released');
    const L = this.limits;
    this.#staging = this.pd.regMr(L.rwDepth * L.maxReadWriteSize, Access.LocalWrite);
    this.registered += L.rwDepth * L.maxReadWriteSize;
    return this.#staging;
  }

  takeBuf(): number {
    const id = this.freeBufs.pop();
    if (id !== undefined) return id;
    // The target rose above what was provisioned: one more buffer.
    const size = (receiveSize(this.limits) + 63) & ~63;
    const mr = this.pd.regMr(size, Access.LocalWrite);
    this.recvMrs.push(mr);
    this.registered += size;
    const nid = this.nextRecvId++;
    this.bufs.set(nid, { addr: mr.addr, length: size, lkey: mr.lkey, mr, off: 0 });
    return nid;
  }

  postBuf(id: number): void {
    const b = this.bufs.get(id)!;
    this.qp.postRecv({ wrId: id, sgList: [{ addr: b.addr, length: b.length, lkey: b.lkey }] });
  }

  async doFs(jail: Jail, w: FsOp): Promise<FsResult> {
    const L = this.limits;
    switch (w.op) {
      case 'open': {
        // The server's cap, all connections (./open-files.ts), before a descriptor is taken.
        if (!this.#budget.take()) return { status: FileStatus.TooManyOpenFiles };
        const o = await jail.open(w.parts, w.access, w.mode, w.fsync).catch((e: unknown) => (this.#budget.give(), Promise.reject(e)));
        if (o.status !== FileStatus.Success || !('file' in o)) {
          this.#budget.give();
          return { status: o.status };
        }
        if (this.#released) {
          // The server closed and freed this connection while the open ran (server.close()
          // waits 2 s): nothing would ever close what it opened, so it is closed now.
          await o.file.close(false).catch(() => undefined);
          this.#budget.give();
          return { status: FileStatus.ShuttingDown };
        }
        const h = this.nextHandle++;
        this.files.set(h, o.file);
        return { status: FileStatus.Success, handle: h, value: o.file.size };
      }
      case 'read': {
        const view = this.stagingMr().buffer.subarray(w.staging * L.maxReadWriteSize, (w.staging + 1) * L.maxReadWriteSize);
        return { status: FileStatus.Success, value: await this.files.get(w.handle)!.read(view, w.length, w.position) };
      }
      case 'readv': {
        const view = this.stagingMr().buffer.subarray(w.staging * L.maxReadWriteSize, (w.staging + 1) * L.maxReadWriteSize);
        const f = this.files.get(w.handle)!;
        const parts: number[] = [];
        let total = 0;
        // In order, and the first short entry (the end of the file) ends it: the entries after
        // it are not read, so the total alone tells the client how much of each came back (a
        // file that shrank or grew between entries cannot make it misplace bytes).
        for (const e of w.entries) {
          const n = parts.length > 0 && parts[parts.length - 1]! < w.entries[parts.length - 1]!.length ? 0
            : await f.read(view.subarray(e.at, e.at + e.length), e.length, e.position);
          parts.push(n);
          total += n;
        }
        return { status: FileStatus.Success, value: total, parts };
      }
      case 'write':
      case 'writev': {
        // A write's data stays in the receive that carried it (held until the request completes).
        const b = this.bufs.get(w.recvId)!;
        const buf = b.mr.buffer.subarray(b.off, b.off + b.length);
        const f = this.files.get(w.handle)!;
        const entries = w.op === 'write' ? [{ position: w.position, length: w.length }] : w.entries;
        let at = w.dataOff;
        let total = 0;
        for (const e of entries) {
          total += await f.write(buf.subarray(at, at + e.length), e.position);
          at += e.length;
        }
        return { status: FileStatus.Success, value: total };
      }
      case 'close': {
        const f = this.files.get(w.handle);
        this.files.delete(w.handle);
        if (!f) return { status: FileStatus.Success };
        try {
          return { status: await f.close(w.commit) };
        } finally {
          this.#budget.give();
        }
      }
      case 'list': {
        const view = this.stagingMr().buffer.subarray(w.staging * L.maxReadWriteSize, w.staging * L.maxReadWriteSize + w.maxBytes);
        const r = await jail.list(w.parts, w.cookie, view);
        return { status: r.status, value: r.bytes, next: r.next };
      }
    }
  }
}
