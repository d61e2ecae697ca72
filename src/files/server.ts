// The file server: the I/O shell around the sans-I/O cores. A TCP listener for control pipes
// (./pipe.ts), one sabre device per provider with a cm listener on FILE_SERVICE, and per RDMA
// connection a ServerConnection (./server-core.ts) whose actions this file carries out with the
// verbs API and node:fs through the jail (./jail.ts).
//
//   const server = await serveFiles('/srv/data', { port: 7000, token, transports: ['udp', 'tcp'] });
//   server.address   // { host, port } of the control pipe
//   server.stats()   // sessions, connections, open files, refusals …
//   await server.close();
//
// Ports: the pipe listens on TCP `port`; the udp device binds UDP `port` too (another port space)
// and the tcp device `port + 1`; with port 0 all three are ephemeral. The negotiate response
// tells the client the ports; the host is the one it reached the pipe at.
//
// Liveness: a session lives as long as its pipe. When the pipe closes (a client killed, or
// gone), every RDMA connection bound to it is torn down: file-system work in flight is waited
// for, open files are closed (a Replace put is unlinked, never renamed into place), memory is
// deregistered, the QP destroyed.
import { peerDeadline } from '../core/deadline.js';
import { Lifecycle } from '../core/lifecycle.js';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
// The verbs and cm API (what src/index.ts exports), from their modules: the file service sits above cm and verbs.
import { type CmListener, connectionInfo, listen } from '../cm/index.js';
import { Access, Opcode, WcOpcode, WcStatus } from '../core/enums.js';
import { ErrorCode, listenerRefusal, SabreError } from '../core/errors.js';
import type { WorkCompletion } from '../core/work.js';
import type { CompletionQueue } from '../verbs/cq.js';
import { driveCq } from '../verbs/cq-driver.js';
import { type Device, openDevice } from '../verbs/device.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import { FILE_CM_REJECTS, FILE_SERVICE, FileProvider, FileStatus } from '../wire/files-spec.js';
import { RESERVE } from './credits.js';
import { Channel } from '../channel/channel.js';
import { listenChannels, type ChannelListener } from '../channel/listen.js';
import { checkDedupLimits, DEDUP_AUTH_MAX, DEDUP_MAX_BYTES, DEDUP_MAX_TRANSFERS, FILE_DEDUP_SERVICE, newDedupCounters, serveDedupChannel } from './dedup.js';
import { Jail, statusOf } from './jail.js';
import { Conn, TERMINAL_WR } from './server-conn.js';
import { checkMaxOpenFiles, defaultMaxOpenFiles, OpenFileBudget } from './open-files.js';
import { type DeviceAddress, hostKey } from '../core/address.js';
import { Admission, type AdmissionLimits, LoginBackoff } from './admission.js';
import { type Offer, newPipeCounters } from './pipe.js';
import { DEFAULT_PIPE_ADMISSION, PipeShell } from './pipes.js';
import {
  DEFAULT_SERVER_LIMITS, type FsOp, type FsResult, PREAUTH_RECEIVE, type ServerAction, ServerConnection, type ServerLimits, newServerCounters,
} from './server-core.js';
import { checkServeOptions } from './serve-checks.js';
import { SessionTable } from './sessions.js';
import { noSweep, type PartSweepCounters } from './sweep.js';
import type { FileServerStats, Provider, ServeOptions } from './serve-options.js';

export type { FileServerStats, Provider, ServeOptions };

/**
 * RDMA connections of one source host, authenticated or not (ServeOptions.maxConnectionsPerHost):
 * a quarter of maxConnections' default 64, as sessions.maxSessionsPerHost is of maxSessions, and a
 * FileClient holds one connection per session — so one host's 16 clients fit, and one token
 * holder needs four hosts to fill the server.
 */
export const DEFAULT_CONNECTIONS_PER_HOST = 16;

/**
 * Limits by provider, under ServeOptions.limits (which wins): udp's acknowledgements come back
 * slower than tcp's, so it needs more reads answered at once (staging buffers) to keep the wire
 * busy — 16 MiB of staging and ~17 MiB of receive buffers (16 credits of 1 MiB Writes) per
 * connection, registered only once it has authenticated. (16 credits of 1 MiB
 * serve a get's 16 sinks as fast as 32 credits of 256 KiB did: bench/files.bench.mjs.)
 */
const PROVIDER_LIMITS: Record<Provider, Partial<ServerLimits>> = {
  udp: { rwDepth: 16 },
  tcp: {},
  inproc: {},
};

/** The source host a connection from `peer` counts against (an inproc device is a host of its own). */
const sourceHost = (peer: DeviceAddress | undefined): string => hostKey(peer?.host ?? (peer ? `inproc:${String(peer.id)}` : undefined));

export class FileServer {
  readonly token: string;
  /** The limits every provider shares (ServeOptions.limits over the defaults); see limitsFor. */
  readonly limits: ServerLimits;
  readonly sessions: SessionTable;
  readonly counters = newServerCounters();
  readonly pipeCounters = newPipeCounters();
  /** Dedup transfers served, refused (bad, late or evicted AUTH, limits), and basis bytes ingested. */
  readonly dedupCounters = newDedupCounters();
  /** @internal files open now against ServeOptions.maxOpenFilesTotal, all connections and dedup transfers (stats() shows the counts). */
  readonly openFiles: OpenFileBudget;
  /** Dedup channels waiting for their AUTH (at most maxUnauthenticated, the oldest closed for a newer one). */
  readonly #dedupPending = new Map<Channel, string>();
  readonly #channelListeners: ChannelListener[] = [];
  readonly jail: Jail;
  /** @internal what the sweep of stale put temporaries at start removed and left (stats() has them). */
  partSweep: PartSweepCounters = noSweep();
  address: { host: string; port: number } = { host: '127.0.0.1', port: 0 };
  readonly devices: Partial<Record<Provider, Device>> = {};
  readonly #opts: ServeOptions;
  readonly #listeners: CmListener[] = [];
  readonly #pipes: PipeShell;
  /** Sources of the RDMA connections, and which of them have not authenticated yet. */
  readonly #admission: Admission<Conn>;
  /** Shortest token that is not called weak (docs/files.md: how long a token must be). */
  static readonly STRONG_TOKEN = 16;
  readonly #conns = new Map<QueuePair, Conn>();
  readonly #byCore = new Map<ServerConnection, Conn>();
  readonly #byQpn = new Map<Device, Map<number, Conn>>();
  readonly #preauth = new Map<Device, { mr: MemoryRegion; free: number[] }>();
  #net: net.Server | undefined;
  readonly #life = new Lifecycle(); // close() once: every call gets the first one's promise
  #connectionsRefused = 0;
  readonly #maxConnections: number;
  readonly #limitsByDev = new Map<Device, ServerLimits>();

  /** @internal use serveFiles */
  constructor(jail: Jail, opts: ServeOptions, token: string) {
    this.jail = jail;
    this.#opts = opts;
    this.token = token;
    this.limits = { ...DEFAULT_SERVER_LIMITS, ...opts.limits, readOnly: opts.readOnly ?? opts.limits?.readOnly ?? false, fsync: opts.fsync ?? opts.limits?.fsync ?? false };
    this.sessions = new SessionTable(opts.sessions ?? {}, (n) => new Uint8Array(randomBytes(n)));
    this.#maxConnections = opts.maxConnections ?? 64;
    this.openFiles = new OpenFileBudget(opts.maxOpenFilesTotal ?? defaultMaxOpenFiles());
    this.#admission = new Admission<Conn>({
      max: this.#maxConnections, maxUnauthenticated: opts.maxUnauthenticated ?? 16, maxUnauthenticatedPerHost: opts.maxUnauthenticatedPerHost ?? 4,
      maxPerHost: opts.maxConnectionsPerHost ?? DEFAULT_CONNECTIONS_PER_HOST,
    });
    const P = DEFAULT_PIPE_ADMISSION;
    const pipes: AdmissionLimits = {
      max: opts.maxPipes ?? P.max, maxPerHost: opts.maxPipesPerHost ?? P.maxPerHost, maxUnauthenticated: opts.maxUnauthenticatedPipes ?? P.maxUnauthenticated,
      maxUnauthenticatedPerHost: opts.maxUnauthenticatedPipesPerHost ?? P.maxUnauthenticatedPerHost,
    };
    this.#pipes = new PipeShell(pipes, new LoginBackoff(opts.login), {
      token, sessions: this.sessions, offer: () => this.#offer(), counters: this.pipeCounters,
      ended: (session) => {
        for (const k of this.sessions.close(session)) {
          const c = this.#byCore.get(k as ServerConnection);
          if (c) this.#teardown(c);
          else if (k instanceof Channel) void k.close();
        }
      },
    });
  }

  /** The token is shorter than STRONG_TOKEN characters: online guessing is rationed, not impossible. */
  get weakToken(): boolean {
    return this.token.length < FileServer.STRONG_TOKEN;
  }

  /** The limits a connection over provider `t` gets (what its AuthenticateResponse announces). */
  limitsFor(t: Provider): ServerLimits {
    const o = this.#opts;
    return { ...DEFAULT_SERVER_LIMITS, ...PROVIDER_LIMITS[t], ...o.limits, readOnly: this.limits.readOnly, fsync: this.limits.fsync };
  }

  /** @internal */
  async start(): Promise<void> {
    // Before anything listens: no put of this server can be live (./sweep.ts says which go).
    this.partSweep = await this.jail.sweepParts(this.#opts.partSweepAgeMs !== undefined ? { olderThanMs: this.#opts.partSweepAgeMs } : {});
    const host = this.#opts.host ?? '127.0.0.1';
    const want = this.#opts.transports ?? ['udp', 'tcp'];
    const server = net.createServer({ noDelay: true }, (s) => this.#pipes.accept(s));
    this.#net = server;
    await new Promise<void>((res, rej) => {
      server.once('error', rej);
      server.listen(this.#opts.port ?? 0, host, () => {
        server.off('error', rej);
        res();
      });
    });
    const port = (server.address() as net.AddressInfo).port;
    this.address = { host, port };
    const fixed = (this.#opts.port ?? 0) !== 0;
    const nic = this.#opts.workers !== undefined ? { workers: this.#opts.workers } : {};
    for (const t of want) {
      let dev: Device;
      if (t === 'inproc') dev = await openDevice({ transport: 'inproc' });
      else if (t === 'udp') {
        const o = { transport: 'udp' as const, host, ...(this.#opts.mtu ? { mtu: this.#opts.mtu } : {}), ...nic, ...(this.#opts.integrity ? { integrity: this.#opts.integrity } : {}) };
        dev = await openDevice({ ...o, port }).catch((e) => (fixed ? Promise.reject(e) : openDevice({ ...o, port: 0 })));
      } else {
        const integrity = this.#opts.integrity === 'xxh3' ? undefined : this.#opts.integrity;
        dev = await openDevice({ transport: 'tcp', host, port: fixed ? port + 1 : 0, ...(integrity ? { integrity } : {}), ...nic });
      }
      this.devices[t] = dev;
      this.#limitsByDev.set(dev, this.limitsFor(t));
      this.#listen(dev);
    }
  }

  #offer(): Offer {
    let providers = 0;
    for (const t of Object.keys(this.devices) as Provider[]) providers |= FileProvider[t];
    return {
      providers,
      udpPort: Number(this.devices.udp?.address.port ?? 0),
      tcpPort: Number(this.devices.tcp?.address.port ?? 0),
      inprocId: String(this.devices.inproc?.address.id ?? ''),
    };
  }

  // -------------------------------------------------------------------------------------------
  // RDMA connections

  #listen(dev: Device): void {
    const pd = dev.allocPd();
    const L = this.#limitsByDev.get(dev)!;
    const maxSendWr = L.credits + L.rwDepth * L.maxVectors + 8;
    const maxRecvWr = L.credits + RESERVE + 2;
    const cq = dev.createCq({ depth: this.#maxConnections * (maxSendWr + maxRecvWr) + 64 });
    this.#byQpn.set(dev, new Map());
    const slots = this.#maxConnections;
    this.#preauth.set(dev, { mr: pd.regMr(slots * PREAUTH_RECEIVE, Access.LocalWrite), free: Array.from({ length: slots }, (_, i) => slots - 1 - i) });
    const listener = listen(dev, {
      pd, service: FILE_SERVICE, backlog: 16,
      qpInit: { sendCq: cq, recvCq: cq, maxSendWr, maxRecvWr, maxSge: 2, maxInline: 512, timeoutMs: 8000 },
      setup: (qp, r) => this.#setup(dev, pd, qp, r?.peer),
    });
    this.#listeners.push(listener);
    if (this.#opts.dedup !== false) this.#listenDedup(dev);
    void (async () => {
      for await (const qp of listener) {
        // The QP is connected (its Conn was made in setup): now its source is known.
        const c = this.#conns.get(qp);
        if (!c) qp.destroy();
        else this.#admit(c);
      }
    })().catch(() => {});
    void this.#cqLoop(dev, cq);
  }

  /** Dedup channels of the sessions (./dedup.ts): authenticated by their first message. */
  #listenDedup(dev: Device): void {
    const max = this.#opts.dedupMaxBytes ?? DEDUP_MAX_BYTES;
    // Untrusted until the AUTH's MAC is verified (serveDedupChannel calls authorize()).
    const l = listenChannels(dev, { service: FILE_DEDUP_SERVICE, maxMessage: max, backlog: 16, preauth: { maxMessage: DEDUP_AUTH_MAX } });
    this.#channelListeners.push(l);
    const ctx = {
      sessions: this.sessions, jail: this.jail, readOnly: this.#opts.readOnly ?? false, fsync: this.#opts.fsync ?? false, maxBytes: max, counters: this.dedupCounters, openFiles: this.openFiles,
      pending: this.#dedupPending, maxPending: this.#admission.limits.maxUnauthenticated, maxTransfers: this.#opts.dedupMaxTransfers ?? DEDUP_MAX_TRANSFERS,
    };
    void (async () => {
      for await (const ch of l) void serveDedupChannel(ch, ctx);
    })().catch(() => {});
  }

  /**
   * Count a connected QP against its source: an unauthenticated one past the caps closes the
   * oldest unauthenticated one of the source holding the most (./admission.ts). One whose source
   * holds maxConnectionsPerHost authenticated connections is refused, never one of those closed:
   * an honest client holds its connection, busy or idle, for as long as it is connected.
   */
  #admit(c: Conn): void {
    // The address the connection came from, as cm saw it.
    const host = sourceHost(connectionInfo(c.qp)?.peer);
    if (c.destroyed) return;
    const a = c.core.state !== 'authenticating' ? this.#admission.enter(c, host) : this.#admission.admit(c, host);
    if (!a.ok) {
      this.#connectionsRefused++;
      return this.#teardown(c);
    }
    for (const old of a.evict) this.#teardown(old);
  }

  #setup(dev: Device, pd: ProtectionDomain, qp: QueuePair, peer: DeviceAddress | undefined): void {
    const pre = this.#preauth.get(dev)!;
    // Past the bounds with only authenticated connections to make room of: refused before a QP
    // connects (a lookup of the source's count), with a reason the client turns into
    // ERR_FILE_SESSION_LIMIT. #admit still refuses the rare one that got past here while another
    // of its host authenticated, by teardown.
    if (!this.#life.closing && peer) {
      const why = this.#admission.refuseNew(sourceHost(peer));
      if (why) {
        this.#connectionsRefused++;
        throw listenerRefusal(FILE_CM_REJECTS[why === 'host' ? 0 : 1].reason);
      }
    }
    // Full: an unauthenticated connection makes room (authenticated ones are never closed for it).
    if (!this.#life.closing && this.#conns.size >= this.#maxConnections) {
      const old = this.#admission.evictOne();
      if (old) this.#teardown(old);
    }
    const slot = this.#life.closing ? undefined : pre.free.pop();
    if (slot === undefined || this.#conns.size >= this.#maxConnections) {
      if (slot !== undefined) pre.free.push(slot);
      this.#connectionsRefused++;
      throw listenerRefusal(FILE_CM_REJECTS[1].reason);
    }
    const c = new Conn(this, pd, qp, slot, this.#limitsByDev.get(dev)!);
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
        if (!this.#life.closing) for (const c of [...byQpn.values()]) this.#teardown(c);
      },
    });
  }

  #onWc(c: Conn, wc: WorkCompletion): void {
    if (wc.status !== WcStatus.Success) {
      // A receive in error that is not a flush: the peer sent what no posted buffer holds (a Send
      // longer than maxReceiveSize) or broke the QP under it. Counted; the QP is in ERROR.
      if ((wc.opcode === WcOpcode.Recv || wc.opcode === WcOpcode.RecvRdmaWithImm) && wc.status !== WcStatus.WrFlushErr) this.counters.receiveErrors++;
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
      r = await c.doFs(this.jail, w);
    } catch (e) {
      r = { status: statusOf(e) };
    }
    // Even for a connection being torn down: the core closes what a late open opened.
    c.core.handleFsDone(token, r, performance.now());
    this.#run(c);
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
  }

  stats(): FileServerStats {
    let registered = 0;
    for (const c of this.#conns.values()) registered += c.registered;
    return {
      ...this.counters, ...this.pipeCounters, ...this.sessions.counters, ...this.dedupCounters, ...this.#pipes.counters, ...this.#pipes.backoff.counters,
      ...this.openFiles.counters(), ...this.jail.listCache.counters(), ...this.partSweep, sessions: this.sessions.size, sessionHosts: this.sessions.hosts, liveConnections: this.#conns.size, pipes: this.#pipes.size,
      unauthenticatedConnections: this.#admission.unauthenticated, unauthenticatedPipes: this.#pipes.admission.unauthenticated,
      connectionsEvicted: this.#admission.counters.evicted, connectionHostLimit: this.#admission.counters.hostRefused, connectionHosts: this.#admission.hosts, loginSources: this.#pipes.backoff.size, dedupPending: this.#dedupPending.size,
      connectionsRefused: this.#connectionsRefused, registeredBytes: registered, halfOpenEvicted: this.#listeners.reduce((n, l) => n + l.counters.halfOpenEvicted, 0),
    };
  }

  /** Lower (or raise back) the credits every bound connection's client may hold (DeltaCredit). */
  setCredits(n: number): void {
    for (const c of this.#conns.values()) {
      c.core.setCreditTarget(n);
      this.#run(c);
    }
  }

  close(): Promise<void> {
    return this.#life.close(async () => {
      for (const l of this.#listeners) l.close();
      for (const l of this.#channelListeners) l.close();
      this.#pipes.close();
      await new Promise<void>((res) => (this.#net ? this.#net.close(() => res()) : res()));
      for (const c of [...this.#conns.values()]) this.#teardown(c);
      // Let file-system work drain (bounded): connections free themselves when it has.
      for (let i = 0; i < 200 && this.#conns.size > 0; i++) await new Promise((r) => setTimeout(r, 10));
      for (const c of [...this.#conns.values()]) this.#free(c);
      for (const d of Object.values(this.devices)) await d.close();
      // The kept listings and their idle timer: a closed server holds none.
      this.jail.listCache.close();
      this.#life.end();
    });
  }
}

/** Serve `dir` to file clients. Without `token` a random one is made (server.token): give it to the clients out of band. */
export async function serveFiles(dir: string, opts: ServeOptions = {}): Promise<FileServer> {
  checkServeOptions(opts);
  // Hex, not base64url: a token starting with '-' is read as an option by a command line
  // (`sabre ls --token -x…` fails in node's parseArgs), and base64url starts with one 1 time in 64.
  const token = opts.token ?? randomBytes(20).toString('hex');
  if (typeof token !== 'string' || token.length === 0) throw new SabreError(ErrorCode.InvalidArgument, 'token must be a non-empty string');
  if (token.length < (opts.minTokenLength ?? 0)) throw new SabreError(ErrorCode.InvalidArgument, `the token has ${token.length} characters, fewer than minTokenLength (${opts.minTokenLength})`);
  checkDedupLimits(opts);
  checkMaxOpenFiles(opts.maxOpenFilesTotal);
  const s = new FileServer(await Jail.open(dir), opts, token);
  try {
    await s.start();
  } catch (e) {
    await s.close().catch(() => {});
    throw e;
  }
  return s;
}
