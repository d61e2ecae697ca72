// The control pipes' socket shell: the TCP listener, one PipeServer core (./pipe.ts) per
// socket, its deadline timer, and who may hold a pipe (./admission.ts): per source, a pipe
// that has not proved the token is one of few, and the oldest of them makes room for a newer one
// (told why: Status(SessionLimit) with the bound's FILE_EVICTIONS code, then a lingering close).
import { peerDeadline } from '../core/deadline.js';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { hostKey } from '../core/address.js';
import { Lingering } from '../core/refuse.js';
import { Admission, type AdmissionLimits, type EvictWhy, LoginBackoff } from './admission.js';
import { type Offer, PIPE_REFUSED, type PipeCounters, PipeServer, pipeEvicted } from './pipe.js';
import type { Session, SessionTable } from './sessions.js';

export interface PipeShellCounters {
  /** Pipes refused (every slot held by an authenticated pipe, or the source holds its most). */
  pipesRefused: number;
  /** Unauthenticated pipes closed to make room for a newer one (told + untold). */
  pipesEvicted: number;
  /** Evicted pipes written Status(SessionLimit) naming the bound, then closed after a linger (REFUSED_LINGER_MS). */
  pipeEvictionsTold: number;
  /** Evicted pipes that were closing already (their core had closed them, or the peer had), or cut (past the linger bound): nothing more could be said. */
  pipeEvictionsUntold: number;
  /** Pipes refused or evicted while REFUSED_LINGER_MAX others lingered: destroyed at once, untold. */
  pipeRefusalsCut: number;
  /** Refused or evicted pipes lingering now (at most REFUSED_LINGER_MAX). */
  pipesLingering: number;
  /** Times a pipe was read no further until its peer had read the answers already written. */
  pipeStalls: number;
}

export const DEFAULT_PIPE_ADMISSION: AdmissionLimits = { max: 256, maxUnauthenticated: 64, maxUnauthenticatedPerHost: 8, maxPerHost: 32 };

export interface PipeShellOptions {
  token: string;
  sessions: SessionTable;
  offer: () => Offer;
  counters: PipeCounters;
  handshakeMs?: number;
  /** The session of a closed pipe ended: tear down what was bound to it. */
  ended: (s: Session) => void;
}

export class PipeShell {
  readonly admission: Admission<net.Socket>;
  readonly backoff: LoginBackoff;
  /** Each pipe, and how to close it for a newer one. */
  readonly #pipes = new Map<net.Socket, (why: EvictWhy) => void>();
  readonly #o: PipeShellOptions;
  /** Refused and evicted pipes lingering for their Status to be read (bounded in number). */
  readonly #lingering = new Lingering();

  #closed = false;
  #stalls = 0;
  #told = 0;
  #untold = 0;

  constructor(limits: AdmissionLimits, backoff: LoginBackoff, o: PipeShellOptions) {
    this.admission = new Admission(limits);
    this.backoff = backoff;
    this.#o = o;
  }

  get size(): number {
    return this.#pipes.size;
  }

  get counters(): PipeShellCounters {
    return {
      pipesRefused: this.admission.counters.refused, pipesEvicted: this.admission.counters.evicted, pipeStalls: this.#stalls,
      pipeEvictionsTold: this.#told, pipeEvictionsUntold: this.#untold, pipeRefusalsCut: this.#lingering.cut, pipesLingering: this.#lingering.size,
    };
  }

  close(): void {
    this.#closed = true;
    for (const s of this.#pipes.keys()) s.destroy();
  }

  accept(s: net.Socket): void {
    const host = hostKey(s.remoteAddress);
    if (this.#closed) {
      this.admission.counters.refused++;
      s.destroy();
      return;
    }
    const a = this.admission.admit(s, host);
    // Status(SessionLimit, the bound): the client fails with ERR_FILE_SESSION_LIMIT naming it, not a bare close.
    if (!a.ok) return void this.#lingering.refuse(s, PIPE_REFUSED[a.bound]);
    // Out of the bounds already (Admission removed them): each is told why, then goes.
    for (let i = 0; i < a.evict.length; i++) this.#pipes.get(a.evict[i]!)?.(a.why[i]!);
    s.setNoDelay(true);
    s.setKeepAlive(true, 10_000);
    const o = this.#o;
    const core = new PipeServer({
      token: o.token, sessions: o.sessions, offer: o.offer(), random: (n) => new Uint8Array(randomBytes(n)), counters: o.counters, now: performance.now(),
      host, backoff: this.backoff, ...(o.handshakeMs !== undefined ? { handshakeMs: o.handshakeMs } : {}),
    });
    // A peer deadline (core/deadline.ts): after a stall of this process, the proof that came in
    // time is read before the pipe is timed out.
    let timer: { clear(): void } | undefined;
    let armed = Infinity;
    const arm = (): void => {
      const d = core.pollTimeout() ?? Infinity;
      if (d === armed) return;
      timer?.clear();
      timer = undefined;
      armed = d;
      if (d === Infinity) return;
      timer = peerDeadline(Math.max(0, d - performance.now()) + 1, () => {
        armed = Infinity;
        timer = undefined;
        core.handleTimeout(Math.max(performance.now(), d));
        run();
      });
    };
    // Every frame read may be answered: a peer that does not read its answers would make them
    // pile up here without bound, so the pipe is read no further until they have gone out.
    const resume = (): void => {
      s.resume();
    };
    let detached = false;
    const run = (): void => {
      if (detached) return;
      for (let a = core.pollAction(); a; a = core.pollAction()) {
        if (a.kind === 'close') s.end(() => s.destroy());
        else if (!s.write(a.bytes) && !s.isPaused()) {
          this.#stalls++;
          s.pause();
          s.once('drain', resume);
        }
      }
      if (core.state === 'ready') {
        this.admission.authenticated(s);
        // The session table ends the pipe of a session it evicts (./sessions.ts).
        core.session!.end ??= () => s.destroy();
      }
      arm();
    };
    const onData = (chunk: Buffer): void => {
      core.handleReceive(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength), performance.now());
      run();
    };
    // Closed before it authenticated, for a newer pipe: the core is detached (nothing more is
    // read into it, its deadline goes, it writes nothing more), and after what it wrote already
    // the pipe is written Status(SessionLimit) naming the bound and lingers closed, what the
    // peer sends meanwhile dropped unread (core/refuse.ts) — or, with REFUSED_LINGER_MAX pipes
    // lingering already (a flood), destroyed at once, untold.
    const evict = (why: EvictWhy): void => {
      detached = true;
      timer?.clear();
      timer = undefined;
      s.removeListener('data', onData);
      s.removeListener('drain', resume);
      if (s.destroyed || s.writableEnded) {
        this.#untold++;
        return;
      }
      if (this.#lingering.refuse(s, pipeEvicted(why))) this.#told++;
      else this.#untold++;
    };
    this.#pipes.set(s, evict);
    arm();
    s.on('data', onData);
    s.on('error', () => {});
    s.on('close', () => {
      timer?.clear();
      this.#pipes.delete(s);
      this.admission.remove(s);
      // The session dies with its pipe, and so does every RDMA connection bound to it.
      if (core.session) o.ended(core.session);
    });
  }
}
