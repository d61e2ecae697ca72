// The transport contexts of one endpoint (./endpoint.ts), one per peer: found by our context
// id and by the peer's address; the peers' share of them capped per source host and per
// device, an idle or un-owned one reclaimed for a newcomer; old peer ids remembered as
// retired; and the context counters summed over those dropped.
import { hostKey } from '../../core/address.js';
import type { UdpCookie } from '../../wire/udp.js';
import type { ContextCounters, FailReason } from './context-options.js';
import { TransportContext } from './context.js';
import type { DeviceSecret } from './cookie.js';
import type { EndpointCounters, EndpointOptions, PeerAddress } from './endpoint-types.js';

/** A reclaim scan that found nothing is not repeated for this long. */
const RESCAN_MS = 10;
/** Idle time after which a context may be taken for a newcomer (see reclaimIdle). */
const RECLAIM_GUARD_MS = 1000;
/** One owed RESET per dropped context this often (its peer's retransmissions come slower: a lost RESET is answered again). */
const OWED_RESET_MS = 100;

export function addrKey(a: PeerAddress): string {
  return `${a.host}|${a.port}`;
}

/**
 * Context counters summed over the device's contexts, live and dropped, and the context counter
 * each sums: the DATA datagrams a context refused after the endpoint's checks (receiver.ts
 * onData); DATA datagrams sent again (after an RTO, a fast retransmit or a tail-loss probe);
 * packets SACK showed lost and resent before the RTO; tail-loss probes and RTO expiries (the
 * context's `probes` and `timeouts`); keepalive probes sent and answered.
 */
const TOTAL_OF = {
  rxDuplicate: 'rxDuplicate', rxOutOfWindow: 'rxOutOfWindow', rxNoCredit: 'rxNoCredit', retransmits: 'retransmits',
  fastRetransmits: 'fastRetransmits', tailLossProbes: 'probes', rtoExpiries: 'timeouts', keepalives: 'keepalives', keepaliveAnswers: 'keepaliveAnswers',
} as const satisfies Record<string, keyof ContextCounters>;
const TOTAL_KEYS = Object.keys(TOTAL_OF) as (keyof typeof TOTAL_OF)[];

export type ContextTotals = Record<keyof typeof TOTAL_OF, number>;

export function zeroSums(): ContextTotals {
  const t = {} as ContextTotals;
  for (const k of TOTAL_KEYS) t[k] = 0;
  return t;
}

export function addTotals(to: ContextTotals, c: ContextCounters): void {
  for (const k of TOTAL_KEYS) to[k] += c[TOTAL_OF[k]];
}

export interface Entry {
  ctx: TransportContext;
  peer: PeerAddress;
  key: string;
  /** Created because the peer contacted us: counts against its host's cap. */
  inbound: boolean;
  /** The host its cap counts it under (core/address hostKey: an IPv6 /64 is one host). */
  host: string;
  /** The peer's cookie, repeated while our datagrams carry dstCtx 0 (we contacted it). */
  cookie: UdpCookie | undefined;
  /** Our reset token for ctx.localId, sent until the peer names our id (then it has it). */
  token: Uint8Array;
  /** The peer's reset token: a RESET carrying it comes from the same device incarnation. */
  peerToken: Uint8Array | undefined;
  peerKnowsUs: boolean;
  /** The settled integrity (UdpIntegrity code) once the peer's wish is known; until then CRC32C. */
  integ: number | undefined;
  /** Found kept (EndpointOptions.keepPeer: connected rc QPs) by a reclaim scan: not asked again before then. */
  keptUntil: number;
  /**
   * When it was made, or last found kept: un-owned since. Past unownedContextMs a newcomer may
   * take it whatever its traffic (see reclaimIdle).
   */
  ownedAt: number;
}

interface HostState {
  /** Contexts this host's peers made us create. */
  inbound: number;
  /** No reclaim scan for this host before then (one that found nothing is not repeated at once). */
  scanAt: number;
}

export class ContextTable {
  readonly byId = new Map<number, Entry>();
  readonly byAddr = new Map<string, Entry>();
  readonly hosts = new Map<string, HostState>();
  readonly retired = new Set<number>();
  /**
   * Our ids of contexts dropped while their peer may still use them (reclaimed for idleness or a
   * newcomer, failed), with the peer's address, oldest first, at most maxRetiredIds. A datagram
   * from that address naming one is owed the RESET that makes the peer start a fresh stream:
   * outside the rate limits, which an off-path sender can drain with datagrams naming random ids
   * (to fail the peer's work: it would retransmit into silence). It cannot name these without
   * guessing 32 bits, and from the peer's address.
   */
  readonly dropped = new Map<number, { key: string; resetAt: number }>();
  private scanAt = -Infinity;
  /** Context sums (refusals, retransmissions, keepalives) of the contexts dropped so far (stats() adds the live ones). */
  readonly totals: ContextTotals = zeroSums();

  constructor(
    private readonly opts: EndpointOptions,
    private readonly counters: EndpointCounters,
    private readonly secret: DeviceSecret,
    /** Report what a context failed (the endpoint's failure list): an un-owned busy one taken for a newcomer. */
    private readonly reportFailed: (e: Entry, reason: FailReason) => void,
  ) {}

  create(peer: PeerAddress, peerId: number, now: number, inbound: boolean): Entry {
    const ctx = new TransportContext(this.newLocalId(), now, this.opts.context, peerId);
    // We contact it: one datagram until it shows it keeps state for us (see validated()).
    ctx.probing = !inbound;
    const e: Entry = {
      ctx, peer, key: addrKey(peer), inbound, host: hostKey(peer.host), cookie: undefined, token: this.secret.token(ctx.localId), peerToken: undefined, peerKnowsUs: false,
      integ: undefined, keptUntil: -Infinity, ownedAt: now,
    };
    this.byId.set(ctx.localId, e);
    this.byAddr.set(e.key, e);
    if (inbound) {
      const h = this.hosts.get(e.host);
      if (h === undefined) this.hosts.set(e.host, { inbound: 1, scanAt: -Infinity });
      else h.inbound++;
    }
    this.counters.contextsCreated++;
    return e;
  }

  /** `peerMayUse`: the peer may still send to it (reclaimed, failed): see `dropped`. */
  drop(e: Entry, peerMayUse = false): void {
    if (peerMayUse && e.ctx.peerId !== 0) {
      this.dropped.delete(e.ctx.localId);
      this.dropped.set(e.ctx.localId, { key: e.key, resetAt: -Infinity });
      if (this.dropped.size > this.opts.maxRetiredIds) this.dropped.delete(this.dropped.keys().next().value!);
    }
    if (this.byId.get(e.ctx.localId) === e) addTotals(this.totals, e.ctx.counters);
    this.byId.delete(e.ctx.localId);
    if (this.byAddr.get(e.key) === e) this.byAddr.delete(e.key);
    if (e.inbound) {
      const h = this.hosts.get(e.host);
      if (h !== undefined && --h.inbound <= 0) this.hosts.delete(e.host);
      e.inbound = false;
    }
  }

  /** A new incarnation of our side of the context: new id and token, nothing learnt from the peer. */
  renew(e: Entry, mode: 'requeue' | 'fail', peerId: number, now: number): void {
    this.byId.delete(e.ctx.localId);
    if (e.ctx.peerId !== 0) this.retire(e.ctx.peerId);
    e.ctx.restart(this.newLocalId(), peerId, mode, now);
    e.ctx.probing = peerId === 0;
    this.byId.set(e.ctx.localId, e);
    e.token = this.secret.token(e.ctx.localId);
    e.cookie = undefined;
    e.peerToken = undefined;
    e.peerKnowsUs = false;
    e.integ = undefined;
  }

  private newLocalId(): number {
    for (;;) {
      const id = this.opts.randomId() >>> 0;
      if (id !== 0 && !this.byId.has(id)) {
        this.dropped.delete(id);
        return id;
      }
    }
  }

  /** A datagram from `from` names our dropped context `id`: its RESET is owed (see `dropped`), once per OWED_RESET_MS. */
  owesReset(id: number, from: PeerAddress, now: number): boolean {
    const d = this.dropped.get(id);
    if (d === undefined || d.key !== addrKey(from) || now < d.resetAt) return false;
    d.resetAt = now + OWED_RESET_MS;
    return true;
  }

  retire(id: number): void {
    this.retired.add(id);
    if (this.retired.size > this.opts.maxRetiredIds) {
      const first = this.retired.values().next().value as number;
      this.retired.delete(first);
    }
  }

  /**
   * Free a context for a newcomer (of `host`'s inbound ones — `host` a hostKey — or any). First
   * choice, a quiescent one: the one idle longest that has been idle at least RECLAIM_GUARD_MS,
   * or that no local QP has owned for unownedContextMs, whatever its traffic. Quiescent means
   * everything it delivered was acked and it has nothing in flight; the guard (above the largest
   * RTO) means the peer has seen that ACK or is past retrying, so a later RESET (whose token makes
   * the peer start a fresh stream) cannot make it send again something already delivered. An
   * un-owned peer that keeps sending may not have seen our last ACK yet: what it sends next meets
   * the same token RESET, its stream restarts and nothing fails; a copy it then sends again
   * reaches no rc QP of ours (none is connected to it), and an srd flow that still has it drops it
   * by its ssn. Without this a stranger that completed the handshake and sent one ACK a second
   * held its slot for good, and a crowd of them locked every new peer out
   * (test/attack/udp-unowned-crowd). Last choice, when no quiescent one can go: an un-owned one
   * past the grace with DATA of ours in flight, failed (what it carried — answers of our engine
   * to a peer no rc QP of ours is connected to — fails, 'retry-exceeded'). A stranger that elicits
   * DATA from us (a Send into a missing QP draws a Terminate, one to the cm QP an ack and a REJ)
   * and never acks it, or acks with a zero window (which stops the retry count), is never
   * quiescent: it held its slot until the retry limit, or for good.
   * A context the owner keeps (keepPeer: rc QPs connected through it) is never taken: it is idle
   * only between keepalives, and a crowd of validated newcomers from other hosts evicted it and
   * then kept its peer out, failing the connected QPs (test/attack/udp-evict-connected). One scan
   * over the contexts; keepPeer is asked only of candidates, quiescent first, oldest activity
   * first, each at most once per RECLAIM_GUARD_MS; a scan that found nothing is not repeated for
   * RESCAN_MS.
   */
  reclaimIdle(now: number, host: string | undefined): boolean {
    const hs = host === undefined ? undefined : this.hosts.get(host);
    if (now < (hs === undefined ? this.scanAt : hs.scanAt)) return false;
    const guard = Math.min(this.opts.idleMs, RECLAIM_GUARD_MS);
    const grace = this.opts.unownedContextMs;
    const candidates: Entry[] = [];
    for (const e of this.byId.values()) {
      if ((host !== undefined && (!e.inbound || e.host !== host)) || now < e.keptUntil || e.ctx.state !== 'open') continue;
      const unowned = now - e.ownedAt >= grace;
      if (e.ctx.quiescent ? now - e.ctx.lastActivity < guard && !unowned : !unowned) continue;
      candidates.push(e);
    }
    candidates.sort((x, y) => Number(!x.ctx.quiescent) - Number(!y.ctx.quiescent) || x.ctx.lastActivity - y.ctx.lastActivity);
    const keep = this.opts.keepPeer;
    for (const victim of candidates) {
      if (keep !== undefined && keep(victim.peer)) {
        victim.keptUntil = now + RECLAIM_GUARD_MS;
        victim.ownedAt = now;
        continue;
      }
      this.counters.contextsReclaimed++;
      if (now - victim.ctx.lastActivity < guard || !victim.ctx.quiescent) this.counters.unownedReclaimed++;
      if (!victim.ctx.quiescent) {
        victim.ctx.fail('retry-exceeded');
        this.reportFailed(victim, 'retry-exceeded');
      }
      this.drop(victim, true);
      return true;
    }
    if (hs !== undefined) hs.scanAt = now + RESCAN_MS;
    else this.scanAt = now + RESCAN_MS;
    return false;
  }

  /**
   * Room for a context a validated peer at address `addr` asks for: its host's cap, then the
   * device's. The host is core/address hostKey's, as every other per-source bound's: an IPv6
   * /64 is one host (its holder has 2^64 addresses it can receive at; keyed by the full address,
   * one /64 passed the cookie handshake from as many as it liked and was held to maxContexts
   * alone — test/attack/udp-ipv6-prefix).
   */
  room(addr: string, now: number): boolean {
    const host = hostKey(addr);
    const h = this.hosts.get(host);
    if (h !== undefined && h.inbound >= this.opts.maxContextsPerHost && !this.reclaimIdle(now, host)) {
      this.counters.hostLimit++;
      return false;
    }
    if (this.byId.size >= this.opts.maxContexts && !this.reclaimIdle(now, undefined)) {
      this.counters.contextLimit++;
      return false;
    }
    return true;
  }
}
