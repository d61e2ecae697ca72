// The device side of the UDP transport, sans-I/O: turns datagrams (bytes + source address)
// into context events and context output into datagrams (header bytes, payload, CRC32C
// trailer, ready for a gathering send). One transport context per peer, created on first use
// in either direction, found by our context id once the peer has learnt it (so replies through
// a relay, or from another of the peer's sockets, still land) and by source address before.
//
// Nothing a datagram says is trusted with state or work before it is proven: a context is
// made only by a cookie handshake; after it a datagram must name our context id and its own
// (64 random bits an off-path attacker would have to guess, as SCTP's verification tag);
// RESETs are proven and rate-limited (./handshake.ts says how and why). Contexts the peers
// create are capped per source host and per device; an idle one is reclaimed (never one with
// data in flight or an ACK owed). Everything refused is a counted drop (stats()).
//
// This file is the receive dispatch (which checks a datagram passes, and whose it is), send,
// and the poll that collects every context's output and events; the handshake (cookies,
// resets, restarts, the integrity settled) is ./handshake.ts, the context table with its caps
// and reclaim ./contexts.ts, datagram framing (header, payload, trailer) ./framing.ts, and the
// shapes it takes and gives ./endpoint-types.ts.
import { randomInt } from 'node:crypto';
import { detachInPlace, type Owns } from '../../core/detach.js';
import { ErrorCode, SabreError } from '../../core/errors.js';
import type { TransportContextStats } from '../../core/link.js';
import { crc32c as kernelCrc32c } from '../../kernels/crc32c.js';
import { ownXxh3 } from '../../kernels/xxh3-64.js';
import { UDP_COOKIE, UDP_INTEG, UDP_MAX_SACK, UDP_TOKEN, UDP_TRAILER_MAX, UdpIntegrity } from '../../wire/spec.js';
import { UdpType, UDP_HDR_LEN, openUdpDatagram } from '../../wire/udp.js';
import { DEFAULT_UDP_INTEGRITY, checkIntegrityMode, integrityCode, integrityName, type IntegrityMode } from './integrity.js';
import { defaultContextOptions, MAX_SACK_BLOCKS, RxVerdict, type FailReason, type TxDatagram, type TxPayload } from './context-options.js';
import type { TransportContext } from './context.js';
import { addrKey, addTotals, ContextTable, type ContextTotals, type Entry } from './contexts.js';
import type { Delivery, EndpointCounters, EndpointOptions, Failure, OutDatagram, PeerAddress, PollResult } from './endpoint-types.js';

export type {
  Crc32cFn, Delivery, EndpointCounters, EndpointOptions, Failure, OutDatagram, PeerAddress, PollResult, Xxh3Hasher,
} from './endpoint-types.js';
export type { ContextTotals } from './contexts.js';
export { COOKIE_DATAGRAM_LEN, RESET_DATAGRAM_LEN } from './handshake.js';
import { DeviceSecret } from './cookie.js';
import { DatagramFramer } from './framing.js';
import { Handshake } from './handshake.js';

const SACK_ROOM = 4 + 8 * MAX_SACK_BLOCKS;
/** What a handshake may add to a header: our cookie echo, reset token and integrity wish. */
const HANDSHAKE_ROOM = UDP_COOKIE.size + UDP_TOKEN.size + UDP_INTEG.size;

function defaultRandomId(): number {
  return randomInt(1, 0x1_0000_0000);
}

/** Largest payload one datagram of `mtu` bytes carries: room is kept for the handshake blocks, SACK blocks and the longest trailer. */
export function maxPayloadFor(mtu: number): number {
  return mtu - UDP_HDR_LEN - HANDSHAKE_ROOM - SACK_ROOM - UDP_TRAILER_MAX;
}

/** Default receive credit: about 4 MiB of datagrams (a common kernel socket-buffer cap). */
export function defaultCredit(mtu: number): number {
  return Math.max(16, Math.min(512, Math.floor((4 << 20) / mtu)));
}

export class UdpEndpoint {
  readonly opts: EndpointOptions;
  /** Largest payload send() accepts for one datagram. */
  readonly maxPayload: number;
  readonly counters: EndpointCounters = {
    rxDatagrams: 0, txDatagrams: 0, truncated: 0, oversized: 0, badCrc: 0, badHash: 0, badIntegrity: 0, integrityRefused: 0, malformed: 0,
    unknownContext: 0, stale: 0, contextLimit: 0, hostLimit: 0, cookiesSent: 0, cookiesValidated: 0, cookiesFailed: 0,
    cookiesExpired: 0, cookiesReceived: 0, cookiesIgnored: 0, unvalidated: 0, restartClaims: 0, amplificationRefused: 0,
    resetsSent: 0, resetsSuppressed: 0, resetsOwed: 0, resetsReceived: 0, resetsInvalid: 0, peerRestarts: 0, badAck: 0, badSack: 0,
    contextsCreated: 0, contextsReclaimed: 0, unownedReclaimed: 0, contextsFailed: 0,
  };
  private readonly table: ContextTable;
  private byPeer = new WeakMap<PeerAddress, Entry>();
  private readonly handshake: Handshake;
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

  /** Held: every context drops new DATA unacknowledged (the device's completion path is backed up; Link.holdReceive). */
  readonly rxHold = { held: false };

  constructor(opts: Partial<EndpointOptions> = {}) {
    const mtu = opts.mtu ?? 65000;
    const credit = defaultCredit(mtu);
    this.opts = {
      mtu,
      maxDatagram: 65507,
      maxContexts: 1024,
      maxContextsPerHost: 64,
      idleMs: 30_000,
      unownedContextMs: 10_000,
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
      context: { rcvCredit: credit, initialPeerWindow: Math.min(32, credit), ...opts.context, ...(opts.keepPeer === undefined ? { keepaliveMs: 0 } : {}), rxHold: this.rxHold },
    };
    this.maxPayload = maxPayloadFor(mtu);
    if (this.maxPayload < 64) throw new SabreError(ErrorCode.InvalidArgument, `mtu ${mtu} is too small`);
    if (MAX_SACK_BLOCKS > UDP_MAX_SACK) throw new Error('context SACK blocks exceed the wire limit');
    const o = this.opts;
    const secret = new DeviceSecret(o.secret);
    this.table = new ContextTable(this.opts, this.counters, secret, (e, reason) => this.drainFailures(e, reason));
    this.framer = new DatagramFramer(this.opts, this.counters);
    const crc = o.crc32c;
    this.crcCheck = (buf, off, len) => crc(buf.subarray(off, off + len), 0);
    const xxh3 = o.xxh3;
    this.xxh3Check = (buf, off, end) => xxh3.check(off === 0 && end === buf.length ? buf : buf.subarray(off, end));
    checkIntegrityMode(o.integrity);
    this.integrity = integrityCode(o.integrity);
    this.handshake = new Handshake(this.opts, this.counters, this.table, secret, this.framer, this.integrity, (e, reason) => this.drainFailures(e, reason));
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

  /** Some established context has payloads queued or not yet acknowledged by its peer. */
  get sending(): boolean {
    for (const e of this.table.byId.values()) if (e.ctx.sending) return true;
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
    contexts: number; hostsWithContexts: number; resetHosts: number; retiredIds: number; droppedIds: number; contextsCrc32c: number; contextsXxh3: number; contextsNone: number;
  } {
    const r = { ...this.table.totals };
    for (const e of this.table.byId.values()) addTotals(r, e.ctx.counters);
    const by = [0, 0, 0];
    for (const e of this.table.byId.values()) if (e.integ !== undefined) by[e.integ]!++;
    return {
      ...this.counters, ...r, contexts: this.table.byId.size, hostsWithContexts: this.table.hosts.size, resetHosts: this.handshake.resetHosts, retiredIds: this.table.retired.size,
      droppedIds: this.table.dropped.size,
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

  /** `peer`'s context, if it has one. The owner hands the same PeerAddress object for a peer each time: no key string per payload. */
  private entryOf(peer: PeerAddress): Entry | undefined {
    let e = this.byPeer.get(peer);
    if (e === undefined || this.table.byId.get(e.ctx.localId) !== e) e = this.table.byAddr.get(addrKey(peer));
    if (e !== undefined) this.byPeer.set(peer, e);
    return e;
  }

  /** The incarnation of `peer`'s context (0: none): a new one once it failed what it held (a peer restart). */
  incarnationOf(peer: PeerAddress): number {
    return this.entryOf(peer)?.ctx.incarnation ?? 0;
  }

  /** Payloads send() would queue for `peer` now (a peer without a context gets a new one's). */
  sendRoom(peer: PeerAddress): number {
    if (this.closed) return 0;
    const e = this.entryOf(peer);
    return e === undefined ? this.opts.context.maxSendQueue ?? defaultContextOptions.maxSendQueue : e.ctx.sendRoom;
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
    let e = this.entryOf(peer);
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
   * trailer kind is CRC32C, else checked here. False when it changed nothing (refused, dropped,
   * or a handshake datagram naming no context of ours, unanswered): the shell then owes no flush,
   * whose visit of every context a stream of strays would otherwise buy one at a time.
   */
  receive(buf: Uint8Array, from: PeerAddress, now: number, crc?: number): boolean {
    const out = this.out.length;
    this.#took = false;
    this.#receive(buf, from, now, crc);
    return this.#took || this.out.length !== out;
  }

  /** The datagram reached a context of ours (see receive). */
  #took = false;

  #receive(buf: Uint8Array, from: PeerAddress, now: number, crc?: number): void {
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
    if (h.type === UdpType.Reset || h.type === UdpType.Cookie) {
      // Only one naming a context of ours can change it (the handshake checks the rest).
      this.#took = this.table.byId.has(h.dstCtx);
      if (h.type === UdpType.Reset) this.handshake.onReset(h, now);
      else this.handshake.onCookie(h, now);
      return;
    }
    let e: Entry | undefined;
    if (h.dstCtx !== 0) {
      e = this.table.byId.get(h.dstCtx);
      if (e === undefined) {
        // We lost (reclaimed, or restarted without) the context the peer still uses.
        c.unknownContext++;
        if (this.table.retired.has(h.srcCtx)) c.stale++;
        else this.handshake.sendReset(from, h, buf.length, now, this.out, this.table.owesReset(h.dstCtx, from, now));
        return;
      }
      if (e.ctx.peerId === 0) {
        if (!this.handshake.firstAnswer(e, h, kind, now)) return;
      } else if (e.ctx.peerId !== h.srcCtx) {
        c.stale++;
        return;
      } else if (kind !== e.integ) {
        c.badIntegrity++;
        return;
      }
    } else {
      e = this.table.byAddr.get(addrKey(from));
      // Once the peer has named our id, every datagram of its names it: dstCtx 0 with its id is
      // a late copy of an early one (resent anyway) or a forgery that guessed one 32-bit id of
      // the two — taken, it would place the forger's bytes and make the peer's real datagram of
      // that PSN a duplicate, acked and lost.
      if (e !== undefined && e.peerKnowsUs && e.ctx.peerId === h.srcCtx) {
        c.stale++;
        return;
      }
      // A peer we know sends with dstCtx 0 until it has learnt our id: that is fine. Anything
      // else is a first contact (or a restart claim) and must bring back a cookie of ours.
      if (e === undefined || e.ctx.peerId !== h.srcCtx) {
        e = this.handshake.firstContact(e, from, h, buf.length, now, this.out);
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
    this.#took = true;
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
        this.table.drop(e, true);
      } else if (ctx.quiescent && now - ctx.lastActivity >= this.opts.idleMs) {
        this.counters.contextsReclaimed++;
        this.table.drop(e, true);
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

  /** Receiving resumes (Link.holdReceive): every open context tells its peer at once that its window opened. */
  windowOpened(): void {
    for (const e of this.table.byId.values()) if (e.ctx.state === 'open') e.ctx.rx.ackNow = true;
  }

  /** The device closes: every ACK owed goes in the next poll, not at its delayed-ACK deadline. */
  ackOwed(): void {
    for (const e of this.table.byId.values()) if (e.ctx.state === 'open' && e.ctx.rx.ackDue()) e.ctx.rx.ackNow = true;
  }

  /** Fail everything outstanding and forget every context. */
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

  // ---------------------------------------------------------------- framing

  private emit(e: Entry, d: TxDatagram): void {
    const h = d.hdr;
    this.handshake.decorate(e, h);
    // Until the peer has learnt our id it finds us by source address: use the first socket.
    const path = this.opts.paths > 1 && h.dstCtx !== 0 ? this.rr++ % this.opts.paths : 0;
    this.out.push(this.framer.frame(e.peer, h, d.payload, path, h.dstCtx === 0 ? UdpIntegrity.Crc32c : e.integ ?? UdpIntegrity.Crc32c));
  }

  /**
   * Memory is about to be reused: the views `owns` claims in every context's payloads and in
   * datagrams built and not yet sent (`out`, and the shell's own queue `ds`) become copies. A
   * datagram whose CRC is still to come is sealed first, from the bytes it was built with.
   */
  detach(owns: Owns, ds: readonly OutDatagram[] = []): void {
    for (const e of this.table.byId.values()) e.ctx.detach(owns);
    for (const list of [this.out, ds]) {
      for (const d of list) {
        if (!d.parts.some(owns)) continue;
        const p = d.pendingCrc;
        if (p !== undefined) this.framer.sealDeferred(d, this.opts.crc32c(d.parts[p.part]!, p.prefix));
        detachInPlace(d.parts, owns);
      }
    }
  }

  /** Finish a `pendingCrc` datagram given the CRC32C through parts[pendingCrc.part]. */
  sealDeferred(d: OutDatagram, crcThroughPart: number): void {
    this.framer.sealDeferred(d, crcThroughPart);
  }
}
