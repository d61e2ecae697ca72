// The server side of one RDMA connection of the file service, sans-I/O. The shell
// (./server.ts) feeds it received messages, file-system results, RDMA completions and the
// clock; it answers with actions: post or repost receives, Sends, RDMA Writes of data and status
// blocks, file-system work, terminate. No socket, no timer, no fs here: tests drive it directly.
//
// Receive buffers are named by the shell (`recvId`); one is "held" by a request until the
// request completes, so the credits a client holds bound the requests in progress on this
// connection — the server never queues more work than it granted. A held buffer goes back to the
// QP on completion (before the completion is built, so the completion can grant it again) unless
// the credit target was lowered, in which case it is retired.
import { FILE_DIR_ENTRY, FILE_SLOT_BYTES, FileAccess, FileFlag, FileOp, FileStatus } from '../wire/files-spec.js';
import { authenticateFirst, terminalStatus } from './server-auth.js';
import { Credits, RESERVE } from './credits.js';
import { type Body, type FileHeader, HDR_LEN, decodeBody, decodeHeader, encodeToBytes } from './messages.js';
import { checkPath } from './paths.js';
import type { Session, SessionTable } from './sessions.js';
import { CLIENT_OPS, type OpenFile, type Outbound, type Req, openAccessRefused, stagingWrites, writePastSafeEnd } from './server-requests.js';
import type { FsOp, FsResult, ServerAction, ServerCounters, ServerLimits } from './server-types.js';

import { type HasTimeout, Outbox, type PollsActions } from '../core/sans-io.js';
export { DEFAULT_SERVER_LIMITS, PREAUTH_RECEIVE, newServerCounters, receiveSize } from './server-types.js';
export type { FsOp, FsResult, ServerAction, ServerCounters, ServerLimits } from './server-types.js';

export class ServerConnection implements PollsActions<ServerAction>, HasTimeout {
  state: 'authenticating' | 'bound' | 'closing' | 'closed' = 'authenticating';
  readonly limits: ServerLimits;
  readonly credits: Credits;
  readonly counters: ServerCounters;
  session: Session | undefined;
  readonly #actions = new Outbox<ServerAction>();
  readonly #sessions: SessionTable;
  readonly #authDeadline: number;
  #statusAddr = 0;
  #statusRkey = 0;
  #statusSlots = 0;
  /** Receive buffers consumed and not yet released. */
  #held = 0;
  readonly #reqs = new Map<number, Req>();
  readonly #files = new Map<number, OpenFile>();
  #nextFileId = 1;
  #opening = 0;
  readonly #waitStaging: Req[] = [];
  readonly #freeStaging: number[] = [];
  readonly #sendQ: Outbound[] = [];
  readonly #fsPending = new Map<number, { req?: Req; file?: OpenFile; kind: string }>();
  #nextToken = 1;
  /** RDMA Write token → its staging buffer; staging buffer → Writes of it still in flight. */
  readonly #writesInFlight = new Map<number, number>();
  readonly #stagingUse = new Map<number, number>();
  #smallRecv: number | undefined;
  /** Closed for a newer connection before authenticating (evict): the code its refusal carries, and until when it waits for a message to answer. */
  #evicted: { aux: number; until: number } | undefined;

  constructor(o: { limits: ServerLimits; sessions: SessionTable; counters: ServerCounters; now: number; preauthRecvId: number }) {
    this.limits = o.limits;
    this.#sessions = o.sessions;
    this.counters = o.counters;
    this.#authDeadline = o.now + o.limits.authTimeoutMs;
    // One small receive is posted for the AuthenticateRequest, the one message the client may
    // send before any grant (it holds that one implicit credit).
    this.credits = new Credits(o.limits.credits, { send: 0, grantedOut: 1 });
    this.credits.posted = 1;
    this.#smallRecv = o.preauthRecvId;
    for (let i = 0; i < o.limits.rwDepth; i++) this.#freeStaging.push(i);
    o.counters.connections++;
  }

  /** The next action, in order (src/core/sans-io.ts). */
  pollAction(): ServerAction | undefined {
    return this.#actions.poll();
  }

  /** The login deadline while the connection authenticates. */
  pollTimeout(): number | undefined {
    return this.state === 'authenticating' ? this.#evicted?.until ?? this.#authDeadline : undefined;
  }

  handleTimeout(now: number): void {
    if (this.state === 'authenticating' && this.#evicted && now >= this.#evicted.until) {
      this.counters.evictionsUntold++;
      return this.#terminate(FileStatus.SessionLimit, 'closed for a newer connection; nothing came to answer', false);
    }
    if (this.state === 'authenticating' && now >= this.#authDeadline) {
      this.counters.authTimeouts++;
      this.#terminate(FileStatus.NotAuthenticated, 'no AuthenticateRequest in time', false);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Inbound

  /** A receive completed with `b` (a view of the receive buffer, valid during this call). */
  handleReceive(recvId: number, b: Uint8Array, now: number): void {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.#held++;
    if (!this.credits.received()) {
      this.counters.creditOverruns++;
      this.#release(recvId);
      return this.#terminate(FileStatus.CreditOverrun, 'a message arrived without a credit', true);
    }
    const h = decodeHeader(b);
    if (!h.ok) {
      // A malformed message still gives its receive back: otherwise every bad message would
      // silently eat a credit until the connection starves.
      this.counters.malformed++;
      this.#release(recvId);
      // Before authentication that was its one receive: it can no longer authenticate, so it goes.
      if (this.#evicted) this.counters.evictionsUntold++;
      if (this.state === 'authenticating') return this.#terminate(FileStatus.Malformed, 'a malformed message before authentication', true);
      return this.#after();
    }
    const hdr = h.value;
    this.credits.granted(hdr.creditsGranted);
    this.credits.peerTarget = hdr.creditsRequested;
    if (this.#evicted) {
      // Its header granted the credit the refusal needs (an honest client's always does).
      if (this.credits.send > 0) this.counters.evictionsTold++;
      else this.counters.evictionsUntold++;
      this.#release(recvId);
      return this.#terminate(FileStatus.SessionLimit, 'closed for a newer connection before it authenticated', true, this.#evicted.aux);
    }
    if (this.state === 'authenticating') return this.#authenticate(recvId, hdr, b, now);

    if (hdr.opcode === FileOp.Credit || hdr.opcode === FileOp.Cancel || hdr.opcode === FileOp.InterruptRequest) {
      if (b.length !== HDR_LEN) this.counters.malformed++;
      else if (hdr.opcode === FileOp.Credit) this.#credit(hdr);
      else if (hdr.opcode === FileOp.Cancel) this.#cancel(hdr.info);
      else this.#interruptRequest(hdr.info);
      this.#release(recvId);
      return this.#after();
    }
    if (!CLIENT_OPS.has(hdr.opcode) || hdr.requestId === 0 || this.#reqs.has(hdr.requestId) || hdr.slot >= this.#statusSlots) {
      // No slot to answer in, or an id that would confuse the answer: counted and dropped.
      this.counters.malformed++;
      this.#release(recvId);
      return this.#after();
    }
    const body = decodeBody(hdr, b);
    this.counters.requests++;
    const req: Req = {
      id: hdr.requestId, op: hdr.opcode, slot: hdr.slot, flags: hdr.flags, recvId, state: 'queued', cancelled: false, interrupt: false,
      body: body.ok ? body.value : { op: FileOp.Cancel },
    };
    this.#reqs.set(req.id, req);
    if (!body.ok) {
      this.counters.malformed++;
      this.#complete(req, FileStatus.Malformed);
    } else this.#dispatch(req);
    this.#after();
  }

  #authenticate(recvId: number, hdr: FileHeader, b: Uint8Array, now: number): void {
    const r = authenticateFirst(hdr, b, now, { sessions: this.#sessions, counters: this.counters, limits: this.limits, conn: this });
    if (!r.ok) {
      this.#release(recvId);
      return this.#terminate(r.status, r.why, true);
    }
    this.session = r.session;
    this.state = 'bound';
    this.#statusAddr = r.statusAddr;
    this.#statusRkey = r.statusRkey;
    this.#statusSlots = r.statusSlots;
    this.#actions.push({ kind: 'bound', session: r.session });
    // The connection's memory only now (an unauthenticated peer costs one small receive), then
    // the receives, then the answers that grant them.
    this.#actions.push({ kind: 'provision' });
    this.#release(recvId);
    this.#actions.push({ kind: 'post', n: this.credits.target + RESERVE });
    this.credits.posted += this.credits.target + RESERVE;
    this.#queueSend(FileOp.AuthenticateResponse, 0, 0, r.answer);
    this.#queueSend(FileOp.StatusResponse, 0, 0, { op: FileOp.StatusResponse, status: FileStatus.Success, aux: 0, value: 0 });
    this.#after();
  }

  // -------------------------------------------------------------------------------------------
  // Requests

  #dispatch(req: Req): void {
    const b = req.body;
    const L = this.limits;
    switch (b.op) {
      case FileOp.RegisterFile: {
        const p = checkPath(b.path, { allowRoot: false });
        if (!p.ok) {
          if (p.status === FileStatus.PathOutside) this.counters.refusedPath++;
          return this.#complete(req, p.status);
        }
        const refused = openAccessRefused(b.access, L.readOnly);
        if (refused !== undefined) {
          if (refused === FileStatus.ReadOnly) this.counters.refusedReadOnly++;
          return this.#complete(req, refused);
        }
        if (this.#files.size + this.#opening >= L.maxOpenFiles) {
          this.counters.refusedTooManyOpen++;
          return this.#complete(req, FileStatus.TooManyOpenFiles);
        }
        this.#opening++;
        return this.#fs(req, { op: 'open', parts: p.parts, access: b.access, mode: b.mode & 0o666, fsync: L.fsync || (b.access & FileAccess.Fsync) !== 0 });
      }
      case FileOp.Read: {
        const f = this.#file(req, b.fileId, FileAccess.Read);
        if (!f) return;
        if (b.length > L.maxReadWriteSize) return this.#limit(req);
        if (b.length === 0) return this.#complete(req, FileStatus.Success, 0);
        return this.#withStaging(req);
      }
      case FileOp.ReadV: {
        const f = this.#file(req, b.fileId, FileAccess.Read);
        if (!f) return;
        if (b.entries.length > L.maxVectors) return this.#limit(req);
        let total = 0;
        for (const e of b.entries) total += e.length;
        if (total > L.maxReadWriteSize) return this.#limit(req);
        return this.#withStaging(req);
      }
      case FileOp.Write:
      case FileOp.WriteV: {
        if (L.readOnly) {
          this.counters.refusedReadOnly++;
          return this.#complete(req, FileStatus.ReadOnly);
        }
        if ((b.op === FileOp.WriteV && !(req.flags & FileFlag.Collapse)) || writePastSafeEnd(b)) return this.#complete(req, FileStatus.InvalidParameter);
        const f = this.#file(req, b.fileId, FileAccess.Write);
        if (!f) return;
        if (b.op === FileOp.WriteV && b.entries.length > L.maxVectors) return this.#limit(req);
        if ((b.op === FileOp.Write ? b.length : b.dataLen) > L.maxWriteSize) return this.#limit(req);
        f.inflight++;
        req.fileId = b.fileId;
        if (b.op === FileOp.Write) return this.#fs(req, { op: 'write', handle: f.handle, recvId: req.recvId, dataOff: b.dataOff, length: b.length, position: b.offset });
        return this.#fs(req, { op: 'writev', handle: f.handle, recvId: req.recvId, dataOff: b.dataOff, entries: b.entries.map((e) => ({ position: e.offset, length: e.length })) });
      }
      case FileOp.Close: {
        const f = this.#files.get(b.fileId);
        if (!f || f.closing) {
          this.counters.refusedHandle++;
          return this.#complete(req, FileStatus.InvalidHandle);
        }
        f.closing = true;
        f.discard = b.discard === 1;
        req.fileId = b.fileId;
        return this.#closeWhenIdle(req, f);
      }
      case FileOp.List: {
        const p = checkPath(b.path, { allowRoot: true });
        if (!p.ok) {
          if (p.status === FileStatus.PathOutside) this.counters.refusedPath++;
          return this.#complete(req, p.status);
        }
        if (b.sinkLength > L.maxReadWriteSize || b.sinkLength < FILE_DIR_ENTRY.size + 8) return this.#limit(req);
        req.parts = p.parts;
        return this.#withStaging(req);
      }
      default:
        return this.#complete(req, FileStatus.InvalidParameter);
    }
  }

  #limit(req: Req): void {
    this.counters.refusedLimit++;
    this.#complete(req, FileStatus.LimitExceeded);
  }

  #file(req: Req, fileId: number, access: number): OpenFile | undefined {
    const f = this.#files.get(fileId);
    if (!f || f.closing || (f.access & access) === 0) {
      this.counters.refusedHandle++;
      this.#complete(req, FileStatus.InvalidHandle);
      return undefined;
    }
    return f;
  }

  #withStaging(req: Req): void {
    const s = this.#freeStaging.pop();
    if (s === undefined) {
      this.#waitStaging.push(req);
      return;
    }
    this.#startTransfer(req, s);
  }

  #startTransfer(req: Req, staging: number): void {
    req.staging = staging;
    const b = req.body;
    if (b.op === FileOp.List) return this.#fs(req, { op: 'list', parts: req.parts!, cookie: b.cookie, staging, maxBytes: b.sinkLength });
    const f = this.#files.get((b as { fileId: number }).fileId);
    if (!f || f.closing) {
      this.#freeStagingBuffer(staging);
      req.staging = undefined;
      this.counters.refusedHandle++;
      return this.#complete(req, FileStatus.InvalidHandle);
    }
    f.inflight++;
    req.fileId = (b as { fileId: number }).fileId;
    if (b.op === FileOp.Read) return this.#fs(req, { op: 'read', handle: f.handle, staging, length: b.length, position: b.offset });
    if (b.op === FileOp.ReadV) {
      let at = 0;
      const entries = b.entries.map((e) => {
        const x = { position: e.offset, length: e.length, at };
        at += e.length;
        return x;
      });
      return this.#fs(req, { op: 'readv', handle: f.handle, staging, entries });
    }
  }

  #fs(req: Req, work: FsOp): void {
    req.state = 'fs';
    const token = this.#nextToken++;
    this.#fsPending.set(token, { req, kind: work.op });
    this.#actions.push({ kind: 'fs', token, work });
  }

  #closeWhenIdle(req: Req | undefined, f: OpenFile, commit = true): void {
    if (f.inflight > 0) return; // fsDone of the last operation comes back here
    const token = this.#nextToken++;
    if (req) req.state = 'fs';
    this.#fsPending.set(token, { ...(req ? { req } : {}), file: f, kind: 'close' });
    this.#actions.push({ kind: 'fs', token, work: { op: 'close', handle: f.handle, commit: commit && !f.discard && this.state === 'bound' } });
  }

  /** The shell finished file-system work `token`. */
  handleFsDone(token: number, r: FsResult, _now: number): void {
    const p = this.#fsPending.get(token);
    if (!p) return;
    this.#fsPending.delete(token);
    const req = p.req;
    if (p.kind === 'close') {
      for (const [id, f] of this.#files) if (f === p.file) this.#files.delete(id);
      if (req) this.#complete(req, r.status);
      return this.#after();
    }
    if (!req) return this.#after();
    const b = req.body;
    if (p.kind === 'open') {
      this.#opening--;
      if (r.status === FileStatus.Success && r.handle !== undefined) {
        this.counters.filesOpened++;
        if (this.state !== 'bound' || req.cancelled) {
          // Opened while we were closing or after a Cancel: close it again at once.
          const f: OpenFile = { handle: r.handle, access: 0, inflight: 0, closing: true };
          this.#files.set(this.#nextFileId++, f);
          this.#closeWhenIdle(undefined, f, false);
          return this.#complete(req, FileStatus.Cancelled);
        }
        const id = this.#nextFileId++;
        this.#files.set(id, { handle: r.handle, access: (b as { access: number }).access, inflight: 0, closing: false });
        this.#complete(req, FileStatus.Success, r.value ?? 0, id);
      } else {
        if (r.status === FileStatus.PathOutside) this.counters.refusedPath++;
        if (r.status === FileStatus.LinkedFile) this.counters.refusedLinked++;
        this.#complete(req, r.status);
      }
      return this.#after();
    }
    const f = req.fileId !== undefined ? this.#files.get(req.fileId) : undefined;
    if (f) f.inflight--;
    if (p.kind === 'write' || p.kind === 'writev') {
      if (r.status === FileStatus.Success) this.counters.bytesWritten += r.value ?? 0;
      this.#complete(req, r.status, r.value ?? 0);
    } else {
      // read, readv, list: the bytes are in the staging buffer.
      const staging = req.staging!;
      if (req.cancelled || this.state !== 'bound' || r.status !== FileStatus.Success) {
        this.#freeStagingBuffer(staging);
        req.staging = undefined;
        if (req.cancelled) this.counters.cancelled++;
        this.#complete(req, req.cancelled ? FileStatus.Cancelled : r.status);
      } else {
        const n = r.value ?? 0;
        const writes = stagingWrites(b, n, r.parts, (req.flags & FileFlag.Collapse) !== 0);
        for (const w of writes) {
          const token = this.#nextToken++;
          this.#writesInFlight.set(token, staging);
          this.#actions.push({ kind: 'write', staging, ...w, token });
        }
        if (b.op !== FileOp.List) this.counters.bytesRead += n;
        // The staging buffer is free once every Write of it completed; rc ordering places the
        // data before the status block that follows.
        if (writes.length === 0) this.#freeStagingBuffer(staging);
        else this.#stagingUse.set(staging, writes.length);
        req.staging = undefined;
        this.#complete(req, FileStatus.Success, n, b.op === FileOp.List ? r.next ?? 0 : 0);
      }
    }
    if (f?.closing && f.inflight === 0) {
      const closer = [...this.#reqs.values()].find((x) => x.op === FileOp.Close && x.fileId !== undefined && this.#files.get(x.fileId) === f && x.state === 'queued');
      this.#closeWhenIdle(closer, f, this.state === 'bound');
    }
    this.#after();
  }

  /** An RDMA Write of staging data (action 'write') completed. */
  handleWriteDone(token: number, _now: number): void {
    const s = this.#writesInFlight.get(token);
    if (s === undefined) return;
    this.#writesInFlight.delete(token);
    const left = (this.#stagingUse.get(s) ?? 1) - 1;
    if (left > 0) this.#stagingUse.set(s, left);
    else {
      this.#stagingUse.delete(s);
      this.#freeStagingBuffer(s);
    }
    this.#after();
  }

  #freeStagingBuffer(s: number): void {
    const next = this.#waitStaging.shift();
    if (next && this.state === 'bound') this.#startTransfer(next, s);
    else this.#freeStaging.push(s);
  }

  #cancel(target: number): void {
    const req = this.#reqs.get(target);
    if (!req || req.state === 'done') return;
    if (req.state === 'queued') {
      const i = this.#waitStaging.indexOf(req);
      if (i >= 0) {
        this.#waitStaging.splice(i, 1);
        this.counters.cancelled++;
        this.#complete(req, FileStatus.Cancelled);
      } else req.cancelled = true;
      return;
    }
    // In the file system: a read's data is dropped when it comes back; a write or an open that
    // already happened completes with its result.
    req.cancelled = true;
  }

  #interruptRequest(target: number): void {
    this.counters.interruptRequests++;
    const req = this.#reqs.get(target);
    if (req && req.state !== 'done') {
      req.interrupt = true;
      return;
    }
    // Already completed: its block is in the slot; say so by Send all the same.
    this.#queueSend(FileOp.InterruptResponse, target, target, { op: FileOp.InterruptResponse, status: FileStatus.NotFound, aux: 0, value: 0 });
  }

  #credit(hdr: FileHeader): void {
    if (hdr.info !== 1) return; // a grant only: its header did the work
    this.counters.creditsRetired++;
    this.#queueSend(FileOp.StatusResponse, 0, 0, { op: FileOp.StatusResponse, status: FileStatus.Success, aux: 0, value: 0 });
  }

  /**
   * Change the number of credits this connection's client may hold. Lowering sends
   * DeltaCredit(−N): the client retires N credits with N Credit messages (each answered with a
   * StatusResponse), and their receives are not reposted. The client always keeps one.
   */
  setCreditTarget(n: number): void {
    if (this.state !== 'bound') return;
    const c = this.credits;
    const want = Math.max(2, Math.min(n, 0xffff));
    if (want === c.target) return;
    if (want > c.target) {
      const more = want - c.target;
      c.target = want;
      this.#actions.push({ kind: 'post', n: more });
      c.posted += more;
      this.#queueSend(FileOp.DeltaCredit, 0, more, { op: FileOp.DeltaCredit });
    } else {
      const drop = Math.min(c.target - want, Math.max(0, c.grantedOut - 1));
      c.target = want;
      if (drop > 0) this.#queueSend(FileOp.DeltaCredit, 0, -drop >>> 0, { op: FileOp.DeltaCredit });
    }
    this.#after();
  }

  // -------------------------------------------------------------------------------------------
  // Outbound

  #complete(req: Req, status: number, value = 0, aux = 0): void {
    if (req.state === 'done') return;
    req.state = 'done';
    this.#reqs.delete(req.id);
    // The receive first: the completion can then grant it back.
    this.#release(req.recvId);
    if (this.state !== 'bound') return;
    const blockAddr = this.#statusAddr + req.slot * FILE_SLOT_BYTES;
    const rkey = this.#statusRkey;
    const body: Body = { op: FileOp.Completion, status, aux, value, seal: req.id };
    const hdr = (grant: number, requested: number): FileHeader => ({
      opcode: FileOp.Completion, flags: 0, creditsRequested: requested, creditsGranted: grant, slot: req.slot, requestId: req.id, info: req.op,
    });
    if (req.flags & FileFlag.Interrupt) {
      this.#sendQ.push({
        build: (g, rq) => ({ kind: 'block', bytes: encodeToBytes(hdr(g, rq), body), remoteAddr: blockAddr, rkey, imm: req.slot }),
      });
    } else {
      const bytes = encodeToBytes(hdr(this.credits.grant(), this.credits.target), body);
      this.#actions.push({ kind: 'block', bytes, remoteAddr: blockAddr, rkey });
      if (req.interrupt) this.#queueSend(FileOp.InterruptResponse, req.id, req.id, { op: FileOp.InterruptResponse, status, aux, value });
    }
  }

  #queueSend(opcode: number, requestId: number, info: number, body: Body, flags = 0, last = false): void {
    this.#sendQ.push({
      build: (g, rq) => ({ kind: 'send', bytes: encodeToBytes({ opcode, flags, creditsRequested: rq, creditsGranted: g, slot: 0, requestId, info }, body), ...(last ? { last } : {}) }),
    });
  }

  /** Done with a receive buffer: back to the QP while under target, else retired. */
  #release(recvId: number): void {
    this.#held--;
    if (recvId === this.#smallRecv) {
      this.#smallRecv = undefined;
      this.#actions.push({ kind: 'retire', recvId });
      return;
    }
    const c = this.credits;
    if (c.posted + this.#held < c.target + RESERVE && this.state !== 'closing' && this.state !== 'closed') {
      c.posted++;
      this.#actions.push({ kind: 'repost', recvId });
    } else this.#actions.push({ kind: 'retire', recvId });
  }

  /** Send what the credits allow, then grant on our own if the client is about to starve. */
  #after(): void {
    if (this.state === 'closed') return;
    const c = this.credits;
    while (this.#sendQ.length > 0) {
      const g = c.spend();
      if (g < 0) break;
      this.#actions.push(this.#sendQ.shift()!.build(g, c.target));
    }
    // Answers wait for credits only the client grants, while its failed requests get credits back
    // by RDMA Write: past what an honest client's requests and retirements queue, it goes.
    if (this.#sendQ.length > 4 * (c.posted + this.#held + RESERVE) + 8) {
      this.counters.sendQueueOverruns++;
      return this.#terminate(FileStatus.LimitExceeded, 'answers are asked for but no credit is granted to send them', false);
    }
    if (this.state === 'bound' && this.#sendQ.length === 0 && c.grantDue() && c.canSpend()) {
      this.counters.grantOnly++;
      const g = c.spend();
      this.#actions.push({ kind: 'send', bytes: encodeToBytes({ opcode: FileOp.DeltaCredit, flags: 0, creditsRequested: c.target, creditsGranted: g, slot: 0, requestId: 0, info: 0 }, { op: FileOp.DeltaCredit }) });
    }
    if (this.state === 'closing') this.#maybeReleased();
  }

  /**
   * Close the connection, not yet authenticated, for a newer one (the server's admission, its
   * flood defence). It holds no credit to be told with, and the client may not receive a message
   * it granted none for: it waits until `until` (at most its login deadline) for its
   * AuthenticateRequest, whose header grants one, and is answered StatusResponse(SessionLimit,
   * Terminate) with `aux` (FILE_EVICTIONS' code) instead of being authenticated.
   */
  evict(aux: number, until: number): void {
    if (this.state !== 'authenticating' || this.#evicted) return;
    this.#evicted = { aux, until: Math.min(until, this.#authDeadline) };
  }

  #terminate(status: number, reason: string, tell: boolean, aux = 0): void {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.counters.terminated++;
    // A last StatusResponse with the Terminate flag when a credit allows it: the client learns why.
    if (tell && this.credits.send > 0) {
      this.credits.send--;
      this.#actions.push({ kind: 'send', last: true, bytes: terminalStatus(status, aux) });
    }
    this.#actions.push({ kind: 'terminate', reason, status });
    this.close();
  }

  /**
   * The connection is going away (terminated, QP error, the session's pipe closed): queued work
   * is dropped, file-system work in flight is waited for, open files are closed (a Replace put
   * never reaches its name), then 'released'.
   */
  close(): void {
    if (this.state === 'closing' || this.state === 'closed') return;
    const wasBound = this.state === 'bound';
    this.state = 'closing';
    if (wasBound && this.session) this.#sessions.unbind(this.session, this);
    this.#sendQ.length = 0;
    for (const r of this.#waitStaging.splice(0)) this.#reqs.delete(r.id);
    for (const r of this.#reqs.values()) if (r.state === 'queued') this.#reqs.delete(r.id);
    for (const f of this.#files.values()) {
      if (!f.closing) {
        f.closing = true;
        this.#closeWhenIdle(undefined, f, false);
      }
    }
    this.#maybeReleased();
  }

  #maybeReleased(): void {
    if (this.state !== 'closing') return;
    for (const f of this.#files.values()) if (f.inflight === 0 && ![...this.#fsPending.values()].some((p) => p.file === f)) this.#closeWhenIdle(undefined, f, false);
    if (this.#fsPending.size > 0) return;
    this.state = 'closed';
    this.#actions.push({ kind: 'released' });
  }
}
