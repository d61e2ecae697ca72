// The server's sessions, sans-I/O (a clock and a random source are passed in): one per
// authenticated control pipe, named by its resume key, holding the single-use keys its negotiates
// minted and the RDMA connections bound to it. Every table here has a bound and a counter.
import { FILE_KEY_ID_LEN, FILE_RESUME_KEY_LEN, FileStatus } from '../wire/files-spec.js';
import { authKey, connectionProof, sameBytes } from './auth.js';

export interface SessionLimits {
  /** Sessions (authenticated pipes) at once. */
  maxSessions: number;
  /** RDMA connections bound to one session. */
  maxConnectionsPerSession: number;
  /** Negotiated keys not yet used, per session. */
  maxPendingKeys: number;
  /** How long a negotiated key stays usable (ms). */
  keyTtlMs: number;
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = { maxSessions: 64, maxConnectionsPerSession: 4, maxPendingKeys: 4, keyTtlMs: 30_000 };

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

  constructor(resumeKey: Uint8Array, kSession: Uint8Array) {
    this.resumeKey = resumeKey;
    this.kSession = kSession;
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
  sessionLimit: number;
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
  readonly #byKey = new Map<string, Session>();
  readonly counters: SessionCounters = {
    sessionsOpened: 0, sessionLimit: 0, keysMinted: 0, keyLimit: 0, authOk: 0, authUnknownSession: 0, authUnknownKey: 0,
    authExpiredKey: 0, authBadMac: 0, connectionLimit: 0,
  };

  constructor(limits: Partial<SessionLimits>, random: RandomBytes) {
    this.limits = { ...DEFAULT_SESSION_LIMITS, ...limits };
    this.#random = random;
  }

  get size(): number {
    return this.#byKey.size;
  }

  /** A new session for an authenticated pipe; undefined at the limit (counted). */
  open(kSession: Uint8Array): Session | undefined {
    if (this.#byKey.size >= this.limits.maxSessions) {
      this.counters.sessionLimit++;
      return undefined;
    }
    const s = new Session(this.#random(FILE_RESUME_KEY_LEN), kSession);
    this.#byKey.set(hex(s.resumeKey), s);
    this.counters.sessionsOpened++;
    return s;
  }

  /** Forget a session (its pipe closed); returns the connections bound to it, for the caller to tear down. */
  close(s: Session): unknown[] {
    s.closed = true;
    this.#byKey.delete(hex(s.resumeKey));
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
    s.connections.delete(conn);
  }
}
