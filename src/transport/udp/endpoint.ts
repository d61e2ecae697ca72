// The device side of the UDP transport, sans-I/O: turns datagrams (bytes + source address)
// into context events and context output into datagrams (header bytes, payload, CRC32C
// trailer, ready for a gathering send). One transport context per peer, created on first use
// in either direction, found by our context id once the peer has learnt it (so replies through
// a relay, or from another of the peer's sockets, still land) and by source address before.
//
// Nothing a datagram says is trusted with state or work before it is proven (the threat
// model is docs/resource-bounds.md's). An off-path attacker can send anything from any
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
//
// This file is the receive dispatch, the handshake (cookies, resets, restarts) and the poll;
// the context table with its caps and reclaim is ./contexts.ts, datagram framing (header,
// payload, trailer) ./framing.ts, and the shapes it takes and gives ./endpoint-types.ts.
import { randomInt } from 'node:crypto';
import { ErrorCode, SabreError } from '../../core/errors.js';
import type { TransportContextStats } from '../../core/link.js';
import { crc32c as kernelCrc32c } from '../../kernels/crc32c.js';
import { ownXxh3 } from '../../kernels/xxh3-64.js';
import { UDP_COOKIE, UDP_INTEG, UDP_MAX_SACK, UDP_TOKEN, UDP_TRAILER_MAX, UdpIntegrity } from '../../wire/spec.js';
import { UdpType, UDP_HDR_LEN, UDP_TRAILER_LEN, openUdpDatagram, type UdpHdr } from '../../wire/udp.js';
import { DEFAULT_UDP_INTEGRITY, checkIntegrityMode, integrityCode, integrityName, settleIntegrity, type IntegrityMode } from './integrity.js';
import { MAX_SACK_BLOCKS, RxVerdict, type FailReason, type TxDatagram, type TxPayload } from './context-options.js';
import type { TransportContext } from './context.js';
import { addrKey, addTotals, ContextTable, type ContextTotals, type Entry } from './contexts.js';
import type { Delivery, EndpointCounters, EndpointOptions, Failure, OutDatagram, PeerAddress, PollResult } from './endpoint-types.js';

export type {
  Crc32cFn, Delivery, EndpointCounters, EndpointOptions, Failure, OutDatagram, PeerAddress, PollResult, Xxh3Hasher,
} from './endpoint-types.js';
export type { ContextTotals } from './contexts.js';
import { DeviceSecret, ZERO_COOKIE, sameMac } from './cookie.js';
import { HostBuckets, TokenBucket } from './rate-limit.js';
import { DatagramFramer } from './framing.js';

const SACK_ROOM = 4 + 8 * MAX_SACK_BLOCKS;
/** What a handshake may add to a header: our cookie echo, reset token and integrity wish. */
const HANDSHAKE_ROOM = UDP_COOKIE.size + UDP_TOKEN.size + UDP_INTEG.size;
export const COOKIE_DATAGRAM_LEN = UDP_HDR_LEN + UDP_COOKIE.size + UDP_TRAILER_LEN;
export const RESET_DATAGRAM_LEN = UDP_HDR_LEN + UDP_TOKEN.size + UDP_TRAILER_LEN;
/** QUIC's anti-amplification factor (RFC 9000 §8): never answer with more than 3x what came. */
const AMPLIFICATION = 3;

function defaultRandomId(): number {
  return randomInt(1, 0x1_0000_0000);
}

/** Default receive credit: about 4 MiB of datagrams (a common kernel socket-buffer cap). */
export function defaultCredit(mtu: number): number {
  return Math.max(16, Math.min(512, Math.floor((4 << 20) / mtu)));
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
  private readonly table: ContextTable;
  private byPeer = new WeakMap<PeerAddress, Entry>();
  private readonly secret: DeviceSecret;
  private readonly deviceResets: TokenBucket;
  private readonly hostResets: HostBuckets;
  private nextPayloadId = 1;
  private rr = 0;
  private closed = false;
  private out: OutDatagram[] = [];
  private delivered: Delivery[] = [];
  private acked: number[] = [];
  private failed: Failure[] = [];
  private txScratch: TxDatagram[] = [];
  private readonly framer: DatagramFramer;
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
    this.table = new ContextTable(this.opts, this.counters, this.secret);
    this.framer = new DatagramFramer(this.opts, this.counters);
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
    const e = this.table.byAddr.get(addrKey(peer));
    return e?.integ === undefined ? undefined : integrityName(e.integ);
  }

  get contexts(): number {
    return this.table.byId.size;
  }

  /** Some context has data to send, unacknowledged payloads or an ACK owed. */
  get busy(): boolean {
    for (const e of this.table.byId.values()) if (!e.ctx.quiescent) return true;
    return false;
  }

  /** Per-peer state, for tests and stats. */
  context(peer: PeerAddress): TransportContext | undefined {
    return this.table.byAddr.get(addrKey(peer))?.ctx;
  }

  /**
   * Every counter, and the sizes of every table a peer can grow (docs/resource-bounds.md). The
   * DATA datagrams the contexts refused after the header checks (a PSN already received or past
   * the receive window, no receive credit left) are summed over live and dropped contexts.
   */
  stats(): EndpointCounters & ContextTotals & {
    contexts: number; hostsWithContexts: number; resetHosts: number; retiredIds: number; contextsCrc32c: number; contextsXxh3: number; contextsNone: number;
  } {
    const r = { ...this.table.totals };
    for (const e of this.table.byId.values()) addTotals(r, e.ctx.counters);
    const by = [0, 0, 0];
    for (const e of this.table.byId.values()) if (e.integ !== undefined) by[e.integ]!++;
    return {
      ...this.counters, ...r, contexts: this.table.byId.size, hostsWithContexts: this.table.hosts.size, resetHosts: this.hostResets.size, retiredIds: this.table.retired.size,
      contextsCrc32c: by[UdpIntegrity.Crc32c]!, contextsXxh3: by[UdpIntegrity.Xxh3]!, contextsNone: by[UdpIntegrity.None]!,
    };
  }

  /**
   * Per-context counters and congestion state, at most `max` contexts (those with the most
   * retransmissions first, so a lossy peer is never the one left out).
   */
  contextStats(max = 64): TransportContextStats[] {
    const rows: TransportContextStats[] = [];
    for (const e of this.table.byId.values()) {
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
    if (e === undefined || this.table.byId.get(e.ctx.localId) !== e) e = this.table.byAddr.get(addrKey(peer));
    if (e !== undefined) this.byPeer.set(peer, e);
    if (e === undefined) {
      if (this.table.byId.size >= this.opts.maxContexts && !this.table.reclaimIdle(now, undefined)) {
        throw new SabreError(ErrorCode.LimitExceeded, 'too many peer contexts');
      }
      e = this.table.create({ host: peer.host, port: peer.port }, 0, now, false);
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
      e = this.table.byId.get(h.dstCtx);
      if (e === undefined) {
        // We lost (reclaimed, or restarted without) the context the peer still uses.
        c.unknownContext++;
        if (this.table.retired.has(h.srcCtx)) c.stale++;
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
      e = this.table.byAddr.get(addrKey(from));
      // A peer we know sends with dstCtx 0 until it has learnt our id: that is fine. Anything
      // else is a first contact (or a restart claim) and must bring back a cookie of ours.
      if (e === undefined || e.ctx.peerId !== h.srcCtx) {
        if (this.table.retired.has(h.srcCtx)) {
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
    return this.table.byId.get(ctx)?.ctx.release(n) ?? false;
  }

  /** Fire due timers. */
  tick(now: number): void {
    for (const e of this.table.byId.values()) this.tickContext(e, now);
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
    for (const e of this.table.byId.values()) {
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
        this.table.drop(e);
      } else if (ctx.quiescent && now - ctx.lastActivity >= this.opts.idleMs) {
        this.counters.contextsReclaimed++;
        this.table.drop(e);
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
    for (const e of this.table.byId.values()) {
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
  /** The device closes: every ACK owed goes in the next poll, not at its delayed-ACK deadline. */
  ackOwed(): void {
    for (const e of this.table.byId.values()) if (e.ctx.state === 'open' && e.ctx.rx.ackDue()) e.ctx.rx.ackNow = true;
  }

  close(): PollResult {
    for (const e of [...this.table.byId.values()]) {
      e.ctx.fail('closed');
      this.drainFailures(e, 'closed');
      this.table.drop(e);
    }
    this.closed = true;
    const res = { more: false, datagrams: [], delivered: this.delivered, acked: this.acked, failed: this.failed };
    this.delivered = [];
    this.acked = [];
    this.failed = [];
    return res;
  }

  // ---------------------------------------------------------------- contexts

  private drainFailures(e: Entry, reason: FailReason): void {
    for (const id of e.ctx.failed) this.failed.push({ id, peer: e.peer, reason });
    e.ctx.failed.length = 0;
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
      if (!this.table.room(from.host, now)) return undefined;
      const n = this.table.create({ host: from.host, port: from.port }, h.srcCtx, now, true);
      n.peerToken = token;
      n.integ = integ;
      return n;
    }
    if (e.ctx.peerId === 0) {
      this.establish(e, h.srcCtx, token, now, 0, integ);
      return e;
    }
    this.counters.peerRestarts++;
    this.table.renew(e, 'fail', h.srcCtx, now);
    e.peerToken = token;
    e.integ = integ;
    this.drainFailures(e, 'peer-reset');
    return e;
  }

  private onCookie(h: UdpHdr, now: number): void {
    const e = this.table.byId.get(h.dstCtx);
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
    const e = h.dstCtx !== 0 ? this.table.byId.get(h.dstCtx) : undefined;
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
      this.table.renew(e, 'requeue', 0, now);
    } else {
      // A device that cannot make its token has a new secret: a new incarnation, whose engine
      // forgot everything. What we had in flight to the old one is lost.
      this.counters.peerRestarts++;
      this.table.renew(e, 'fail', 0, now);
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
    this.out.push(this.framer.frame({ host: to.host, port: to.port }, hdr, null, 0, UdpIntegrity.Crc32c));
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
    this.out.push(this.framer.frame({ host: to.host, port: to.port }, hdr, null, 0, UdpIntegrity.Crc32c));
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
    this.out.push(this.framer.frame(e.peer, h, d.payload, path, h.dstCtx === 0 ? UdpIntegrity.Crc32c : e.integ ?? UdpIntegrity.Crc32c));
  }

  /** Finish a `pendingCrc` datagram given the CRC32C through parts[pendingCrc.part]. */
  sealDeferred(d: OutDatagram, crcThroughPart: number): void {
    this.framer.sealDeferred(d, crcThroughPart);
  }
}
