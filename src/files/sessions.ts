// The server's sessions, sans-I/O (a clock and a random source are passed in): one per
// authenticated control pipe, named by its resume key, holding the single-use keys its negotiates
// minted and the RDMA connections bound to it. Every table here has a bound and a counter.
//
// An authenticated pipe has no deadline, so one token holder could take every session by
// opening pipes and doing nothing more. Two bounds keep others in: a source host holds at most
// maxSessionsPerHost sessions, and when the table is full a new session takes the place of the
// one that has been without a bound connection (RDMA connection or dedup channel) longest, if
// that is at least idleEvictMs. A session with a connection bound is never evicted: an honest
// client, busy or idle, holds its RDMA connection for as long as it is connected.
import { FILE_KEY_ID_LEN, FILE_RESUME_KEY_LEN, FileStatus } from '../wire/files-spec.js';
import { authKey, connectionProof, sameBytes } from './auth.js';

export interface SessionLimits {
  /** Sessions (authenticated pipes) at once. */
  maxSessions: number;
  /** Sessions of one source host (the pipe's address, ./admission.ts hostKey) at once. */
  maxSessionsPerHost: number;
  /** A full table closes a session without a bound connection for this long (ms) to make room for a new one. */
  idleEvictMs: number;
  /** RDMA connections bound to one session. */
  maxConnectionsPerSession: number;
  /** Negotiated keys not yet used, per session. */
  maxPendingKeys: number;
  /** How long a negotiated key stays usable (ms). */
  keyTtlMs: number;
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = { maxSessions: 64, maxSessionsPerHost: 16, idleEvictMs: 10_000, maxConnectionsPerSession: 4, maxPendingKeys: 4, keyTtlMs: 30_000 };

export type RandomBytes = (n: number) => Uint8Array;

interface PendingKey {
  kAuth: Uint8Array;
  expires: number;
}

export class Session {
  readonly resumeKey: Uint8Array;
  readonly kSession: Uint8Array;
  readonly keys = new Map<string, PendingKey>();
  readonly connections = new Set<unknown>();
  closed = false;
  /** The source host it is counted against (undefined: none). */
  readonly host: string | undefined;
  /** Since when it has had no connection bound (its opening, or its last unbind). */
  idleSince: number;
  /** Close its pipe (set by the pipe's shell): how an eviction reaches the socket. */
  end: (() => void) | undefined;

  constructor(resumeKey: Uint8Array, kSession: Uint8Array, host: string | undefined, now: number) {
    this.resumeKey = resumeKey;
    this.kSession = kSession;
    this.host = host;
    this.idleSince = now;
  }
}

export interface AuthAttempt {
  resumeKey: Uint8Array;
  keyId: Uint8Array;
  nonce: Uint8Array;
  mac: Uint8Array;
  params: Uint8Array;
}

export type AuthResult = { ok: true; session: Session; kAuth: Uint8Array } | { ok: false; status: number; why: string };

export interface SessionCounters {
  sessionsOpened: number;
  /** Sessions refused: the table full with none evictable, or the source host at maxSessionsPerHost. */
  sessionLimit: number;
  /** Of those, refused for the host's cap. */
  sessionHostLimit: number;
  /** Sessions closed (their pipes too) to make room, idle past idleEvictMs without a connection. */
  sessionsEvicted: number;
  keysMinted: number;
  keyLimit: number;
  authOk: number;
  authUnknownSession: number;
  authUnknownKey: number;
  authExpiredKey: number;
  authBadMac: number;
  connectionLimit: number;
}

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');

export class SessionTable {
  readonly limits: SessionLimits;
  readonly #random: RandomBytes;
  readonly #now: () => number;
  readonly #byKey = new Map<string, Session>();
  /** Sessions per source host (a host with none has no entry): at most maxSessions entries. */
  readonly #byHost = new Map<string, number>();
  readonly counters: SessionCounters = {
    sessionsOpened: 0, sessionLimit: 0, sessionHostLimit: 0, sessionsEvicted: 0, keysMinted: 0, keyLimit: 0, authOk: 0, authUnknownSession: 0, authUnknownKey: 0,
    authExpiredKey: 0, authBadMac: 0, connectionLimit: 0,
  };

  /** `now`: a monotonic clock in ms (for idleEvictMs). */
  constructor(limits: Partial<SessionLimits>, random: RandomBytes, now: () => number = () => performance.now()) {
    this.limits = { ...DEFAULT_SESSION_LIMITS, ...limits };
    this.#random = random;
    this.#now = now;
  }

  get size(): number {
    return this.#byKey.size;
  }

  /** Source hosts holding a session now. */
  get hosts(): number {
    return this.#byHost.size;
  }

  /**
   * A new session for a pipe authenticated from `host` (undefined: counted against no host);
   * undefined at a limit (counted). A full table first evicts the session longest without a
   * connection, if idle past idleEvictMs: it is closed and its pipe ended.
   */
  open(kSession: Uint8Array, host?: string): Session | undefined {
    if (host !== undefined && (this.#byHost.get(host) ?? 0) >= this.limits.maxSessionsPerHost) {
      this.counters.sessionLimit++;
      this.counters.sessionHostLimit++;
      return undefined;
    }
    const now = this.#now();
    if (this.#byKey.size >= this.limits.maxSessions) {
      const idle = this.#longestIdle(now);
      if (!idle) {
        this.counters.sessionLimit++;
        return undefined;
      }
      this.counters.sessionsEvicted++;
      // No connection is bound to it: nothing for the caller to tear down but its pipe.
      this.close(idle);
      idle.end?.();
    }
    const s = new Session(this.#random(FILE_RESUME_KEY_LEN), kSession, host, now);
    this.#byKey.set(hex(s.resumeKey), s);
    if (host !== undefined) this.#byHost.set(host, (this.#byHost.get(host) ?? 0) + 1);
    this.counters.sessionsOpened++;
    return s;
  }

  /** The session without a bound connection longest, if that is at least idleEvictMs. */
  #longestIdle(now: number): Session | undefined {
    let best: Session | undefined;
    for (const s of this.#byKey.values()) if (s.connections.size === 0 && (!best || s.idleSince < best.idleSince)) best = s;
    return best && now - best.idleSince >= this.limits.idleEvictMs ? best : undefined;
  }

  /** Forget a session (its pipe closed); returns the connections bound to it, for the caller to tear down. */
  close(s: Session): unknown[] {
    if (s.closed) return [];
    s.closed = true;
    this.#byKey.delete(hex(s.resumeKey));
    if (s.host !== undefined) {
      const n = (this.#byHost.get(s.host) ?? 1) - 1;
      if (n > 0) this.#byHost.set(s.host, n);
      else this.#byHost.delete(s.host);
    }
    s.keys.clear();
    const conns = [...s.connections];
    s.connections.clear();
    return conns;
  }

  /** A fresh single-use key for one RDMA connection of `s`; undefined at the limit (counted). */
  mintKey(s: Session, now: number): Uint8Array | undefined {
    for (const [k, v] of s.keys) if (v.expires <= now) s.keys.delete(k);
    if (s.closed || s.keys.size >= this.limits.maxPendingKeys || s.keys.size + s.connections.size >= this.limits.maxConnectionsPerSession + this.limits.maxPendingKeys) {
      this.counters.keyLimit++;
      return undefined;
    }
    const keyId = this.#random(FILE_KEY_ID_LEN);
    s.keys.set(hex(keyId), { kAuth: authKey(s.kSession, keyId), expires: now + this.limits.keyTtlMs });
    this.counters.keysMinted++;
    return keyId;
  }

  /**
   * Check an AuthenticateRequest. The key is consumed by the attempt whatever its outcome, so a
   * key can neither be replayed nor guessed at online.
   */
  authenticate(a: AuthAttempt, now: number): AuthResult {
    const s = this.#byKey.get(hex(a.resumeKey));
    if (!s || s.closed || !sameBytes(s.resumeKey, a.resumeKey)) {
      this.counters.authUnknownSession++;
      return { ok: false, status: FileStatus.AccessDenied, why: 'no session has this resume key' };
    }
    const id = hex(a.keyId);
    const k = s.keys.get(id);
    if (!k) {
      this.counters.authUnknownKey++;
      return { ok: false, status: FileStatus.AccessDenied, why: 'the key is unknown or was already used' };
    }
    s.keys.delete(id);
    if (k.expires <= now) {
      this.counters.authExpiredKey++;
      return { ok: false, status: FileStatus.AccessDenied, why: 'the key expired' };
    }
    if (!sameBytes(connectionProof(k.kAuth, a.resumeKey, a.keyId, a.nonce, a.params), a.mac)) {
      this.counters.authBadMac++;
      return { ok: false, status: FileStatus.AccessDenied, why: 'the proof does not match the key' };
    }
    this.counters.authOk++;
    return { ok: true, session: s, kAuth: k.kAuth };
  }

  bind(s: Session, conn: unknown): boolean {
    if (s.closed || s.connections.size >= this.limits.maxConnectionsPerSession) {
      this.counters.connectionLimit++;
      return false;
    }
    s.connections.add(conn);
    return true;
  }

  unbind(s: Session, conn: unknown): void {
    if (s.connections.delete(conn) && s.connections.size === 0) s.idleSince = this.#now();
  }
}
