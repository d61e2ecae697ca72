// The device side of the UDP transport, sans-I/O: turns datagrams (bytes + source address)
// into context events and context output into datagrams (header bytes, payload, CRC32C
// trailer, ready for a gathering send). One transport context per peer, created on first use
// in either direction, found by our context id once the peer has learnt it (so replies through
// a relay, or from another of the peer's sockets, still land) and by source address before.
//
// Nothing a datagram says is trusted with state or work before it is proven (issue #11; the
// threat model is docs/resource-bounds.md's). An off-path attacker can send anything from any
// source address but sees nothing sent to others, so:
// - A first contact gets a COOKIE and nothing else: no context, no delivery, no memory (as
//   SYN cookies, QUIC's Retry, SCTP's INIT-ACK). A context is created only when the
//   initiator echoes the cookie — it can receive at the address it claims. The COOKIE is
//   never longer than the datagram it answers (a first contact carries a zero cookie block
//   as padding), so answering spoofed sources amplifies nothing.
// - A new context id from a known address ("the peer restarted") is such a first contact:
//   the live context is failed only when the new incarnation echoes its cookie.
// - After the handshake a datagram must name our context id and its own (64 random bits an
//   off-path attacker would have to guess), as SCTP's verification tag.
// - A RESET must echo both ids; one that also carries the peer's reset token (HMAC of its
//   device secret and its context id, learnt at setup, as QUIC's stateless reset token) says
//   the peer dropped our context but is the same device: we start a fresh stream and resend
//   what it did not ack. Without the token the peer is a new incarnation (its secret changed):
//   what we had in flight to it is failed.
// - RESETs answer datagrams for contexts we do not have: rate-limited per device and per
//   destination host, never for a RESET or COOKIE.
// - Contexts the peers create are capped per source host and per device; an idle one is
//   reclaimed (never one with data in flight or an ACK owed).
// Everything refused is a counted drop (stats()).
import { randomInt } from 'node:crypto';
import { ErrorCode, SabreError } from '../../core/errors.js';
import type { TransportContextStats } from '../../core/link.js';
import { crc32c as kernelCrc32c } from '../../kernels/crc32c.js';
import { ownXxh3 } from '../../kernels/xxh3-64.js';
import { UDP_COOKIE, UDP_INTEG, UDP_MAX_SACK, UDP_TOKEN, UDP_TRAILER_LENS, UDP_TRAILER_MAX, UdpIntegrity } from '../../wire/spec.js';
import {
  UdpType, UDP_HDR_LEN, UDP_TRAILER_LEN, encodeUdpHdr, openUdpDatagram, setUdpTrailer, udpHeaderLength, type UdpCookie, type UdpHdr,
} from '../../wire/udp.js';
import { DEFAULT_UDP_INTEGRITY, checkIntegrityMode, integrityCode, integrityName, settleIntegrity, type IntegrityCounters, type IntegrityMode } from './integrity.js';
import {
  MAX_SACK_BLOCKS, RxVerdict, TransportContext, type ContextCounters, type ContextOptions, type FailReason, type TxDatagram, type TxPayload,
} from './context.js';
import { DeviceSecret, ZERO_COOKIE, sameMac } from './cookie.js';
import { HostBuckets, TokenBucket } from './rate-limit.js';
import { ByteSlab } from './slab.js';

export interface PeerAddress {
  host: string;
  port: number;
}

/** CRC32C continuing from `previous`: crc(b, crc(a)) === crc(a ‖ b). */
export type Crc32cFn = (data: Uint8Array, previous?: number) => number;

/** XXH3-64 of gather lists and of received datagrams (src/kernels/xxh3-64.ts Xxh3Parts). */
export interface Xxh3Hasher {
  /** XXH3-64 of parts[from, to) concatenated, LSB first into dst[at, at + 8). */
  hash(parts: readonly Uint8Array[], from: number, to: number, dst: Uint8Array, at: number): void;
  /** Whether data[0, length - 8) hashes to its last 8 bytes. */
  check(data: Uint8Array): boolean;
}

export interface EndpointOptions {
  /** Largest datagram we emit (header + payload + trailer). Default 65000: loopback. */
  mtu: number;
  /** Datagrams longer than this are dropped unread. */
  maxDatagram: number;
  maxContexts: number;
  /** Contexts the peers of one source host can make us create by contacting us. */
  maxContextsPerHost: number;
  /** A quiescent context untouched this long is reclaimed. Keep it above the retry span. */
  idleMs: number;
  /** Number of sockets the shell stripes over (path index in each outgoing datagram). */
  paths: number;
  /** Old peer context ids remembered so their stray datagrams count as stale. */
  maxRetiredIds: number;
  context: Partial<ContextOptions>;
  crc32c: Crc32cFn;
  xxh3: Xxh3Hasher;
  /**
   * The integrity this device asks for (docs/integrity.md); each context settles on the
   * stronger of ours and the peer's in the handshake. Default 'xxh3'.
   */
  integrity: IntegrityMode;
  /** Source of context ids (nonzero u32, unpredictable: they are verification tags); tests pass a seeded one. */
  randomId: () => number;
  /** How long after minting a cookie is accepted back (the initiator echoes it a round trip later). */
  cookieLifetimeMs: number;
  /** RESETs a second, and the burst saved up: for the whole device, and per destination host. */
  resetRate: number;
  resetBurst: number;
  resetRatePerHost: number;
  resetBurstPerHost: number;
  /** Destination hosts with a RESET bucket of their own (the oldest is forgotten past it). */
  maxTrackedHosts: number;
  /** The device secret behind cookies and reset tokens (>= 16 bytes; 32 random bytes by default). */
  secret?: Uint8Array;
  /**
   * Parts for which this is true leave their CRC32C to the owner (a worker): frame() stops
   * at the largest such part and marks the datagram `pendingCrc` (see sealDeferred).
   */
  txOffloadable?: (part: Uint8Array) => boolean;
  /**
   * Whether the owner still keeps `peer` (the udp link: the device has connected rc QPs to it):
   * asked when an idle context's keepalive is due (context.keepaliveMs). Without it no context
   * probes its peer.
   */
  keepPeer?: (peer: PeerAddress) => boolean;
}

export interface OutDatagram {
  to: PeerAddress;
  /** Gather list: header, payload (DATA only), trailer. */
  parts: Uint8Array[];
  /** Which of the device's sockets sends it. */
  path: number;
  /**
   * Set when the trailer is not written yet: `prefix` is the CRC32C of parts[0, part); the
   * owner computes it through parts[part] (offloaded), then calls sealDeferred().
   */
  pendingCrc?: { part: number; prefix: number };
}

export interface Delivery {
  from: PeerAddress;
  /** Our context id for the peer: hand it back to release(). */
  ctx: number;
  payload: Uint8Array;
  dstQpn: number;
  srcQpn: number;
}

export interface Failure {
  /** The payload that failed; 0 for a context that failed with nothing outstanding (keepalive). */
  id: number;
  peer: PeerAddress;
  reason: FailReason;
}

export interface EndpointCounters extends IntegrityCounters {
  rxDatagrams: number;
  txDatagrams: number;
  truncated: number;
  oversized: number;
  badCrc: number;
  /** XXH3-64 trailers that did not verify. */
  badHash: number;
  malformed: number;
  /** Datagrams naming a context id we do not have. */
  unknownContext: number;
  /** Datagrams from an old incarnation of a peer, or naming our context with another peer id. */
  stale: number;
  /** Validated peers refused a context: the device cap, or their host's cap. */
  contextLimit: number;
  hostLimit: number;
  /** COOKIEs sent (first contacts answered), and echoes that came back valid, bad or too old. */
  cookiesSent: number;
  cookiesValidated: number;
  cookiesFailed: number;
  cookiesExpired: number;
  /** COOKIEs received for a context of ours waiting for one, and those for nothing we wait on. */
  cookiesReceived: number;
  cookiesIgnored: number;
  /** First contacts that cannot open a context: not DATA, or an echo without the reset token. */
  unvalidated: number;
  /** A new context id from the address of a live peer, not (yet) proven by a cookie echo. */
  restartClaims: number;
  /** Answers not sent because they would be longer than 3x what triggered them. */
  amplificationRefused: number;
  resetsSent: number;
  /** RESETs owed but held back by the device or per-host rate limit. */
  resetsSuppressed: number;
  /** RESETs with the peer's token: it dropped our context; we started a fresh stream. */
  resetsReceived: number;
  /** RESETs that did not echo both context ids (forged or misdirected): ignored. */
  resetsInvalid: number;
  /** Peer restarts proven (a cookie echo from a new incarnation, or a RESET without its token). */
  peerRestarts: number;
  /** Datagrams refused whole: cumulative ack, or a SACK block, outside what we sent. */
  badAck: number;
  badSack: number;
  contextsCreated: number;
  contextsReclaimed: number;
  contextsFailed: number;
}

export interface PollResult {
  /** A burst limit held DATA back: poll again after reading what has arrived. */
  more: boolean;
  datagrams: OutDatagram[];
  delivered: Delivery[];
  acked: number[];
  failed: Failure[];
}

/**
 * Context counters summed over the device's contexts, live and dropped, and the context counter
 * each sums: the DATA datagrams a context refused after the endpoint's checks (context.ts
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

function zeroSums(): ContextTotals {
  const t = {} as ContextTotals;
  for (const k of TOTAL_KEYS) t[k] = 0;
  return t;
}

function addTotals(to: ContextTotals, c: ContextCounters): void {
  for (const k of TOTAL_KEYS) to[k] += c[TOTAL_OF[k]];
}

interface Entry {
  ctx: TransportContext;
  peer: PeerAddress;
  key: string;
  /** Created because the peer contacted us: counts against its host's cap. */
  inbound: boolean;
  /** The peer's cookie, repeated while our datagrams carry dstCtx 0 (we contacted it). */
  cookie: UdpCookie | undefined;
  /** Our reset token for ctx.localId, sent until the peer names our id (then it has it). */
  token: Uint8Array;
  /** The peer's reset token: a RESET carrying it comes from the same device incarnation. */
  peerToken: Uint8Array | undefined;
  peerKnowsUs: boolean;
  /** The settled integrity (UdpIntegrity code) once the peer's wish is known; until then CRC32C. */
  integ: number | undefined;
}

interface HostState {
  /** Contexts this host's peers made us create. */
  inbound: number;
  /** No reclaim scan for this host before then (one that found nothing is not repeated at once). */
  scanAt: number;
}

const SACK_ROOM = 4 + 8 * MAX_SACK_BLOCKS;
/** What a handshake may add to a header: our cookie echo, reset token and integrity wish. */
const HANDSHAKE_ROOM = UDP_COOKIE.size + UDP_TOKEN.size + UDP_INTEG.size;
export const COOKIE_DATAGRAM_LEN = UDP_HDR_LEN + UDP_COOKIE.size + UDP_TRAILER_LEN;
export const RESET_DATAGRAM_LEN = UDP_HDR_LEN + UDP_TOKEN.size + UDP_TRAILER_LEN;
/** QUIC's anti-amplification factor (RFC 9000 §8): never answer with more than 3x what came. */
const AMPLIFICATION = 3;
/** A reclaim scan that found nothing is not repeated for this long. */
const RESCAN_MS = 10;
/** Idle time after which a context may be taken for a newcomer (see reclaimIdle). */
const RECLAIM_GUARD_MS = 1000;

function defaultRandomId(): number {
  return randomInt(1, 0x1_0000_0000);
}

/** Default receive credit: about 4 MiB of datagrams (the kernel's socket-buffer cap here). */
export function defaultCredit(mtu: number): number {
  return Math.max(16, Math.min(512, Math.floor((4 << 20) / mtu)));
}

function addrKey(a: PeerAddress): string {
  return `${a.host}|${a.port}`;
}

function tsNow(nowMs: number): number {
  return Math.floor(nowMs * 1000) >>> 0 || 1;
}

export class UdpEndpoint {
  readonly opts: EndpointOptions;
  /** Largest payload send() accepts for one datagram. */
  readonly maxPayload: number;
  readonly counters: EndpointCounters = {
    rxDatagrams: 0, txDatagrams: 0, truncated: 0, oversized: 0, badCrc: 0, badHash: 0, badIntegrity: 0, integrityRefused: 0, malformed: 0,
    unknownContext: 0, stale: 0, contextLimit: 0, hostLimit: 0, cookiesSent: 0, cookiesValidated: 0, cookiesFailed: 0,
    cookiesExpired: 0, cookiesReceived: 0, cookiesIgnored: 0, unvalidated: 0, restartClaims: 0, amplificationRefused: 0,
    resetsSent: 0, resetsSuppressed: 0, resetsReceived: 0, resetsInvalid: 0, peerRestarts: 0, badAck: 0, badSack: 0,
    contextsCreated: 0, contextsReclaimed: 0, contextsFailed: 0,
  };
  private byId = new Map<number, Entry>();
  private byAddr = new Map<string, Entry>();
  private byPeer = new WeakMap<PeerAddress, Entry>();
  private hosts = new Map<string, HostState>();
  private retired = new Set<number>();
  private readonly secret: DeviceSecret;
  private readonly deviceResets: TokenBucket;
  private readonly hostResets: HostBuckets;
  private scanAt = -Infinity;
  /** Context sums (refusals, retransmissions, keepalives) of the contexts dropped so far (stats() adds the live ones). */
  private readonly ctxTotals: ContextTotals = zeroSums();
  private nextPayloadId = 1;
  private rr = 0;
  private closed = false;
  private out: OutDatagram[] = [];
  private delivered: Delivery[] = [];
  private acked: number[] = [];
  private failed: Failure[] = [];
  private txScratch: TxDatagram[] = [];
  private readonly slab = new ByteSlab();
  private readonly crcCheck: (buf: Uint8Array, off: number, len: number) => number;
  private readonly xxh3Check: (buf: Uint8Array, off: number, end: number) => boolean;
  /** Our wish, as a UdpIntegrity code. */
  readonly integrity: number;

  constructor(opts: Partial<EndpointOptions> = {}) {
    const mtu = opts.mtu ?? 65000;
    const credit = defaultCredit(mtu);
    this.opts = {
      mtu,
      maxDatagram: 65507,
      maxContexts: 1024,
      maxContextsPerHost: 64,
      idleMs: 30_000,
      paths: 1,
      maxRetiredIds: 4096,
      randomId: defaultRandomId,
      crc32c: kernelCrc32c,
      xxh3: ownXxh3,
      integrity: DEFAULT_UDP_INTEGRITY,
      cookieLifetimeMs: 30_000,
      resetRate: 1000,
      resetBurst: 100,
      resetRatePerHost: 50,
      resetBurstPerHost: 20,
      maxTrackedHosts: 4096,
      ...opts,
      context: { rcvCredit: credit, initialPeerWindow: Math.min(32, credit), ...opts.context, ...(opts.keepPeer === undefined ? { keepaliveMs: 0 } : {}) },
    };
    this.maxPayload = mtu - UDP_HDR_LEN - HANDSHAKE_ROOM - SACK_ROOM - UDP_TRAILER_MAX;
    if (this.maxPayload < 64) throw new SabreError(ErrorCode.InvalidArgument, `mtu ${mtu} is too small`);
    if (MAX_SACK_BLOCKS > UDP_MAX_SACK) throw new Error('context SACK blocks exceed the wire limit');
    const o = this.opts;
    this.secret = new DeviceSecret(o.secret);
    this.deviceResets = new TokenBucket(o.resetRate, o.resetBurst);
    this.hostResets = new HostBuckets(o.resetRatePerHost, o.resetBurstPerHost, o.maxTrackedHosts);
    const crc = o.crc32c;
    this.crcCheck = (buf, off, len) => crc(buf.subarray(off, off + len), 0);
    const xxh3 = o.xxh3;
    this.xxh3Check = (buf, off, end) => xxh3.check(off === 0 && end === buf.length ? buf : buf.subarray(off, end));
    checkIntegrityMode(o.integrity);
    this.integrity = integrityCode(o.integrity);
  }

  /** The integrity settled with `peer` (undefined: no context, or the handshake is not done). */
  integrityOf(peer: PeerAddress): IntegrityMode | undefined {
    const e = this.byAddr.get(addrKey(peer));
    return e?.integ === undefined ? undefined : integrityName(e.integ);
  }

  get contexts(): number {
    return this.byId.size;
  }

  /** Some context has data to send, unacknowledged payloads or an ACK owed. */
  get busy(): boolean {
    for (const e of this.byId.values()) if (!e.ctx.quiescent) return true;
    return false;
  }

  /** Per-peer state, for tests and stats. */
  context(peer: PeerAddress): TransportContext | undefined {
    return this.byAddr.get(addrKey(peer))?.ctx;
  }

  /**
   * Every counter, and the sizes of every table a peer can grow (docs/resource-bounds.md). The
   * DATA datagrams the contexts refused after the header checks (a PSN already received or past
   * the receive window, no receive credit left) are summed over live and dropped contexts.
   */
  stats(): EndpointCounters & ContextTotals & {
    contexts: number; hostsWithContexts: number; resetHosts: number; retiredIds: number; contextsCrc32c: number; contextsXxh3: number; contextsNone: number;
  } {
    const r = { ...this.ctxTotals };
    for (const e of this.byId.values()) addTotals(r, e.ctx.counters);
    const by = [0, 0, 0];
    for (const e of this.byId.values()) if (e.integ !== undefined) by[e.integ]!++;
    return {
      ...this.counters, ...r, contexts: this.byId.size, hostsWithContexts: this.hosts.size, resetHosts: this.hostResets.size, retiredIds: this.retired.size,
      contextsCrc32c: by[UdpIntegrity.Crc32c]!, contextsXxh3: by[UdpIntegrity.Xxh3]!, contextsNone: by[UdpIntegrity.None]!,
    };
  }

  /**
   * Per-context counters and congestion state, at most `max` contexts (those with the most
   * retransmissions first, so a lossy peer is never the one left out).
   */
  contextStats(max = 64): TransportContextStats[] {
    const rows: TransportContextStats[] = [];
    for (const e of this.byId.values()) {
      const c = e.ctx.counters;
      const st = e.ctx.stats;
      rows.push({
        peer: `${e.peer.host}:${e.peer.port}`, retransmits: c.retransmits, fastRetransmits: c.fastRetransmits, tailLossProbes: c.probes, rtoExpiries: c.timeouts,
        keepalives: c.keepalives, txData: c.txData, rxData: c.rxData, srttUs: Math.round(st.srtt * 1000), rtoUs: Math.round(st.rto * 1000),
        cwnd: Math.round(st.cwnd * 100) / 100, inFlight: st.pipe, peerWindow: st.peerRwnd, rxPending: st.pending,
      });
    }
    if (rows.length > max) {
      rows.sort((a, b) => b.retransmits - a.retransmits);
      rows.length = max;
    }
    return rows;
  }

  /**
   * Queue one payload for `peer`. Returns its id, reported later in `acked` (the peer's engine
   * has it) or `failed`. Throws QueueFull when the context's queue is full.
   */
  send(peer: PeerAddress, payload: TxPayload, now: number, dstQpn = 0, srcQpn = 0): number {
    if (this.closed) throw new SabreError(ErrorCode.Closed, 'endpoint closed');
    let len = 0;
    if (payload instanceof Uint8Array) len = payload.length;
    else for (const p of payload) len += p.length;
    if (len > this.maxPayload || len < 2) {
      throw new SabreError(ErrorCode.InvalidArgument, `payload of ${len} bytes outside [2, ${this.maxPayload}]`);
    }
    // The owner hands the same PeerAddress object for a peer each time: no key string per payload.
    let e = this.byPeer.get(peer);
    if (e === undefined || this.byId.get(e.ctx.localId) !== e) e = this.byAddr.get(addrKey(peer));
    if (e !== undefined) this.byPeer.set(peer, e);
    if (e === undefined) {
      if (this.byId.size >= this.opts.maxContexts && !this.reclaimIdle(now, undefined)) {
        throw new SabreError(ErrorCode.LimitExceeded, 'too many peer contexts');
      }
      e = this.create({ host: peer.host, port: peer.port }, 0, now, false);
    }
    const id = this.nextPayloadId++;
    if (e.ctx.send(payload, now, dstQpn, srcQpn, id) === 0) {
      throw new SabreError(ErrorCode.QueueFull, 'transport send queue full');
    }
    return id;
  }

  /**
   * One datagram from the socket. Never throws on its content. `crc`: the CRC32C of
   * buf[0, length - 4) when the owner already computed it (a worker did) for a datagram whose
   * trailer kind is CRC32C, else checked here.
   */
  receive(buf: Uint8Array, from: PeerAddress, now: number, crc?: number): void {
    if (this.closed) return;
    const c = this.counters;
    c.rxDatagrams++;
    if (buf.length > this.opts.maxDatagram) {
      c.oversized++;
      return;
    }
    if (buf.length < UDP_HDR_LEN) {
      c.truncated++;
      return;
    }
    const r = openUdpDatagram(buf, 0, buf.length, crc === undefined ? this.crcCheck : () => crc, this.xxh3Check);
    if (!r.ok) {
      if (r.error === 'BAD_CRC') c.badCrc++;
      else if (r.error === 'BAD_HASH') c.badHash++;
      else if (r.error === 'BAD_TRAILER') c.badIntegrity++;
      else if (r.error === 'TRUNCATED') c.truncated++;
      else c.malformed++;
      return;
    }
    const h = r.value.hdr;
    const kind = r.value.trailer;
    if (h.srcCtx === 0) {
      c.malformed++;
      return;
    }
    // Before a context has settled its integrity (and in stateless answers) only CRC32C is
    // accepted: a trailer that checks nothing must never open or reset anything.
    if (kind !== UdpIntegrity.Crc32c && (h.dstCtx === 0 || h.type === UdpType.Reset || h.type === UdpType.Cookie)) {
      c.badIntegrity++;
      return;
    }
    if (h.type === UdpType.Reset) {
      this.onReset(h, now);
      return;
    }
    if (h.type === UdpType.Cookie) {
      this.onCookie(h, now);
      return;
    }
    let e: Entry | undefined;
    if (h.dstCtx !== 0) {
      e = this.byId.get(h.dstCtx);
      if (e === undefined) {
        // We lost (reclaimed, or restarted without) the context the peer still uses.
        c.unknownContext++;
        if (this.retired.has(h.srcCtx)) c.stale++;
        else this.sendReset(from, h, buf.length, now);
        return;
      }
      if (e.ctx.peerId === 0) {
        // The first answer from a context the peer keeps for us: it names our id (only someone
        // who saw our datagrams knows it) and brings its reset token.
        if (h.token === undefined) {
          c.unvalidated++;
          return;
        }
        // It settled from both wishes as we do now: its trailer must say the same.
        const settled = settleIntegrity(this.integrity, h.integ, c, kind);
        if (settled === undefined) return;
        this.establish(e, h.srcCtx, h.token, now, h.tsEcr, settled);
      } else if (e.ctx.peerId !== h.srcCtx) {
        c.stale++;
        return;
      } else if (kind !== e.integ) {
        c.badIntegrity++;
        return;
      }
    } else {
      e = this.byAddr.get(addrKey(from));
      // A peer we know sends with dstCtx 0 until it has learnt our id: that is fine. Anything
      // else is a first contact (or a restart claim) and must bring back a cookie of ours.
      if (e === undefined || e.ctx.peerId !== h.srcCtx) {
        if (this.retired.has(h.srcCtx)) {
          c.stale++;
          return;
        }
        if (h.type !== UdpType.Data) {
          c.unvalidated++;
          return;
        }
        const k = h.cookie === undefined ? 'none' : this.secret.checkCookie(h.cookie, from.host, from.port, h.srcCtx, now, this.opts.cookieLifetimeMs);
        if (k !== 'ok') {
          if (k === 'bad') c.cookiesFailed++;
          else if (k === 'expired') c.cookiesExpired++;
          if (e !== undefined && e.ctx.peerId !== 0) c.restartClaims++;
          this.sendCookie(from, h, buf.length, now);
          return;
        }
        if (h.token === undefined) {
          c.unvalidated++;
          return;
        }
        const integ = settleIntegrity(this.integrity, h.integ, c);
        if (integ === undefined) return;
        c.cookiesValidated++;
        e = this.admit(e, from, h, h.token, now, integ);
        if (e === undefined) return;
      }
    }
    const seg = r.value.segOff;
    const payload = h.type === UdpType.Data ? buf.subarray(seg, r.value.segEnd) : null;
    const before = e.ctx.delivered.length;
    const v = e.ctx.receive(h, payload, now);
    if (v !== RxVerdict.Ok) {
      if (v === RxVerdict.BadAck) c.badAck++;
      else c.badSack++;
      return;
    }
    // It named our id in a datagram we took: it has our token (it came with our first ones).
    if (h.dstCtx !== 0) e.peerKnowsUs = true;
    if (e.ctx.delivered.length > before) {
      e.ctx.delivered.length = 0;
      e.ctx.deliveredMeta.length = 0;
      this.delivered.push({ from: e.peer, ctx: e.ctx.localId, payload: payload!, dstQpn: h.dstQpn, srcQpn: h.srcQpn });
    }
  }

  /** Deliveries since the last poll/take (the owner may answer them before the next poll). */
  takeDelivered(): Delivery[] {
    const d = this.delivered;
    this.delivered = [];
    return d;
  }

  /** The owner is done with `n` deliveries from context `ctx`: their credit returns. True: that context owes an ACK now. */
  release(ctx: number, n = 1): boolean {
    return this.byId.get(ctx)?.ctx.release(n) ?? false;
  }

  /** Fire due timers. */
  tick(now: number): void {
    for (const e of this.byId.values()) this.tickContext(e, now);
  }

  private tickContext(e: Entry, now: number): void {
    const ctx = e.ctx;
    if (ctx.keepaliveDeadline() <= now) ctx.keepalive(now, this.opts.keepPeer?.(e.peer) ?? false);
    if (ctx.nextDeadline() <= now) ctx.tick(now);
  }

  /**
   * Collect what may be transmitted (at most `burst` DATA datagrams per context) and report
   * since the last poll; reclaim dead contexts.
   */
  poll(now: number, burst = Infinity): PollResult {
    let more = false;
    // Deleting the entry being visited (drop below) is safe while iterating a Map.
    for (const e of this.byId.values()) {
      const ctx = e.ctx;
      this.tickContext(e, now);
      const tx = this.txScratch;
      tx.length = 0;
      if (ctx.flush(now, tx, burst)) more = true;
      for (let i = 0; i < tx.length; i++) this.emit(e, tx[i]);
      if (ctx.acked.length > 0) {
        for (const id of ctx.acked) this.acked.push(id);
        ctx.acked.length = 0;
      }
      if (ctx.state === 'failed') {
        // A keepalive failure has nothing outstanding to report: the peer is named alone.
        if (ctx.failed.length === 0 && ctx.failReason === 'peer-lost') this.failed.push({ id: 0, peer: e.peer, reason: 'peer-lost' });
        this.drainFailures(e, ctx.failReason ?? 'retry-exceeded');
        this.counters.contextsFailed++;
        this.drop(e);
      } else if (ctx.quiescent && now - ctx.lastActivity >= this.opts.idleMs) {
        this.counters.contextsReclaimed++;
        this.drop(e);
      }
    }
    const res = { more, datagrams: this.out, delivered: this.delivered, acked: this.acked, failed: this.failed };
    this.out = [];
    this.delivered = [];
    this.acked = [];
    this.failed = [];
    return res;
  }

  /** Earliest time tick/poll has work (Infinity: none; idle reclaim included). */
  nextDeadline(): number {
    let d = Infinity;
    for (const e of this.byId.values()) {
      const t = e.ctx.nextDeadline();
      if (t < d) d = t;
      if (e.ctx.quiescent) {
        const idle = e.ctx.lastActivity + this.opts.idleMs;
        if (idle < d) d = idle;
      }
    }
    return d;
  }

  /** Fail everything outstanding and forget every context. */
  close(): PollResult {
    for (const e of [...this.byId.values()]) {
      e.ctx.fail('closed');
      this.drainFailures(e, 'closed');
      this.drop(e);
    }
    this.closed = true;
    const res = { more: false, datagrams: [], delivered: this.delivered, acked: this.acked, failed: this.failed };
    this.delivered = [];
    this.acked = [];
    this.failed = [];
    return res;
  }

  // ---------------------------------------------------------------- contexts

  private create(peer: PeerAddress, peerId: number, now: number, inbound: boolean): Entry {
    const ctx = new TransportContext(this.newLocalId(), now, this.opts.context, peerId);
    // We contact it: one datagram until it shows it keeps state for us (see validated()).
    ctx.probing = !inbound;
    const e: Entry = {
      ctx, peer, key: addrKey(peer), inbound, cookie: undefined, token: this.secret.token(ctx.localId), peerToken: undefined, peerKnowsUs: false,
      integ: undefined,
    };
    this.byId.set(ctx.localId, e);
    this.byAddr.set(e.key, e);
    if (inbound) {
      const h = this.hosts.get(peer.host);
      if (h === undefined) this.hosts.set(peer.host, { inbound: 1, scanAt: -Infinity });
      else h.inbound++;
    }
    this.counters.contextsCreated++;
    return e;
  }

  private drop(e: Entry): void {
    if (this.byId.get(e.ctx.localId) === e) addTotals(this.ctxTotals, e.ctx.counters);
    this.byId.delete(e.ctx.localId);
    if (this.byAddr.get(e.key) === e) this.byAddr.delete(e.key);
    if (e.inbound) {
      const h = this.hosts.get(e.peer.host);
      if (h !== undefined && --h.inbound <= 0) this.hosts.delete(e.peer.host);
      e.inbound = false;
    }
  }

  /** A new incarnation of our side of the context: new id and token, nothing learnt from the peer. */
  private renew(e: Entry, mode: 'requeue' | 'fail', peerId: number, now: number): void {
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
      if (id !== 0 && !this.byId.has(id)) return id;
    }
  }

  private retire(id: number): void {
    this.retired.add(id);
    if (this.retired.size > this.opts.maxRetiredIds) {
      const first = this.retired.values().next().value as number;
      this.retired.delete(first);
    }
  }

  private drainFailures(e: Entry, reason: FailReason): void {
    for (const id of e.ctx.failed) this.failed.push({ id, peer: e.peer, reason });
    e.ctx.failed.length = 0;
  }

  /**
   * Free the quiescent context (of `host`'s inbound ones, or any) idle longest, if it has
   * been idle at least RECLAIM_GUARD_MS. Quiescent means everything it delivered was acked
   * and it has nothing in flight; the guard (above the largest RTO) means the peer has seen
   * that ACK or is past retrying, so a later RESET (whose token makes the peer start a fresh
   * stream) cannot make it send again something already delivered. One scan over the
   * contexts; a scan that found nothing is not repeated for RESCAN_MS.
   */
  private reclaimIdle(now: number, host: string | undefined): boolean {
    const hs = host === undefined ? undefined : this.hosts.get(host);
    if (now < (hs === undefined ? this.scanAt : hs.scanAt)) return false;
    let victim: Entry | undefined;
    for (const e of this.byId.values()) {
      if (!e.ctx.quiescent || (host !== undefined && (!e.inbound || e.peer.host !== host))) continue;
      if (victim === undefined || e.ctx.lastActivity < victim.ctx.lastActivity) victim = e;
    }
    const guard = Math.min(this.opts.idleMs, RECLAIM_GUARD_MS);
    if (victim === undefined || now - victim.ctx.lastActivity < guard) {
      if (hs !== undefined) hs.scanAt = now + RESCAN_MS;
      else this.scanAt = now + RESCAN_MS;
      return false;
    }
    this.counters.contextsReclaimed++;
    this.drop(victim);
    return true;
  }

  /** Room for a context a validated peer of `host` asks for: its host's cap, then the device's. */
  private room(host: string, now: number): boolean {
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

  // ---------------------------------------------------------------- handshake

  /** The peer keeps a context for us: learn its id and reset token; what waited goes now. */
  private establish(e: Entry, peerId: number, token: Uint8Array, now: number, tsEcr: number, integ: number): void {
    e.ctx.peerId = peerId;
    e.peerToken = token;
    e.integ = integ;
    e.cookie = undefined;
    if (e.ctx.probing) e.ctx.validated(now, tsEcr);
  }

  /**
   * A validated first contact (its cookie came back from the address it was sent to): a new
   * context, or ours if we were contacting it at the same time, or — the live context has
   * another peer id — the proof that the peer restarted: only now is the old one failed.
   * `integ`: what its wish and ours settle (a refused wish never gets here).
   */
  private admit(e: Entry | undefined, from: PeerAddress, h: UdpHdr, token: Uint8Array, now: number, integ: number): Entry | undefined {
    if (e === undefined) {
      if (!this.room(from.host, now)) return undefined;
      const n = this.create({ host: from.host, port: from.port }, h.srcCtx, now, true);
      n.peerToken = token;
      n.integ = integ;
      return n;
    }
    if (e.ctx.peerId === 0) {
      this.establish(e, h.srcCtx, token, now, 0, integ);
      return e;
    }
    this.counters.peerRestarts++;
    this.renew(e, 'fail', h.srcCtx, now);
    e.peerToken = token;
    e.integ = integ;
    this.drainFailures(e, 'peer-reset');
    return e;
  }

  private onCookie(h: UdpHdr, now: number): void {
    const e = this.byId.get(h.dstCtx);
    // Only a context of ours that contacted a peer and has not heard from it waits for one;
    // the COOKIE names our id, which only someone who saw our datagram knows.
    if (e === undefined || e.ctx.peerId !== 0 || h.cookie === undefined || h.cookie.time === 0) {
      this.counters.cookiesIgnored++;
      return;
    }
    this.counters.cookiesReceived++;
    e.cookie = h.cookie;
    e.ctx.validated(now, h.tsEcr);
  }

  private onReset(h: UdpHdr, now: number): void {
    const e = h.dstCtx !== 0 ? this.byId.get(h.dstCtx) : undefined;
    if (e === undefined) {
      this.counters.unknownContext++;
      return;
    }
    // RFC 5961's lesson: a reset must prove it saw the connection. Ours echoes both random
    // context ids; an off-path sender would have to guess 64 bits.
    if (e.ctx.peerId === 0 || e.ctx.peerId !== h.srcCtx) {
      this.counters.resetsInvalid++;
      return;
    }
    if (h.token !== undefined && e.peerToken !== undefined && sameMac(h.token, e.peerToken)) {
      // The same device (its secret made the token) dropped our context while idle: it cannot
      // have delivered anything it did not ack (see reclaimIdle), so start a fresh stream and
      // send again what it has not acknowledged.
      this.counters.resetsReceived++;
      this.renew(e, 'requeue', 0, now);
    } else {
      // A device that cannot make its token has a new secret: a new incarnation, whose engine
      // forgot everything. What we had in flight to the old one is lost.
      this.counters.peerRestarts++;
      this.renew(e, 'fail', 0, now);
      this.drainFailures(e, 'peer-reset');
    }
  }

  /** Answer a first contact (no state kept): never longer than the datagram it answers. */
  private sendCookie(to: PeerAddress, h: UdpHdr, triggerLen: number, now: number): void {
    if (triggerLen < COOKIE_DATAGRAM_LEN) {
      this.counters.amplificationRefused++;
      return;
    }
    const cookie = this.secret.cookie(to.host, to.port, h.srcCtx, now);
    const m = cookie.mac;
    const hdr: UdpHdr = {
      type: UdpType.Cookie, ackReq: false, retx: false, window: 0,
      // Not a context (we keep none): any nonzero value; this one is as unpredictable as the mac.
      srcCtx: ((m[0]! << 24) | (m[1]! << 16) | (m[2]! << 8) | m[3]!) >>> 0 || 1,
      dstCtx: h.srcCtx, psn: 0, ackPsn: 0, tsVal: tsNow(now), tsEcr: h.tsVal, dstQpn: 0, srcQpn: 0, sack: [], cookie,
    };
    this.counters.cookiesSent++;
    this.out.push(this.frame({ host: to.host, port: to.port }, hdr, null, 0, UdpIntegrity.Crc32c));
  }

  /** Tell the sender we lost the context it names: rate-limited, at most 3x the trigger. */
  private sendReset(to: PeerAddress, h: UdpHdr, triggerLen: number, now: number): void {
    if (RESET_DATAGRAM_LEN > AMPLIFICATION * triggerLen) {
      this.counters.amplificationRefused++;
      return;
    }
    if (!this.hostResets.take(to.host, now)) {
      this.counters.resetsSuppressed++;
      return;
    }
    if (!this.deviceResets.take(now)) {
      this.counters.resetsSuppressed++;
      return;
    }
    const hdr: UdpHdr = {
      type: UdpType.Reset, ackReq: false, retx: false, window: 0, srcCtx: h.dstCtx, dstCtx: h.srcCtx, psn: 0, ackPsn: 0,
      tsVal: tsNow(now), tsEcr: h.tsVal, dstQpn: 0, srcQpn: 0, sack: [], token: this.secret.token(h.dstCtx),
    };
    this.counters.resetsSent++;
    this.out.push(this.frame({ host: to.host, port: to.port }, hdr, null, 0, UdpIntegrity.Crc32c));
  }

  // ---------------------------------------------------------------- framing

  private emit(e: Entry, d: TxDatagram): void {
    const h = d.hdr;
    if (h.dstCtx === 0) {
      // First contact: the cookie block — zeros until the peer gave us a cookie, so that the
      // COOKIE answering this datagram is never longer than it — and, with a cookie, our token.
      h.cookie = e.cookie ?? ZERO_COOKIE;
      if (e.cookie !== undefined) h.token = e.token;
    } else if (!e.peerKnowsUs) {
      h.token = e.token;
    }
    // The handshake datagrams (those with our cookie echo or token) carry our wish.
    if (h.dstCtx === 0 || h.token !== undefined) h.integ = this.integrity;
    // Until the peer has learnt our id it finds us by source address: use the first socket.
    const path = this.opts.paths > 1 && h.dstCtx !== 0 ? this.rr++ % this.opts.paths : 0;
    this.out.push(this.frame(e.peer, h, d.payload, path, h.dstCtx === 0 ? UdpIntegrity.Crc32c : e.integ ?? UdpIntegrity.Crc32c));
  }

  private frame(to: PeerAddress, hdr: UdpHdr, payload: TxPayload | null, path: number, kind: number): OutDatagram {
    const hlen = udpHeaderLength(hdr);
    const tlen = UDP_TRAILER_LENS[kind]!;
    // A view of a shared chunk, not an array of its own: one per datagram sent, and a fresh
    // small Uint8Array is on-heap, which the socket's send then moves off-heap (./slab.ts).
    const buf = this.slab.take(hlen + tlen);
    encodeUdpHdr(hdr, buf, 0);
    if (kind !== UdpIntegrity.Crc32c) setUdpTrailer(buf, 0, kind);
    this.counters.txDatagrams++;
    if (kind === UdpIntegrity.None) {
      if (payload === null) return { to, parts: [buf], path };
      return { to, parts: payload instanceof Uint8Array ? [buf, payload] : [buf, ...payload], path };
    }
    const head = buf.subarray(0, hlen);
    const trailer = buf.subarray(hlen);
    if (kind === UdpIntegrity.Xxh3) {
      if (payload === null) {
        this.opts.xxh3.hash([head], 0, 1, trailer, 0);
        return { to, parts: [buf], path };
      }
      const parts = payload instanceof Uint8Array ? [head, payload, trailer] : [head, ...payload, trailer];
      this.opts.xxh3.hash(parts, 0, parts.length - 1, trailer, 0);
      return { to, parts, path };
    }
    const crc32c = this.opts.crc32c;
    let crc = crc32c(head, 0);
    if (payload === null) {
      writeTrailer(trailer, crc);
      return { to, parts: [buf], path };
    }
    const parts = payload instanceof Uint8Array ? [head, payload, trailer] : [head, ...payload, trailer];
    const offloadable = this.opts.txOffloadable;
    let big = -1;
    if (offloadable !== undefined) {
      for (let i = 1; i < parts.length - 1; i++) if (offloadable(parts[i]!) && (big < 0 || parts[i]!.length > parts[big]!.length)) big = i;
    }
    const stop = big < 0 ? parts.length - 1 : big;
    for (let i = 1; i < stop; i++) crc = crc32c(parts[i]!, crc);
    if (big >= 0) return { to, parts, path, pendingCrc: { part: big, prefix: crc } };
    writeTrailer(trailer, crc);
    return { to, parts, path };
  }

  /** Finish a `pendingCrc` datagram given the CRC32C through parts[pendingCrc.part]. */
  sealDeferred(d: OutDatagram, crcThroughPart: number): void {
    const p = d.pendingCrc;
    if (p === undefined) return;
    let crc = crcThroughPart >>> 0;
    for (let i = p.part + 1; i < d.parts.length - 1; i++) crc = this.opts.crc32c(d.parts[i]!, crc);
    writeTrailer(d.parts[d.parts.length - 1]!, crc);
    d.pendingCrc = undefined;
  }
}

/** Trailer least-significant byte first, as src/wire/udp.ts's sealUdpDatagram writes it. */
function writeTrailer(t: Uint8Array, crc: number): void {
  t[0] = crc;
  t[1] = crc >>> 8;
  t[2] = crc >>> 16;
  t[3] = crc >>> 24;
}
