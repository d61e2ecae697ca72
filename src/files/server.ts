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
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
// The verbs and cm API (what src/index.ts exports), from their modules: the file service sits above cm and verbs.
import { type CmListener, listen } from '../cm/index.js';
import { Access, Opcode, WcOpcode, WcStatus } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { WorkCompletion } from '../core/work.js';
import type { CompletionQueue } from '../verbs/cq.js';
import { type Device, openDevice } from '../verbs/device.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import { FILE_SERVICE, FileProvider, FileStatus } from '../wire/spec.js';
import { RESERVE } from './credits.js';
import { Channel } from '../channel/channel.js';
import { listenChannels, type ChannelListener } from '../channel/listen.js';
import { DEDUP_MAX_BYTES, FILE_DEDUP_SERVICE, serveDedupChannel } from './dedup.js';
import { Jail, type JailFile, statusOf } from './jail.js';
import { type Offer, PipeServer, type PipeCounters, newPipeCounters } from './pipe.js';
import {
  DEFAULT_SERVER_LIMITS, type FsOp, type FsResult, PREAUTH_RECEIVE, type ServerAction, ServerConnection, type ServerCounters, type ServerLimits,
  newServerCounters, receiveSize,
} from './server-core.js';
import { type SessionCounters, type SessionLimits, SessionTable } from './sessions.js';

export type Provider = 'udp' | 'tcp' | 'inproc';

export interface ServeOptions {
  /** Interface for the pipe and the devices. Default 127.0.0.1. */
  host?: string;
  /** Control-pipe TCP port (0: ephemeral). Default 0. */
  port?: number;
  /** Providers to serve. Default ['udp', 'tcp']. */
  transports?: Provider[];
  /** The shared secret; serveFiles makes a random one when absent (server.token). */
  token?: string;
  readOnly?: boolean;
  /** fsync every Replace put before its rename. */
  fsync?: boolean;
  limits?: Partial<ServerLimits>;
  sessions?: Partial<SessionLimits>;
  /** RDMA connections at once, authenticated or not (bounds memory). Default 64. */
  maxConnections?: number;
  /** Control pipes at once. Default 256. */
  maxPipes?: number;
  /** udp device options (openDevice's). */
  mtu?: number;
  workers?: number;
  /**
   * The devices' integrity check (openDevice's): udp 'xxh3' (default), 'crc32c' or 'none'; tcp
   * 'crc32c' (default) or 'none' (MPA's CRC off) — 'xxh3' leaves tcp at its default.
   */
  integrity?: 'crc32c' | 'xxh3' | 'none';
  /** Serve put/get --dedup (docs/files.md "Dedup transfers"). Default true. */
  dedup?: boolean;
  /** Largest file a dedup transfer moves (assembled in memory). Default 256 MiB. */
  dedupMaxBytes?: number;
}

/**
 * Limits by provider, under ServeOptions.limits (which wins): udp's acknowledgements come back
 * slower than tcp's, so it needs more reads answered at once (staging buffers) to keep the wire
 * busy — 16 MiB of staging and ~17 MiB of receive buffers (16 credits of 1 MiB Writes) per
 * connection, registered only once it has authenticated. (32 credits of 256 KiB Writes before
 * 2026-11-26; 16 credits serve a get's 16 sinks as fast: 392-595 against 499-513 MB/s.)
 */
const PROVIDER_LIMITS: Record<Provider, Partial<ServerLimits>> = {
  udp: { rwDepth: 16 },
  tcp: {},
  inproc: {},
};

export interface FileServerStats extends ServerCounters, PipeCounters, SessionCounters {
  sessions: number;
  /** RDMA connections alive now (authenticating or bound). */
  liveConnections: number;
  openFiles: number;
  pipes: number;
  pipesRefused: number;
  connectionsRefused: number;
  /** Bytes of device memory the connections have registered now. */
  registeredBytes: number;
}

interface RecvBuf {
  addr: number;
  length: number;
  lkey: number;
  mr: MemoryRegion;
  off: number;
}

const TERMINAL_WR = -1;

/** One RDMA connection: its QP, its core, its memory, its open files. */
class Conn {
  readonly qp: QueuePair;
  readonly core: ServerConnection;
  /** The limits of its provider (FileServer.limitsFor). */
  readonly limits: ServerLimits;
  readonly srv: FileServer;
  readonly pd: ProtectionDomain;
  readonly bufs = new Map<number, RecvBuf>();
  readonly freeBufs: number[] = [];
  recvMrs: MemoryRegion[] = [];
  staging: MemoryRegion | undefined;
  scratch: MemoryRegion | undefined;
  readonly files = new Map<number, JailFile>();
  nextHandle = 1;
  nextRecvId = 1;
  preauthSlot: number;
  destroyed = false;
  terminating = false;
  registered = 0;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** Released by the core while its terminal message was in flight. */
  freeOnDestroy = false;

  constructor(srv: FileServer, pd: ProtectionDomain, qp: QueuePair, preauthSlot: number, limits: ServerLimits) {
    this.srv = srv;
    this.pd = pd;
    this.qp = qp;
    this.preauthSlot = preauthSlot;
    this.limits = limits;
    this.core = new ServerConnection({ limits, sessions: srv.sessions, counters: srv.counters, now: performance.now(), preauthRecvId: 0 });
  }
}

export class FileServer {
  readonly token: string;
  /** The limits every provider shares (ServeOptions.limits over the defaults); see limitsFor. */
  readonly limits: ServerLimits;
  readonly sessions: SessionTable;
  readonly counters = newServerCounters();
  readonly pipeCounters = newPipeCounters();
  /** Dedup transfers served, refused (bad AUTH, limits), and basis bytes ingested. */
  readonly dedupCounters = { dedupPuts: 0, dedupGets: 0, dedupRefused: 0, dedupBasisBytes: 0 };
  readonly #channelListeners: ChannelListener[] = [];
  readonly jail: Jail;
  address: { host: string; port: number } = { host: '127.0.0.1', port: 0 };
  readonly devices: Partial<Record<Provider, Device>> = {};
  readonly #opts: ServeOptions;
  readonly #listeners: CmListener[] = [];
  readonly #pipes = new Set<net.Socket>();
  readonly #conns = new Map<QueuePair, Conn>();
  readonly #byCore = new Map<ServerConnection, Conn>();
  readonly #byQpn = new Map<Device, Map<number, Conn>>();
  readonly #preauth = new Map<Device, { mr: MemoryRegion; free: number[] }>();
  #net: net.Server | undefined;
  #closed = false;
  #pipesRefused = 0;
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
  }

  /** The limits a connection over provider `t` gets (what its AuthenticateResponse announces). */
  limitsFor(t: Provider): ServerLimits {
    const o = this.#opts;
    return { ...DEFAULT_SERVER_LIMITS, ...PROVIDER_LIMITS[t], ...o.limits, readOnly: this.limits.readOnly, fsync: this.limits.fsync };
  }

  /** @internal */
  async start(): Promise<void> {
    const host = this.#opts.host ?? '127.0.0.1';
    const want = this.#opts.transports ?? ['udp', 'tcp'];
    const server = net.createServer({ noDelay: true }, (s) => this.#onPipe(s));
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
    for (const t of want) {
      let dev: Device;
      if (t === 'inproc') dev = await openDevice({ transport: 'inproc' });
      else if (t === 'udp') {
        const o = {
          transport: 'udp' as const, host, ...(this.#opts.mtu ? { mtu: this.#opts.mtu } : {}), ...(this.#opts.workers ? { workers: this.#opts.workers } : {}),
          ...(this.#opts.integrity ? { integrity: this.#opts.integrity } : {}),
        };
        dev = await openDevice({ ...o, port }).catch((e) => (fixed ? Promise.reject(e) : openDevice({ ...o, port: 0 })));
      } else {
        const integrity = this.#opts.integrity === 'xxh3' ? undefined : this.#opts.integrity;
        dev = await openDevice({ transport: 'tcp', host, port: fixed ? port + 1 : 0, ...(integrity ? { integrity } : {}) });
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
  // Control pipes

  #onPipe(s: net.Socket): void {
    if (this.#closed || this.#pipes.size >= (this.#opts.maxPipes ?? 256)) {
      this.#pipesRefused++;
      s.destroy();
      return;
    }
    this.#pipes.add(s);
    s.setNoDelay(true);
    s.setKeepAlive(true, 10_000);
    const core = new PipeServer({
      token: this.token, sessions: this.sessions, offer: this.#offer(), random: (n) => new Uint8Array(randomBytes(n)), counters: this.pipeCounters, now: performance.now(),
    });
    const deadline = setTimeout(() => {
      core.tick(performance.now() + 1e9);
      run();
    }, Math.max(0, core.deadline - performance.now()) + 1);
    deadline.unref();
    const run = (): void => {
      for (const a of core.take()) {
        if (a.t === 'write') s.write(a.bytes);
        else s.end(() => s.destroy());
      }
      if (core.state === 'ready') clearTimeout(deadline);
    };
    s.on('data', (chunk: Buffer) => {
      core.receive(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength), performance.now());
      run();
    });
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(deadline);
      this.#pipes.delete(s);
      // The session dies with its pipe, and so does every RDMA connection bound to it.
      // (The session table holds the connections' cores.)
      if (core.session) {
        for (const k of this.sessions.close(core.session)) {
          const c = this.#byCore.get(k as ServerConnection);
          if (c) this.#teardown(c);
          else if (k instanceof Channel) void k.close();
        }
      }
    });
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
      setup: (qp) => this.#setup(dev, pd, qp),
    });
    this.#listeners.push(listener);
    if (this.#opts.dedup !== false) this.#listenDedup(dev);
    void (async () => {
      for await (const qp of listener) {
        // The QP is connected; its Conn was made in setup. Nothing to do until it speaks.
        if (!this.#conns.has(qp)) qp.destroy();
      }
    })().catch(() => {});
    void this.#cqLoop(dev, cq);
  }

  /** Dedup channels of the sessions (./dedup.ts): authenticated by their first message. */
  #listenDedup(dev: Device): void {
    const max = this.#opts.dedupMaxBytes ?? DEDUP_MAX_BYTES;
    const l = listenChannels(dev, { service: FILE_DEDUP_SERVICE, maxMessage: max, backlog: 16 });
    this.#channelListeners.push(l);
    const ctx = { sessions: this.sessions, jail: this.jail, readOnly: this.#opts.readOnly ?? false, fsync: this.#opts.fsync ?? false, maxBytes: max, counters: this.dedupCounters };
    void (async () => {
      for await (const ch of l) void serveDedupChannel(ch, ctx);
    })().catch(() => {});
  }

  #setup(dev: Device, pd: ProtectionDomain, qp: QueuePair): void {
    const pre = this.#preauth.get(dev)!;
    const slot = this.#closed ? undefined : pre.free.pop();
    if (slot === undefined || this.#conns.size >= this.#maxConnections) {
      if (slot !== undefined) pre.free.push(slot);
      this.#connectionsRefused++;
      throw new SabreError(ErrorCode.LimitExceeded, 'the file server is at its connection limit');
    }
    const c = new Conn(this, pd, qp, slot, this.#limitsByDev.get(dev)!);
    this.#conns.set(qp, c);
    this.#byCore.set(c.core, c);
    this.#byQpn.get(dev)!.set(qp.qpn, c);
    // The one small receive for the AuthenticateRequest (recvId 0).
    qp.postRecv({ wrId: 0, sgList: [{ addr: pre.mr.addr + slot * PREAUTH_RECEIVE, length: PREAUTH_RECEIVE, lkey: pre.mr.lkey }] });
    c.timer = setTimeout(() => this.#tick(c), c.limits.authTimeoutMs + 5);
    c.timer.unref?.();
  }

  #tick(c: Conn): void {
    c.core.tick(performance.now() + 10);
    this.#run(c);
  }

  async #cqLoop(dev: Device, cq: CompletionQueue): Promise<void> {
    const byQpn = this.#byQpn.get(dev)!;
    for (;;) {
      try {
        await cq.wait();
      } catch {
        return;
      }
      const touched = new Set<Conn>();
      for (;;) {
        const wcs = cq.poll(256);
        if (wcs.length === 0) break;
        for (const wc of wcs) {
          const c = byQpn.get(wc.qpn);
          if (!c || c.destroyed) continue;
          this.#onWc(c, wc);
          touched.add(c);
        }
      }
      for (const c of touched) this.#run(c);
    }
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
      c.core.receive(id, view.subarray(0, wc.byteLen), performance.now());
    } else if (wc.wrId === TERMINAL_WR) {
      this.#destroy(c);
    } else if (wc.opcode === WcOpcode.RdmaWrite) {
      c.core.writeDone(Number(wc.wrId));
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
    const acts = c.core.take();
    for (const a of acts) {
      // With the QP gone only the file system and the bookkeeping still matter.
      if (c.destroyed && (a.t === 'post' || a.t === 'repost' || a.t === 'send' || a.t === 'block' || a.t === 'write' || a.t === 'provision')) continue;
      try {
        this.#act(c, a);
      } catch {
        // A verbs call refused (a full queue, the QP in ERROR): the connection cannot go on.
        if (!c.core.state.startsWith('clos')) c.core.close();
        this.#destroyQp(c);
      }
    }
    if (c.core.actions.length > 0) this.#run(c);
  }

  #act(c: Conn, a: ServerAction): void {
    const qp = c.qp;
    switch (a.t) {
      case 'provision':
        return this.#provision(c);
      case 'post':
        for (let i = 0; i < a.n; i++) this.#postBuf(c, this.#takeBuf(c));
        return;
      case 'repost':
        return this.#postBuf(c, a.recvId);
      case 'retire':
        if (a.recvId === 0) {
          this.#preauth.get(c.pd.device)!.free.push(c.preauthSlot);
          c.preauthSlot = -1;
        } else c.freeBufs.push(a.recvId);
        return;
      case 'send': {
        const s = c.scratch ?? this.#provisionScratch(c);
        s.buffer.set(a.bytes, 0);
        qp.postSend({ wrId: a.last ? TERMINAL_WR : 0, opcode: Opcode.Send, sgList: [{ addr: s.addr, length: a.bytes.length, lkey: s.lkey }], signaled: a.last === true });
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
        const st = c.staging!;
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

  #provisionScratch(c: Conn): MemoryRegion {
    c.scratch = c.pd.regMr(4096, Access.LocalWrite);
    c.registered += 4096;
    return c.scratch;
  }

  #provision(c: Conn): void {
    const L = c.limits;
    const size = (receiveSize(L) + 63) & ~63;
    const n = L.credits + RESERVE;
    const mr = c.pd.regMr(size * n, Access.LocalWrite);
    c.recvMrs.push(mr);
    c.registered += size * n;
    for (let i = 0; i < n; i++) {
      const id = c.nextRecvId++;
      c.bufs.set(id, { addr: mr.addr + i * size, length: size, lkey: mr.lkey, mr, off: i * size });
      c.freeBufs.push(id);
    }
    c.staging = c.pd.regMr(L.rwDepth * L.maxReadWriteSize, Access.LocalWrite);
    c.registered += L.rwDepth * L.maxReadWriteSize;
    if (!c.scratch) this.#provisionScratch(c);
  }

  #takeBuf(c: Conn): number {
    const id = c.freeBufs.pop();
    if (id !== undefined) return id;
    // The target rose above what was provisioned: one more buffer.
    const size = (receiveSize(c.limits) + 63) & ~63;
    const mr = c.pd.regMr(size, Access.LocalWrite);
    c.recvMrs.push(mr);
    c.registered += size;
    const nid = c.nextRecvId++;
    c.bufs.set(nid, { addr: mr.addr, length: size, lkey: mr.lkey, mr, off: 0 });
    return nid;
  }

  #postBuf(c: Conn, id: number): void {
    const b = c.bufs.get(id)!;
    c.qp.postRecv({ wrId: id, sgList: [{ addr: b.addr, length: b.length, lkey: b.lkey }] });
  }

  async #fs(c: Conn, token: number, w: FsOp): Promise<void> {
    let r: FsResult;
    try {
      r = await this.#doFs(c, w);
    } catch (e) {
      r = { status: statusOf(e) };
    }
    // Even for a connection being torn down: the core closes what a late open opened.
    c.core.fsDone(token, r);
    this.#run(c);
  }

  async #doFs(c: Conn, w: FsOp): Promise<FsResult> {
    const L = c.limits;
    switch (w.op) {
      case 'open': {
        const o = await this.jail.open(w.parts, w.access, w.mode, w.fsync);
        if (o.status !== FileStatus.Success || !('file' in o)) return { status: o.status };
        const h = c.nextHandle++;
        c.files.set(h, o.file);
        return { status: FileStatus.Success, handle: h, value: o.file.size };
      }
      case 'read': {
        const view = c.staging!.buffer.subarray(w.staging * L.maxReadWriteSize, (w.staging + 1) * L.maxReadWriteSize);
        return { status: FileStatus.Success, value: await c.files.get(w.handle)!.read(view, w.length, w.position) };
      }
      case 'readv': {
        const view = c.staging!.buffer.subarray(w.staging * L.maxReadWriteSize, (w.staging + 1) * L.maxReadWriteSize);
        const f = c.files.get(w.handle)!;
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
        const buf = this.#recvView(c, w.recvId)!;
        const f = c.files.get(w.handle)!;
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
        const f = c.files.get(w.handle);
        c.files.delete(w.handle);
        return { status: f ? await f.close(w.commit) : FileStatus.Success };
      }
      case 'list': {
        const view = c.staging!.buffer.subarray(w.staging * L.maxReadWriteSize, w.staging * L.maxReadWriteSize + w.maxBytes);
        const r = await this.jail.list(w.parts, w.cookie, view);
        return { status: r.status, value: r.bytes, next: r.next };
      }
    }
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
    if (c.timer) clearTimeout(c.timer);
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
    for (const f of c.files.values()) void f.close(false);
    c.files.clear();
    for (const mr of c.recvMrs) if (mr.valid) mr.deregister();
    if (c.staging?.valid) c.staging.deregister();
    if (c.scratch?.valid) c.scratch.deregister();
    c.recvMrs = [];
    c.registered = 0;
    if (c.preauthSlot >= 0) {
      this.#preauth.get(c.pd.device)?.free.push(c.preauthSlot);
      c.preauthSlot = -1;
    }
    this.#conns.delete(c.qp);
    this.#byCore.delete(c.core);
  }

  stats(): FileServerStats {
    let openFiles = 0;
    let registered = 0;
    for (const c of this.#conns.values()) {
      openFiles += c.files.size;
      registered += c.registered;
    }
    return {
      ...this.counters, ...this.pipeCounters, ...this.sessions.counters, ...this.dedupCounters,
      sessions: this.sessions.size, liveConnections: this.#conns.size, openFiles, pipes: this.#pipes.size, pipesRefused: this.#pipesRefused,
      connectionsRefused: this.#connectionsRefused, registeredBytes: registered,
    };
  }

  /** Lower (or raise back) the credits every bound connection's client may hold (DeltaCredit). */
  setCredits(n: number): void {
    for (const c of this.#conns.values()) {
      c.core.setCreditTarget(n);
      this.#run(c);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const l of this.#listeners) l.close();
    for (const l of this.#channelListeners) l.close();
    for (const s of this.#pipes) s.destroy();
    await new Promise<void>((res) => (this.#net ? this.#net.close(() => res()) : res()));
    for (const c of [...this.#conns.values()]) this.#teardown(c);
    // Let file-system work drain (bounded): connections free themselves when it has.
    for (let i = 0; i < 200 && this.#conns.size > 0; i++) await new Promise((r) => setTimeout(r, 10));
    for (const c of [...this.#conns.values()]) this.#free(c);
    for (const d of Object.values(this.devices)) await d.close();
  }
}

/**
 * Serve `dir` to file clients. Without `token` a random one is made (server.token): give it to
 * the clients out of band.
 */
export async function serveFiles(dir: string, opts: ServeOptions = {}): Promise<FileServer> {
  // Hex, not base64url: a token starting with '-' is read as an option by a command line
  // (`sabre ls --token -x…` fails in node's parseArgs), and base64url starts with one 1 time in 64.
  const token = opts.token ?? randomBytes(20).toString('hex');
  if (typeof token !== 'string' || token.length === 0) throw new SabreError(ErrorCode.InvalidArgument, 'token must be a non-empty string');
  const jail = await Jail.open(dir);
  const s = new FileServer(jail, opts, token);
  try {
    await s.start();
  } catch (e) {
    await s.close().catch(() => {});
    throw e;
  }
  return s;
}
