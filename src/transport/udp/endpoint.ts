// The device side of the UDP transport, sans-I/O: turns datagrams (bytes + source address)
// into context events and context output into datagrams (header bytes, payload, CRC32C
// trailer, ready for a gathering send). One transport context per peer, created on first use
// in either direction, found by our context id once the peer has learnt it (so replies through
// a relay, or from another of the peer's sockets, still land) and by source address before.
//
// Everything hostile ends as a counted drop: short, long or corrupt datagrams, unknown or
// stale context ids, replayed PSNs, a flood of new peers (capped), a peer that stops acking
// (retry limit → its payloads fail, its context is freed).
import { randomInt } from 'node:crypto';
import { ErrorCode, SabreError } from '../../core/errors.js';
import { crc32c as kernelCrc32c } from '../../kernels/crc32c.js';
import { UDP_MAX_SACK } from '../../wire/spec.js';
import {
  UdpType, UDP_HDR_LEN, UDP_TRAILER_LEN, encodeUdpHdr, openUdpDatagram, udpHeaderLength, type UdpHdr,
} from '../../wire/udp.js';
import {
  MAX_SACK_BLOCKS, TransportContext, type ContextOptions, type FailReason, type TxDatagram, type TxPayload,
} from './context.js';

export interface PeerAddress {
  host: string;
  port: number;
}

/** CRC32C continuing from `previous`: crc(b, crc(a)) === crc(a ‖ b). */
export type Crc32cFn = (data: Uint8Array, previous?: number) => number;

export interface EndpointOptions {
  /** Largest datagram we emit (header + payload + trailer). Default 65000: loopback. */
  mtu: number;
  /** Datagrams longer than this are dropped unread. */
  maxDatagram: number;
  maxContexts: number;
  /** A quiescent context untouched this long is reclaimed. Keep it above the retry span. */
  idleMs: number;
  /** Number of sockets the shell stripes over (path index in each outgoing datagram). */
  paths: number;
  /** Old peer context ids remembered so their stray datagrams count as stale. */
  maxRetiredIds: number;
  context: Partial<ContextOptions>;
  crc32c: Crc32cFn;
  /** Source of context ids (nonzero u32); tests pass a seeded one. */
  randomId: () => number;
  /**
   * Parts for which this is true leave their CRC32C to the owner (a worker): frame() stops
   * at the largest such part and marks the datagram `pendingCrc` (see sealDeferred).
   */
  txOffloadable?: (part: Uint8Array) => boolean;
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
  id: number;
  peer: PeerAddress;
  reason: FailReason;
}

export interface EndpointCounters {
  rxDatagrams: number;
  txDatagrams: number;
  truncated: number;
  oversized: number;
  badCrc: number;
  malformed: number;
  unknownContext: number;
  stale: number;
  contextLimit: number;
  resetsSent: number;
  resetsReceived: number;
  peerRestarts: number;
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

interface Entry {
  ctx: TransportContext;
  peer: PeerAddress;
  key: string;
}

const SACK_ROOM = 4 + 8 * MAX_SACK_BLOCKS;

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

export class UdpEndpoint {
  readonly opts: EndpointOptions;
  /** Largest payload send() accepts for one datagram. */
  readonly maxPayload: number;
  readonly counters: EndpointCounters = {
    rxDatagrams: 0, txDatagrams: 0, truncated: 0, oversized: 0, badCrc: 0, malformed: 0,
    unknownContext: 0, stale: 0, contextLimit: 0, resetsSent: 0, resetsReceived: 0,
    peerRestarts: 0, contextsCreated: 0, contextsReclaimed: 0, contextsFailed: 0,
  };
  private byId = new Map<number, Entry>();
  private byAddr = new Map<string, Entry>();
  private byPeer = new WeakMap<PeerAddress, Entry>();
  private retired = new Set<number>();
  private nextPayloadId = 1;
  private rr = 0;
  private closed = false;
  private out: OutDatagram[] = [];
  private delivered: Delivery[] = [];
  private acked: number[] = [];
  private failed: Failure[] = [];
  private txScratch: TxDatagram[] = [];
  private readonly crcCheck: (buf: Uint8Array, off: number, len: number) => number;

  constructor(opts: Partial<EndpointOptions> = {}) {
    const mtu = opts.mtu ?? 65000;
    const credit = defaultCredit(mtu);
    this.opts = {
      mtu,
      maxDatagram: 65507,
      maxContexts: 1024,
      idleMs: 30_000,
      paths: 1,
      maxRetiredIds: 4096,
      randomId: defaultRandomId,
      crc32c: kernelCrc32c,
      ...opts,
      context: { rcvCredit: credit, initialPeerWindow: Math.min(32, credit), ...opts.context },
    };
    this.maxPayload = mtu - UDP_HDR_LEN - SACK_ROOM - UDP_TRAILER_LEN;
    if (this.maxPayload < 64) throw new SabreError(ErrorCode.InvalidArgument, `mtu ${mtu} is too small`);
    if (MAX_SACK_BLOCKS > UDP_MAX_SACK) throw new Error('context SACK blocks exceed the wire limit');
    const crc = this.opts.crc32c;
    this.crcCheck = (buf, off, len) => crc(buf.subarray(off, off + len), 0);
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
      if (this.byId.size >= this.opts.maxContexts) this.reclaimIdle(now, true);
      if (this.byId.size >= this.opts.maxContexts) throw new SabreError(ErrorCode.LimitExceeded, 'too many peer contexts');
      e = this.create({ host: peer.host, port: peer.port }, 0, now);
    }
    const id = this.nextPayloadId++;
    if (e.ctx.send(payload, now, dstQpn, srcQpn, id) === 0) {
      throw new SabreError(ErrorCode.QueueFull, 'transport send queue full');
    }
    return id;
  }

  /**
   * One datagram from the socket. Never throws on its content. `crc`: the CRC32C of
   * buf[0, length - 4) when the owner already computed it (a worker did), else checked here.
   */
  receive(buf: Uint8Array, from: PeerAddress, now: number, crc?: number): void {
    if (this.closed) return;
    const c = this.counters;
    c.rxDatagrams++;
    if (buf.length > this.opts.maxDatagram) {
      c.oversized++;
      return;
    }
    if (buf.length < UDP_HDR_LEN + UDP_TRAILER_LEN) {
      c.truncated++;
      return;
    }
    const r = openUdpDatagram(buf, 0, buf.length, crc === undefined ? this.crcCheck : () => crc);
    if (!r.ok) {
      if (r.error === 'BAD_CRC') c.badCrc++;
      else if (r.error === 'TRUNCATED') c.truncated++;
      else c.malformed++;
      return;
    }
    const h = r.value.hdr;
    if (h.srcCtx === 0) {
      c.malformed++;
      return;
    }
    if (h.type === UdpType.Reset) {
      this.onReset(h, now);
      return;
    }
    let e: Entry | undefined;
    if (h.dstCtx !== 0) {
      e = this.byId.get(h.dstCtx);
      if (e === undefined) {
        // We lost (reclaimed, or restarted without) the context the peer still uses.
        c.unknownContext++;
        this.sendReset(from, h.srcCtx, now);
        return;
      }
      if (e.ctx.peerId === 0) e.ctx.peerId = h.srcCtx;
      else if (e.ctx.peerId !== h.srcCtx) {
        c.stale++;
        return;
      }
    } else {
      e = this.byAddr.get(addrKey(from));
      if (this.retired.has(h.srcCtx)) {
        c.stale++;
        return;
      }
      if (e === undefined) {
        if (this.byId.size >= this.opts.maxContexts) this.reclaimIdle(now, true);
        if (this.byId.size >= this.opts.maxContexts) {
          c.contextLimit++;
          return;
        }
        e = this.create({ host: from.host, port: from.port }, h.srcCtx, now);
      } else if (e.ctx.peerId === 0) {
        e.ctx.peerId = h.srcCtx;
      } else if (e.ctx.peerId !== h.srcCtx) {
        // A new incarnation of the peer: what we had in flight to the old one is gone.
        c.peerRestarts++;
        this.retire(e.ctx.peerId);
        this.byId.delete(e.ctx.localId);
        e.ctx.restart(this.newLocalId(), h.srcCtx, 'fail', now);
        this.byId.set(e.ctx.localId, e);
        this.drainFailures(e, 'peer-reset');
      }
    }
    const seg = r.value.segOff;
    const payload = h.type === UdpType.Data ? buf.subarray(seg, r.value.segEnd) : null;
    const before = e.ctx.delivered.length;
    e.ctx.receive(h, payload, now);
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
    for (const e of this.byId.values()) e.ctx.tick(now);
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
      if (ctx.nextDeadline() <= now) ctx.tick(now);
      const tx = this.txScratch;
      tx.length = 0;
      if (ctx.flush(now, tx, burst)) more = true;
      for (let i = 0; i < tx.length; i++) this.emit(e, tx[i]);
      if (ctx.acked.length > 0) {
        for (const id of ctx.acked) this.acked.push(id);
        ctx.acked.length = 0;
      }
      if (ctx.state === 'failed') {
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

  // ---------------------------------------------------------------- internals

  private create(peer: PeerAddress, peerId: number, now: number): Entry {
    const ctx = new TransportContext(this.newLocalId(), now, this.opts.context, peerId);
    const e: Entry = { ctx, peer, key: addrKey(peer) };
    this.byId.set(ctx.localId, e);
    this.byAddr.set(e.key, e);
    this.counters.contextsCreated++;
    return e;
  }

  private drop(e: Entry): void {
    this.byId.delete(e.ctx.localId);
    if (this.byAddr.get(e.key) === e) this.byAddr.delete(e.key);
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

  /** Free a quiescent context when room is needed (oldest activity first). */
  private reclaimIdle(now: number, force: boolean): void {
    let victim: Entry | undefined;
    for (const e of this.byId.values()) {
      if (!e.ctx.quiescent) continue;
      if (!force && now - e.ctx.lastActivity < this.opts.idleMs) continue;
      if (victim === undefined || e.ctx.lastActivity < victim.ctx.lastActivity) victim = e;
    }
    if (victim !== undefined && now - victim.ctx.lastActivity >= Math.min(this.opts.idleMs, 1000)) {
      this.counters.contextsReclaimed++;
      this.drop(victim);
    }
  }

  private onReset(h: UdpHdr, now: number): void {
    const e = h.dstCtx !== 0 ? this.byId.get(h.dstCtx) : undefined;
    if (e === undefined) {
      this.counters.unknownContext++;
      return;
    }
    // The peer lost our context (reclaimed or restarted). Start a new stream and send again
    // whatever it has not acknowledged: it cannot have delivered anything we did not see acked
    // within the retry span, which idleMs exceeds.
    this.counters.resetsReceived++;
    this.byId.delete(e.ctx.localId);
    if (e.ctx.peerId !== 0) this.retire(e.ctx.peerId);
    e.ctx.restart(this.newLocalId(), 0, 'requeue', now);
    this.byId.set(e.ctx.localId, e);
  }

  private sendReset(to: PeerAddress, peerCtx: number, now: number): void {
    const own = this.byAddr.get(addrKey(to));
    const hdr: UdpHdr = {
      type: UdpType.Reset, ackReq: false, retx: false, window: 0, srcCtx: own?.ctx.localId ?? this.newLocalId(),
      dstCtx: peerCtx, psn: 0, ackPsn: 0, tsVal: Math.floor(now * 1000) >>> 0 || 1, tsEcr: 0, dstQpn: 0, srcQpn: 0, sack: [],
    };
    this.counters.resetsSent++;
    this.out.push(this.frame({ host: to.host, port: to.port }, hdr, null, 0));
  }

  private emit(e: Entry, d: TxDatagram): void {
    // Until the peer has learnt our id it finds us by source address: use the first socket.
    const path = this.opts.paths > 1 && d.hdr.dstCtx !== 0 ? this.rr++ % this.opts.paths : 0;
    this.out.push(this.frame(e.peer, d.hdr, d.payload, path));
  }

  private frame(to: PeerAddress, hdr: UdpHdr, payload: TxPayload | null, path: number): OutDatagram {
    const hlen = udpHeaderLength(hdr);
    const buf = new Uint8Array(hlen + UDP_TRAILER_LEN);
    encodeUdpHdr(hdr, buf, 0);
    const head = buf.subarray(0, hlen);
    const trailer = buf.subarray(hlen);
    this.counters.txDatagrams++;
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
