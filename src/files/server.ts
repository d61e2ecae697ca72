// The file server: the I/O shell around the sans-I/O cores. A TCP listener for control pipes
// (./pipe.ts), one sabre device per provider with a cm listener on FILE_SERVICE whose RDMA
// connections ./server-rdma.ts admits and serves (a ServerConnection, ./server-core.ts, each),
// and the dedup channels (./dedup.ts).
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
import { Lifecycle } from '../core/lifecycle.js';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
// The verbs and cm API (what src/index.ts exports), from their modules: the file service sits above cm and verbs.
import type { CmListener } from '../cm/index.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { type Device, openDevice } from '../verbs/device.js';
import { FileProvider } from '../wire/files-spec.js';
import { Channel } from '../channel/channel.js';
import { listenChannels, type ChannelListener } from '../channel/listen.js';
import { checkDedupLimits, DEDUP_AUTH_MAX, DEDUP_MAX_BYTES, DEDUP_MAX_TRANSFERS, FILE_DEDUP_SERVICE, newDedupCounters, serveDedupChannel } from './dedup.js';
import { Jail } from './jail.js';
import { checkMaxOpenFiles, defaultMaxOpenFiles, OpenFileBudget } from './open-files.js';
import { type AdmissionLimits, LoginBackoff } from './admission.js';
import { type Offer, newPipeCounters } from './pipe.js';
import { DEFAULT_PIPE_ADMISSION, PipeShell } from './pipes.js';
import { DEFAULT_SERVER_LIMITS, type ServerLimits, newServerCounters } from './server-core.js';
import { DEFAULT_CONNECTIONS_PER_HOST, type RdmaContext, RdmaConnections } from './server-rdma.js';
import { checkServeOptions } from './serve-checks.js';
import { SessionTable } from './sessions.js';
import { noSweep, type PartSweepCounters } from './sweep.js';
import type { FileServerStats, Provider, ServeOptions } from './serve-options.js';

export { DEFAULT_CONNECTIONS_PER_HOST };
export type { FileServerStats, Provider, ServeOptions };

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
  /** The RDMA connections: who gets in, and the shell of each. */
  readonly #rdma: RdmaConnections;
  /** Shortest token that is not called weak (docs/files.md: how long a token must be). */
  static readonly STRONG_TOKEN = 16;
  #net: net.Server | undefined;
  readonly #life = new Lifecycle(); // close() once: every call gets the first one's promise
  /** Unauthenticated RDMA connections at most (ServeOptions.maxUnauthenticated): dedup channels waiting for their AUTH too. */
  readonly #maxUnauthenticated: number;

  /** @internal use serveFiles */
  constructor(jail: Jail, opts: ServeOptions, token: string) {
    this.jail = jail;
    this.#opts = opts;
    this.token = token;
    this.limits = { ...DEFAULT_SERVER_LIMITS, ...opts.limits, readOnly: opts.readOnly ?? opts.limits?.readOnly ?? false, fsync: opts.fsync ?? opts.limits?.fsync ?? false };
    this.sessions = new SessionTable(opts.sessions ?? {}, (n) => new Uint8Array(randomBytes(n)));
    this.#maxUnauthenticated = opts.maxUnauthenticated ?? 16;
    this.openFiles = new OpenFileBudget(opts.maxOpenFilesTotal ?? defaultMaxOpenFiles());
    this.#rdma = new RdmaConnections(this.#rdmaContext(), {
      maxConnections: opts.maxConnections ?? 64, maxUnauthenticated: this.#maxUnauthenticated, maxUnauthenticatedPerHost: opts.maxUnauthenticatedPerHost ?? 4,
      maxConnectionsPerHost: opts.maxConnectionsPerHost ?? DEFAULT_CONNECTIONS_PER_HOST,
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
          if (!this.#rdma.teardownCore(k) && k instanceof Channel) void k.close();
        }
      },
    });
  }

  /** The token is shorter than STRONG_TOKEN characters: online guessing is rationed, not impossible. */
  get weakToken(): boolean {
    return this.token.length < FileServer.STRONG_TOKEN;
  }

  #rdmaContext(): RdmaContext {
    return { jail: this.jail, sessions: this.sessions, counters: this.counters, openFiles: this.openFiles, closing: () => this.#life.closing };
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
      this.#listeners.push(this.#rdma.listen(dev, this.limitsFor(t)));
      if (this.#opts.dedup !== false) this.#listenDedup(dev);
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

  /** Dedup channels of the sessions (./dedup.ts): authenticated by their first message. */
  #listenDedup(dev: Device): void {
    const max = this.#opts.dedupMaxBytes ?? DEDUP_MAX_BYTES;
    // Untrusted until the AUTH's MAC is verified (serveDedupChannel calls authorize()).
    const l = listenChannels(dev, { service: FILE_DEDUP_SERVICE, maxMessage: max, backlog: 16, preauth: { maxMessage: DEDUP_AUTH_MAX } });
    this.#channelListeners.push(l);
    const ctx = {
      sessions: this.sessions, jail: this.jail, readOnly: this.#opts.readOnly ?? false, fsync: this.#opts.fsync ?? false, maxBytes: max, counters: this.dedupCounters, openFiles: this.openFiles,
      pending: this.#dedupPending, maxPending: this.#maxUnauthenticated, maxTransfers: this.#opts.dedupMaxTransfers ?? DEDUP_MAX_TRANSFERS,
    };
    void (async () => {
      for await (const ch of l) void serveDedupChannel(ch, ctx);
    })().catch(() => {});
  }

  stats(): FileServerStats {
    return {
      ...this.counters, ...this.pipeCounters, ...this.sessions.counters, ...this.dedupCounters, ...this.#pipes.counters, ...this.#pipes.backoff.counters,
      ...this.openFiles.counters(), ...this.jail.listCache.counters(), ...this.partSweep, ...this.#rdma.stats(), sessions: this.sessions.size, sessionHosts: this.sessions.hosts, pipes: this.#pipes.size,
      unauthenticatedPipes: this.#pipes.admission.unauthenticated, loginSources: this.#pipes.backoff.size, dedupPending: this.#dedupPending.size,
      halfOpenEvicted: this.#listeners.reduce((n, l) => n + l.counters.halfOpenEvicted, 0),
    };
  }

  /** Lower (or raise back) the credits every bound connection's client may hold (DeltaCredit). */
  setCredits(n: number): void {
    this.#rdma.setCredits(n);
  }

  close(): Promise<void> {
    return this.#life.close(async () => {
      for (const l of this.#listeners) l.close();
      for (const l of this.#channelListeners) l.close();
      this.#pipes.close();
      await new Promise<void>((res) => (this.#net ? this.#net.close(() => res()) : res()));
      await this.#rdma.close();
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
