// The RDMA connections of the file server (./server.ts): the cm listener of each device, which
// connections get in (./admission.ts, with the preauth receive pool), and the shell that carries
// out each connection's core actions (./server-core.ts, ./server-conn.ts) with the verbs API and
// node:fs through the jail.
import { peerDeadline } from '../core/deadline.js';
import { performance } from 'node:perf_hooks';
// The verbs and cm API (what src/index.ts exports), from their modules: the file service sits above cm and verbs.
import { type CmListener, connectionInfo, listen } from '../cm/index.js';
import { Access, Opcode, WcOpcode, WcStatus } from '../core/enums.js';
import { listenerRefusal } from '../core/errors.js';
import type { WorkCompletion } from '../core/work.js';
import type { CompletionQueue } from '../verbs/cq.js';
import { driveCq } from '../verbs/cq-driver.js';
import type { Device } from '../verbs/device.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import { cmRejectFor, evictionCode, FILE_SERVICE } from '../wire/files-spec.js';
import { RESERVE } from './credits.js';
import { type Jail, statusOf } from './jail.js';
import { Conn, TERMINAL_WR } from './server-conn.js';
import type { OpenFileBudget } from './open-files.js';
import { type DeviceAddress, hostKey } from '../core/address.js';
import { Admission, type EvictWhy } from './admission.js';
import { type FsOp, type FsResult, PREAUTH_RECEIVE, type ServerAction, ServerConnection, type ServerCounters, type ServerLimits } from './server-core.js';
import type { SessionTable } from './sessions.js';

/**
 * RDMA connections of one source host, authenticated or not (ServeOptions.maxConnectionsPerHost):
 * a quarter of maxConnections' default 64, as sessions.maxSessionsPerHost is of maxSessions, and a
 * FileClient holds one connection per session — so one host's 16 clients fit, and one token
 * holder needs four hosts to fill the server.
 */
export const DEFAULT_CONNECTIONS_PER_HOST = 16;

/** The source host a connection from `peer` counts against (an inproc device is a host of its own). */
const sourceHost = (peer: DeviceAddress | undefined): string => hostKey(peer?.host ?? (peer ? `inproc:${String(peer.id)}` : undefined));

/**
 * How long an evicted connection waits for its first message to answer (#evict): an honest
 * client sends its AuthenticateRequest as soon as its connect completes.
 */
export const EVICTED_WAIT_MS = 2000;

/** What the connections share with the rest of the server. */
export interface RdmaContext {
  readonly jail: Jail;
  readonly sessions: SessionTable;
  readonly counters: ServerCounters;
  readonly openFiles: OpenFileBudget;
  /** The server is closing: no new connection gets in. */
  closing(): boolean;
}

/** The bounds on RDMA connections (ServeOptions of the same names, with their defaults). */
export interface RdmaBounds {
  maxConnections: number;
  maxUnauthenticated: number;
  maxUnauthenticatedPerHost: number;
  maxConnectionsPerHost: number;
}

export class RdmaConnections {
  readonly #ctx: RdmaContext;
  /** Sources of the RDMA connections, and which of them have not authenticated yet. */
  readonly #admission: Admission<Conn>;
  readonly #conns = new Map<QueuePair, Conn>();
  readonly #byCore = new Map<ServerConnection, Conn>();
  readonly #byQpn = new Map<Device, Map<number, Conn>>();
  readonly #preauth = new Map<Device, { mr: MemoryRegion; free: number[] }>();
  #connectionsRefused = 0;
  readonly #maxConnections: number;
  /** Evicted connections waiting to be told why (#evict), now and at most; those cut off untold past it. */
  #waiting = 0;
  readonly #maxWaiting: number;
  #evictionsCut = 0;
  readonly #limitsByDev = new Map<Device, ServerLimits>();

  constructor(ctx: RdmaContext, b: RdmaBounds) {
    this.#ctx = ctx;
    this.#maxConnections = b.maxConnections;
    this.#maxWaiting = b.maxUnauthenticated;
    this.#admission = new Admission<Conn>({
      max: b.maxConnections, maxUnauthenticated: b.maxUnauthenticated, maxUnauthenticatedPerHost: b.maxUnauthenticatedPerHost, maxPerHost: b.maxConnectionsPerHost,
    });
  }

  /** Connections now (authenticated or not, and those still going away). */
  get size(): number {
    return this.#conns.size;
  }

  /** Listen for file-service connections on `dev`, whose connections run under `L`. */
  listen(dev: Device, L: ServerLimits): CmListener {
    const pd = dev.allocPd();
    this.#limitsByDev.set(dev, L);
    const maxSendWr = L.credits + L.rwDepth * L.maxVectors + 8;
    const maxRecvWr = L.credits + RESERVE + 2;
    // The evicted connections waiting to be told hold a receive and a Send each, and a slot.
    const cq = dev.createCq({ depth: this.#maxConnections * (maxSendWr + maxRecvWr) + this.#maxWaiting * 2 + 64 });
    this.#byQpn.set(dev, new Map());
    const slots = this.#maxConnections + this.#maxWaiting;
    this.#preauth.set(dev, { mr: pd.regMr(slots * PREAUTH_RECEIVE, Access.LocalWrite), free: Array.from({ length: slots }, (_, i) => slots - 1 - i) });
    const listener = listen(dev, {
      pd, service: FILE_SERVICE, backlog: 16,
      qpInit: { sendCq: cq, recvCq: cq, maxSendWr, maxRecvWr, maxSge: 2, maxInline: 512, timeoutMs: 8000 },
      setup: (qp, r) => this.#setup(dev, pd, qp, r?.peer),
    });
    void (async () => {
      for await (const qp of listener) {
        // The QP is connected (its Conn was made in setup): now its source is known.
        const c = this.#conns.get(qp);
        if (!c) qp.destroy();
        else this.#admit(c);
      }
    })().catch(() => {});
    void this.#cqLoop(dev, cq);
    return listener;
  }

  /**
   * Count a connected QP that setup could not (no peer address then) against its source, as
   * setup does (#enter); the others are counted already.
   */
  #admit(c: Conn): void {
    if (c.destroyed || c.waiting || this.#admission.has(c)) return;
    // The address the connection came from, as cm saw it.
    this.#enter(c, sourceHost(connectionInfo(c.qp)?.peer));
  }

  /**
   * Count `c` against its source: an unauthenticated one past the caps closes the oldest
   * unauthenticated one of the source holding the most (./admission.ts, #evict). One whose source
   * holds maxConnectionsPerHost authenticated connections is refused, never one of those closed:
   * an honest client holds its connection, busy or idle, for as long as it is connected.
   */
  #enter(c: Conn, host: string): void {
    const a = c.core.state !== 'authenticating' ? this.#admission.enter(c, host) : this.#admission.admit(c, host);
    if (!a.ok) {
      this.#connectionsRefused++;
      return this.#teardown(c);
    }
    a.evict.forEach((old, i) => this.#evict(old, a.why[i]!));
  }

  /**
   * `c` was closed for a newer connection before it authenticated. From now on it counts against
   * no bound (else eviction would make no room), but it is not cut off untold: its client would
   * fail with a lost connection for what is the server's bound. It waits, holding its QP and
   * preauth slot, for its AuthenticateRequest, answered StatusResponse(SessionLimit, Terminate)
   * with the reason (ServerConnection.evict), or EVICTED_WAIT_MS. Past maxUnauthenticated
   * waiting at once (a flood), it is cut off at once, untold (evictionsCut).
   */
  #evict(c: Conn, why: EvictWhy): void {
    if (c.destroyed || c.terminating || c.waiting) return;
    if (this.#waiting >= this.#maxWaiting || this.#ctx.closing()) {
      this.#evictionsCut++;
      return this.#teardown(c);
    }
    c.waiting = true;
    this.#waiting++;
    c.core.evict(evictionCode('rdma', why), performance.now() + EVICTED_WAIT_MS);
    c.timer?.clear();
    c.timer = peerDeadline(Math.max(0, (c.core.pollTimeout() ?? 0) - performance.now()) + 5, () => {
      c.core.handleTimeout(performance.now() + 10);
      this.#run(c);
    });
  }

  /** Connections that count against the bounds: all but the evicted ones waiting to be told. */
  #live(): number {
    return this.#conns.size - this.#waiting;
  }

  #setup(dev: Device, pd: ProtectionDomain, qp: QueuePair, peer: DeviceAddress | undefined): void {
    const pre = this.#preauth.get(dev)!;
    // Admission is decided here, before the QP connects, with nothing in between to change it: a
    // refusal is the cm's answer, with a reason the client turns into ERR_FILE_SESSION_LIMIT.
    // (Counted after the connect, a connection that passed this check while another of its host
    // authenticated was torn down there: its client saw a lost connection.)
    const host = peer && !this.#ctx.closing() ? sourceHost(peer) : undefined;
    if (host !== undefined) {
      const why = this.#admission.refuseNew(host);
      if (why) {
        this.#connectionsRefused++;
        throw listenerRefusal(cmRejectFor(why).reason);
      }
    }
    // Full: an unauthenticated connection makes room (authenticated ones are never closed for it).
    if (!this.#ctx.closing() && this.#live() >= this.#maxConnections) {
      const old = this.#admission.evictOne();
      if (old) this.#evict(old, 'total');
    }
    const slot = this.#ctx.closing() ? undefined : pre.free.pop();
    if (slot === undefined || this.#live() >= this.#maxConnections) {
      if (slot !== undefined) pre.free.push(slot);
      this.#connectionsRefused++;
      throw listenerRefusal(cmRejectFor('total').reason);
    }
    const c = new Conn(this.#ctx, pd, qp, slot, this.#limitsByDev.get(dev)!);
    this.#conns.set(qp, c);
    this.#byCore.set(c.core, c);
    this.#byQpn.get(dev)!.set(qp.qpn, c);
    // The one small receive for the AuthenticateRequest (recvId 0).
    qp.postRecv({ wrId: 0, sgList: [{ addr: pre.mr.addr + slot * PREAUTH_RECEIVE, length: PREAUTH_RECEIVE, lkey: pre.mr.lkey }] });
    // A peer deadline: after a stall of this process the AuthenticateRequest that came in time
    // is read before the connection is timed out.
    c.timer = peerDeadline(c.limits.authTimeoutMs + 5, () => {
      c.core.handleTimeout(performance.now() + 10);
      this.#run(c);
    });
    if (host !== undefined) this.#enter(c, host);
  }

  /** The connections' completions; each connection touched runs its core once the CQ is drained. */
  #cqLoop(dev: Device, cq: CompletionQueue): Promise<void> {
    const byQpn = this.#byQpn.get(dev)!;
    const touched = new Set<Conn>();
    return driveCq(cq, 256, {
      onBatch: (wcs) => {
        for (const wc of wcs) {
          const c = byQpn.get(wc.qpn);
          if (!c || c.destroyed) continue;
          this.#onWc(c, wc);
          touched.add(c);
        }
      },
      afterDrain: () => {
        for (const c of touched) this.#run(c);
        touched.clear();
      },
      // The device closed (the server's close); anything else leaves the connections unserved:
      // tear them down so their clients fail instead of waiting.
      onEnd: () => {
        if (!this.#ctx.closing()) for (const c of [...byQpn.values()]) this.#teardown(c);
      },
    });
  }

  #onWc(c: Conn, wc: WorkCompletion): void {
    if (wc.status !== WcStatus.Success) {
      // A receive in error that is not a flush: the peer sent what no posted buffer holds (a Send
      // longer than maxReceiveSize) or broke the QP under it. Counted; the QP is in ERROR.
      if ((wc.opcode === WcOpcode.Recv || wc.opcode === WcOpcode.RecvRdmaWithImm) && wc.status !== WcStatus.WrFlushErr) this.#ctx.counters.receiveErrors++;
      if (wc.wrId === TERMINAL_WR) return this.#destroy(c);
      // The QP is in ERROR (peer gone, retries exhausted, a bad sink): the connection is over.
      if (!c.terminating) c.core.close();
      return;
    }
    if (wc.opcode === WcOpcode.Recv) {
      const id = Number(wc.wrId);
      const view = this.#recvView(c, id);
      if (!view) return;
      c.core.handleReceive(id, view.subarray(0, wc.byteLen), performance.now());
    } else if (wc.wrId === TERMINAL_WR) {
      this.#destroy(c);
    } else if (wc.opcode === WcOpcode.RdmaWrite) {
      c.core.handleWriteDone(Number(wc.wrId), performance.now());
    }
  }

  #recvView(c: Conn, id: number): Uint8Array | undefined {
    if (id === 0) {
      const pre = this.#preauth.get(c.pd.device)!;
      return pre.mr.buffer.subarray(c.preauthSlot * PREAUTH_RECEIVE, (c.preauthSlot + 1) * PREAUTH_RECEIVE);
    }
    const b = c.bufs.get(id);
    return b ? b.mr.buffer.subarray(b.off, b.off + b.length) : undefined;
  }

  /** Carry out the core's actions. */
  #run(c: Conn): void {
    for (let a = c.core.pollAction(); a; a = c.core.pollAction()) {
      // With the QP gone only the file system and the bookkeeping still matter.
      if (c.destroyed && (a.kind === 'post' || a.kind === 'repost' || a.kind === 'send' || a.kind === 'block' || a.kind === 'write' || a.kind === 'provision')) continue;
      try {
        this.#act(c, a);
      } catch {
        // A verbs call refused (a full queue, the QP in ERROR): the connection cannot go on.
        if (!c.core.state.startsWith('clos')) c.core.close();
        this.#destroyQp(c);
      }
    }
  }

  #act(c: Conn, a: ServerAction): void {
    const qp = c.qp;
    switch (a.kind) {
      case 'provision':
        return c.provision();
      case 'post':
        for (let i = 0; i < a.n; i++) c.postBuf(c.takeBuf());
        return;
      case 'repost':
        return c.postBuf(a.recvId);
      case 'retire':
        if (a.recvId === 0) {
          // Kept until the connection is freed unless it bound: the refusal of an
          // unauthenticated one is sent from this slot (no region registered for it).
          if (!c.bound) return;
          this.#preauth.get(c.pd.device)!.free.push(c.preauthSlot);
          c.preauthSlot = -1;
        } else c.freeBufs.push(a.recvId);
        return;
      case 'send': {
        let sge: { addr: number; length: number; lkey: number };
        if (!c.scratch && !c.bound && c.preauthSlot >= 0 && a.bytes.length <= PREAUTH_RECEIVE) {
          // Before authentication the only Send is a refusal, after the one receive completed.
          const pre = this.#preauth.get(c.pd.device)!;
          pre.mr.buffer.set(a.bytes, c.preauthSlot * PREAUTH_RECEIVE);
          sge = { addr: pre.mr.addr + c.preauthSlot * PREAUTH_RECEIVE, length: a.bytes.length, lkey: pre.mr.lkey };
        } else {
          const s = c.scratch ?? c.provisionScratch();
          s.buffer.set(a.bytes, 0);
          sge = { addr: s.addr, length: a.bytes.length, lkey: s.lkey };
        }
        qp.postSend({ wrId: a.last ? TERMINAL_WR : 0, opcode: Opcode.Send, sgList: [sge], signaled: a.last === true });
        return;
      }
      case 'block': {
        const s = c.scratch!;
        s.buffer.set(a.bytes, 0);
        qp.postSend({
          wrId: 0, opcode: a.imm !== undefined ? Opcode.RdmaWriteWithImm : Opcode.RdmaWrite, sgList: [{ addr: s.addr, length: a.bytes.length, lkey: s.lkey }],
          remoteAddr: a.remoteAddr, rkey: a.rkey, signaled: false, ...(a.imm !== undefined ? { imm: a.imm } : {}),
        });
        return;
      }
      case 'write': {
        const st = c.stagingMr();
        qp.postSend({
          wrId: a.token, opcode: Opcode.RdmaWrite, sgList: [{ addr: st.addr + a.staging * c.limits.maxReadWriteSize + a.at, length: a.length, lkey: st.lkey }],
          remoteAddr: a.remoteAddr, rkey: a.rkey,
        });
        return;
      }
      case 'fs':
        void this.#fs(c, a.token, a.work);
        return;
      case 'terminate':
        c.terminating = true;
        // Destroyed when the terminal StatusResponse completes, or now if none was sent.
        setTimeout(() => this.#destroy(c), 1000).unref();
        return;
      case 'bound':
        c.bound = true;
        this.#admission.authenticated(c);
        return;
      case 'released':
        // A terminal StatusResponse may still be on its way: free once the QP has gone (its
        // completion, or the terminate timer).
        if (c.terminating && !c.destroyed) {
          c.freeOnDestroy = true;
          return;
        }
        return this.#free(c);
    }
  }

  async #fs(c: Conn, token: number, w: FsOp): Promise<void> {
    let r: FsResult;
    try {
      r = await c.doFs(this.#ctx.jail, w);
    } catch (e) {
      r = { status: statusOf(e) };
    }
    // Even for a connection being torn down: the core closes what a late open opened.
    c.core.handleFsDone(token, r, performance.now());
    this.#run(c);
  }

  /** The session's pipe closed: tear down the connection of `core` (false: not one of these). */
  teardownCore(core: unknown): boolean {
    const c = this.#byCore.get(core as ServerConnection);
    if (c) this.#teardown(c);
    return c !== undefined;
  }

  /** The session's pipe closed, or the server closes: tear the connection down. */
  #teardown(c: Conn): void {
    c.core.close();
    this.#run(c);
    if (!c.terminating) {
      c.terminating = true;
      // No message can be sent on its behalf any more: the QP goes now.
      this.#destroyQp(c);
    }
  }

  #destroyQp(c: Conn): void {
    if (c.destroyed) return;
    c.destroyed = true;
    c.timer?.clear();
    try {
      c.qp.destroy();
    } catch {
      // already gone with the device
    }
    this.#byQpn.get(c.pd.device)?.delete(c.qp.qpn);
  }

  #destroy(c: Conn): void {
    if (!c.core.state.startsWith('clos')) c.core.close();
    this.#destroyQp(c);
    this.#run(c);
    if (c.freeOnDestroy) this.#free(c);
  }

  /** Everything the connection held (after its file-system work drained). */
  #free(c: Conn): void {
    this.#destroyQp(c);
    c.release();
    if (c.preauthSlot >= 0) {
      this.#preauth.get(c.pd.device)?.free.push(c.preauthSlot);
      c.preauthSlot = -1;
    }
    this.#conns.delete(c.qp);
    this.#byCore.delete(c.core);
    this.#admission.remove(c);
    if (c.waiting) {
      c.waiting = false;
      this.#waiting--;
    }
  }

  /** What stats() shows of the connections. */
  stats(): {
    liveConnections: number; unauthenticatedConnections: number; connectionsEvicted: number; connectionHostLimit: number; connectionHosts: number; connectionsRefused: number;
    registeredBytes: number; evictionsWaiting: number; evictionsCut: number;
  } {
    let registered = 0;
    for (const c of this.#conns.values()) registered += c.registered;
    return {
      liveConnections: this.#conns.size, unauthenticatedConnections: this.#admission.unauthenticated, connectionsEvicted: this.#admission.counters.evicted,
      connectionHostLimit: this.#admission.counters.hostRefused, connectionHosts: this.#admission.hosts, connectionsRefused: this.#connectionsRefused, registeredBytes: registered,
      evictionsWaiting: this.#waiting, evictionsCut: this.#evictionsCut,
    };
  }

  /** Lower (or raise back) the credits every bound connection's client may hold (DeltaCredit). */
  setCredits(n: number): void {
    for (const c of this.#conns.values()) {
      c.core.setCreditTarget(n);
      this.#run(c);
    }
  }

  /** The server closes: tear every connection down, let file-system work drain (bounded), free what is left. */
  async close(): Promise<void> {
    for (const c of [...this.#conns.values()]) this.#teardown(c);
    // Let file-system work drain (bounded): connections free themselves when it has.
    for (let i = 0; i < 200 && this.#conns.size > 0; i++) await new Promise((r) => setTimeout(r, 10));
    for (const c of [...this.#conns.values()]) this.#free(c);
  }
}
