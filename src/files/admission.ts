// Who may hold the file server's resources before proving the token, sans-I/O (a clock is passed
// in): per-source admission of connections not yet authenticated (pipes and RDMA connections),
// and the backoff of failed token proofs per source.
//
// Admission. Connections that have not authenticated yet are few (a global cap, below the total,
// so authenticated ones always have room) and few per source host. A new connection past either
// cap evicts the oldest unauthenticated one of the source holding the most, never an
// authenticated one: a peer that only opens connections can fill its own share and churn it,
// never lock others out. Only the total cap refuses (every slot is then an authenticated one).
//
// Backoff. A source whose token proofs failed more than `free` times has each further proof
// checked no earlier than `base · 2^(failures − free)` (at most `max`) after its previous one,
// whatever the number of connections it spreads them over: the check is what is rationed, not
// the answer, so hanging up early gains nothing. A proof whose turn would come after its pipe's
// handshake deadline is refused unchecked. Sources are remembered for `memoryMs` after their last
// failure, in a bounded table; past it, new sources share an entry per network (IPv4 /24, IPv6
// /48: `networkKey`), as many more, and past those one entry, so a source with many addresses is
// rationed as few. (With the one shared entry alone, a stranger that filled the table from
// `maxSources` + 1 addresses — one IPv6 /48 holds 65,536 /64s — and went on guessing from the
// others had every newcomer's proof refused unchecked behind its own: no new client anywhere
// could log in.)
import type { EvictionBound, RefusalBound } from '../wire/files-spec.js';

export interface AdmissionLimits {
  /** Connections at once, authenticated or not. */
  max: number;
  /** Unauthenticated connections at once, all sources (the rest of `max` is kept for authenticated ones). */
  maxUnauthenticated: number;
  /** Unauthenticated connections of one source. */
  maxUnauthenticatedPerHost: number;
  /** Connections of one source, authenticated or not. */
  maxPerHost: number;
}

export interface AdmissionCounters {
  /** Refused: the total (or the source's total) is all authenticated connections. */
  refused: number;
  /** Of those, refused for the source's total (maxPerHost). */
  hostRefused: number;
  /** Unauthenticated connections closed to make room for a newer one. */
  evicted: number;
}

/**
 * Which bound an eviction made room under: the source's unauthenticated ones
 * (maxUnauthenticatedPerHost), the source's total (maxPerHost), all unauthenticated ones
 * (maxUnauthenticated), the total (max). The server tells the evicted connection (FILE_EVICTIONS).
 */
export type EvictWhy = EvictionBound;

/** `why[i]`: the bound `evict[i]` was closed under; refused: the bound all of whose connections are authenticated. */
export type Admit<T> = { ok: true; evict: T[]; why: EvictWhy[] } | { ok: false; bound: RefusalBound; why: string };

interface Entry {
  host: string;
  authenticated: boolean;
  /** Arrival order (ties of #busiest go to the oldest pending connection). */
  seq: number;
}

/** Live connections by source; each unauthenticated one in arrival order. */
export class Admission<T> {
  readonly limits: AdmissionLimits;
  readonly counters: AdmissionCounters = { refused: 0, hostRefused: 0, evicted: 0 };
  readonly #all = new Map<T, Entry>();
  /** Per source: its connections (authenticated or not), and its unauthenticated ones in arrival order. */
  readonly #hosts = new Map<string, { n: number; pending: Set<T> }>();
  #pending = 0;
  #seq = 0;

  constructor(limits: AdmissionLimits) {
    this.limits = limits;
  }

  get size(): number {
    return this.#all.size;
  }

  get unauthenticated(): number {
    return this.#pending;
  }

  /** Sources with a connection now (bounded by `max`: an entry lives while a connection does). */
  get hosts(): number {
    return this.#hosts.size;
  }

  /** Unauthenticated connections of `host` now. */
  pendingOf(host: string): number {
    return this.#hosts.get(host)?.pending.size ?? 0;
  }

  /**
   * Admit `conn` from `host` as unauthenticated. The connections in `evict` were dropped from the
   * table to make room: the caller closes them.
   */
  admit(conn: T, host: string): Admit<T> {
    return this.#add(conn, host, false);
  }

  /**
   * Record `conn`, authenticated already (it proved the token before its source was known). Held
   * to the same totals as admit (else a source could pass maxPerHost by authenticating fast):
   * `evict` as there, refused (counted) where its source, or the total, is all authenticated.
   */
  enter(conn: T, host: string): Admit<T> {
    if (this.#all.has(conn)) return { ok: true, evict: [], why: [] };
    return this.#add(conn, host, true);
  }

  /**
   * Whether a new connection from `host` would be refused now, counted as admit / enter count
   * one (without an entry: it is never made). What the server asks of a connect before it makes
   * a QP for it, so the refusal is the cm's answer, with a reason, rather than a teardown after
   * it: 'hostTotal' (the source holds maxPerHost, all authenticated), 'total' (max, all
   * authenticated), or undefined (admit would take it, evicting an unauthenticated one at most).
   */
  refuseNew(host: string): RefusalBound | undefined {
    const h = this.#hosts.get(host);
    const why = h && h.n >= this.limits.maxPerHost && h.pending.size === 0 ? 'hostTotal' : this.#all.size >= this.limits.max && this.#pending === 0 ? 'total' : undefined;
    if (why) this.counters.refused++;
    if (why === 'hostTotal') this.counters.hostRefused++;
    return why;
  }

  #add(conn: T, host: string, authenticated: boolean): Admit<T> {
    const L = this.limits;
    const evict: T[] = [];
    const why: EvictWhy[] = [];
    const out = (w: EvictWhy, from: string): void => {
      evict.push(this.#evictFrom(from));
      why.push(w);
    };
    const h = this.#hosts.get(host);
    if (h && h.n >= L.maxPerHost) {
      if (h.pending.size === 0) {
        this.counters.refused++;
        this.counters.hostRefused++;
        return { ok: false, bound: 'hostTotal', why: `source ${host} holds ${h.n} connections, the most one source may` };
      }
      out('hostTotal', host);
    } else if (!authenticated && h && h.pending.size >= L.maxUnauthenticatedPerHost) out('hostPending', host);
    // Bounded: each turn removes one unauthenticated connection.
    while ((!authenticated && this.#pending >= L.maxUnauthenticated) || this.#all.size >= L.max) {
      const victim = this.#busiest();
      if (victim === undefined) {
        this.counters.refused++;
        return { ok: false, bound: 'total', why: `${this.#all.size} connections, all authenticated (the most there may be)` };
      }
      out(!authenticated && this.#pending >= L.maxUnauthenticated ? 'pending' : 'total', victim);
    }
    this.#all.set(conn, { host, authenticated, seq: this.#seq++ });
    let e = this.#hosts.get(host);
    if (!e) this.#hosts.set(host, (e = { n: 0, pending: new Set() }));
    e.n++;
    if (!authenticated) {
      e.pending.add(conn);
      this.#pending++;
    }
    return { ok: true, evict, why };
  }

  /** Drop the oldest unauthenticated connection of the source holding the most, to make room (counted). */
  evictOne(): T | undefined {
    const h = this.#busiest();
    return h === undefined ? undefined : this.#evictFrom(h);
  }

  /** `conn` proved the token: it no longer counts as unauthenticated (and is never evicted). */
  authenticated(conn: T): void {
    const a = this.#all.get(conn);
    if (!a || a.authenticated) return;
    a.authenticated = true;
    this.#hosts.get(a.host)!.pending.delete(conn);
    this.#pending--;
  }

  remove(conn: T): void {
    const a = this.#all.get(conn);
    if (!a) return;
    this.#all.delete(conn);
    const h = this.#hosts.get(a.host)!;
    h.n--;
    if (!a.authenticated) {
      h.pending.delete(conn);
      this.#pending--;
    }
    if (h.n === 0) this.#hosts.delete(a.host);
  }

  has(conn: T): boolean {
    return this.#all.has(conn);
  }

  #evictFrom(host: string): T {
    const victim = this.#hosts.get(host)!.pending.values().next().value as T;
    this.remove(victim);
    this.counters.evicted++;
    return victim;
  }

  /**
   * The source holding the most unauthenticated connections (undefined: none is); of sources
   * holding as many, the one whose oldest pending connection is oldest. (The first in the table
   * won the tie: the host whose entry lived longest — one holding a session all along — so with
   * strangers from many addresses, one each, the next stranger closed that host's new pipe or
   * connection, however many older strangers waited.)
   */
  #busiest(): string | undefined {
    let best: string | undefined;
    let most = 0;
    let oldest = Infinity;
    for (const [k, h] of this.#hosts) {
      if (h.pending.size === 0 || h.pending.size < most) continue;
      const first = this.#all.get(h.pending.values().next().value as T)!.seq;
      if (h.pending.size > most || first < oldest) {
        most = h.pending.size;
        oldest = first;
        best = k;
      }
    }
    return best;
  }
}

// ---------------------------------------------------------------------------------------------

export interface BackoffLimits {
  /** Failed proofs a source may make before it is rationed. */
  free: number;
  /** The gap after the first rationed failure; it doubles with each further one. */
  baseMs: number;
  /** The largest gap between two checked proofs of one source. */
  maxMs: number;
  /** A source's failures are forgotten this long after its last one (or at its first success). */
  memoryMs: number;
  /** Sources remembered at once; past it, new ones share one entry. */
  maxSources: number;
}

export const DEFAULT_BACKOFF: BackoffLimits = { free: 3, baseMs: 250, maxMs: 2000, memoryMs: 10 * 60_000, maxSources: 4096 };

export interface BackoffCounters {
  /** Proofs checked later than they arrived (their source was rationed). */
  loginDelayed: number;
  /** Proofs refused unchecked: their turn would have come after their pipe's deadline. */
  loginThrottled: number;
  /** Attempts of sources the full table could not hold, rationed with their network (`networkKey`). */
  loginSourcesByNetwork: number;
  /** Attempts of sources neither the table nor its networks' entries could hold (rationed together). */
  loginSourcesOverflow: number;
}

interface Source {
  failures: number;
  /** When this source's last proof was (or will be) checked. */
  last: number;
  lastFailure: number;
}

const OVERFLOW = '*';

/**
 * The network a source (a hostKey) is rationed with once the table holds `maxSources` sources: an
 * IPv4 /24 or an IPv6 /48 (a site's usual allocation), or undefined (the shared entry).
 */
export function networkKey(host: string): string | undefined {
  const v4 = /^(\d+\.\d+\.\d+)\.\d+$/.exec(host);
  if (v4) return `${v4[1]}.0/24`;
  const v6 = /^([0-9a-f]+:[0-9a-f]+:[0-9a-f]+):[0-9a-f]+::\/64$/.exec(host);
  return v6 ? `${v6[1]}::/48` : undefined;
}

const isNetwork = (k: string): boolean => k.endsWith('/24') || k.endsWith('/48');

export class LoginBackoff {
  readonly limits: BackoffLimits;
  readonly counters: BackoffCounters = { loginDelayed: 0, loginThrottled: 0, loginSourcesByNetwork: 0, loginSourcesOverflow: 0 };
  /** Least recently failed first (an entry is re-inserted at each failure): sources, and networks past maxSources of them. */
  readonly #sources = new Map<string, Source>();
  /** Of those, networks' entries (at most maxSources). */
  #networks = 0;

  constructor(limits: Partial<BackoffLimits> = {}) {
    this.limits = { ...DEFAULT_BACKOFF, ...limits };
  }

  /** Entries now (at most maxSources sources, maxSources networks and the shared overflow entry). */
  get size(): number {
    return this.#sources.size;
  }

  /** The gap a source with `failures` failures waits between two checked proofs. */
  gap(failures: number): number {
    const L = this.limits;
    if (failures < L.free) return 0;
    return Math.min(L.maxMs, L.baseMs * 2 ** Math.min(failures - L.free, 30));
  }

  #forget(now: number): void {
    // The oldest failures first: stop at the first one still remembered (bounded by the table).
    for (const [k, s] of this.#sources) {
      if (now - s.lastFailure < this.limits.memoryMs || s.last > now) break;
      this.#delete(k);
    }
  }

  #delete(k: string): void {
    if (this.#sources.delete(k) && isNetwork(k)) this.#networks--;
  }

  #key(host: string): string {
    if (this.#sources.has(host) || this.#sources.size - this.#networks - (this.#sources.has(OVERFLOW) ? 1 : 0) < this.limits.maxSources) return host;
    const net = networkKey(host);
    if (net !== undefined && (this.#sources.has(net) || this.#networks < this.limits.maxSources)) return net;
    return OVERFLOW;
  }

  /**
   * When the proof of a pipe from `host` may be checked: `now`, or later (counted), or undefined
   * when that would be after `deadline` (refused unchecked, counted).
   */
  reserve(host: string, now: number, deadline: number): number | undefined {
    this.#forget(now);
    const k = this.#key(host);
    const s = this.#sources.get(k);
    if (!s) return now;
    if (k === OVERFLOW) this.counters.loginSourcesOverflow++;
    else if (k !== host) this.counters.loginSourcesByNetwork++;
    const at = Math.max(now, s.last + this.gap(s.failures));
    if (at > deadline) {
      this.counters.loginThrottled++;
      return undefined;
    }
    if (at > now) this.counters.loginDelayed++;
    s.last = at;
    return at;
  }

  /** The proof of a pipe from `host` was checked at `now` and was wrong. */
  failed(host: string, now: number): void {
    this.#forget(now);
    const k = this.#key(host);
    let s = this.#sources.get(k);
    if (s) this.#delete(k);
    else s = { failures: 0, last: now, lastFailure: now };
    if (isNetwork(k)) this.#networks++;
    s.failures++;
    s.lastFailure = now;
    s.last = Math.max(s.last, now);
    this.#sources.set(k, s);
  }

  /** The proof was right: the source (not a shared network or overflow entry) starts afresh. */
  succeeded(host: string): void {
    this.#delete(host);
  }
}
