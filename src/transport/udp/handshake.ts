// The endpoint's handshake (./endpoint.ts): what lets a peer have a transport context, and
// what ends or renews one. Nothing a datagram says is trusted with state or work before it is
// proven (the threat model is docs/resource-bounds.md's). An off-path attacker can send
// anything from any source address but sees nothing sent to others, so:
// - A first contact gets a COOKIE and nothing else: no context, no delivery, no memory (as
//   SYN cookies, QUIC's Retry, SCTP's INIT-ACK). A context is created only when the
//   initiator echoes the cookie — it can receive at the address it claims. The COOKIE is
//   never longer than the datagram it answers (a first contact carries a zero cookie block
//   as padding), so answering spoofed sources amplifies nothing.
// - A new context id from a known address ("the peer restarted") is such a first contact:
//   the live context is failed only when the new incarnation echoes its cookie.
// - The first answer to a context we opened must name our id and bring the peer's reset token.
// - A RESET must echo both ids; one that also carries the peer's reset token (HMAC of its
//   device secret and its context id, learnt at setup, as QUIC's stateless reset token) says
//   the peer dropped our context but is the same device: we start a fresh stream and resend
//   what it did not ack. Without the token the peer is a new incarnation (its secret changed):
//   what we had in flight to it is failed.
// - RESETs answer datagrams for contexts we do not have: rate-limited per device and per
//   destination host, never for a RESET or COOKIE, at most 3x the datagram that caused them.
// The integrity mode is settled here too, from both sides' wishes (./integrity.ts).
import { hostKey } from '../../core/address.js';
import { UDP_COOKIE, UDP_TOKEN, UdpIntegrity } from '../../wire/spec.js';
import { UdpType, UDP_HDR_LEN, UDP_TRAILER_LEN, type UdpHdr } from '../../wire/udp.js';
import { tsNow, type FailReason } from './context-options.js';
import type { ContextTable, Entry } from './contexts.js';
import { type DeviceSecret, ZERO_COOKIE, sameMac } from './cookie.js';
import type { EndpointCounters, EndpointOptions, OutDatagram, PeerAddress } from './endpoint-types.js';
import type { DatagramFramer } from './framing.js';
import { settleIntegrity } from './integrity.js';
import { HostBuckets, TokenBucket } from './rate-limit.js';

export const COOKIE_DATAGRAM_LEN = UDP_HDR_LEN + UDP_COOKIE.size + UDP_TRAILER_LEN;
export const RESET_DATAGRAM_LEN = UDP_HDR_LEN + UDP_TOKEN.size + UDP_TRAILER_LEN;
/** QUIC's anti-amplification factor (RFC 9000 §8): never answer with more than 3x what came. */
const AMPLIFICATION = 3;

export class Handshake {
  private readonly deviceResets: TokenBucket;
  private readonly hostResets: HostBuckets;

  constructor(
    private readonly opts: EndpointOptions,
    private readonly counters: EndpointCounters,
    private readonly table: ContextTable,
    /** Makes our cookies and reset tokens (the context table makes its tokens with it too). */
    private readonly secret: DeviceSecret,
    private readonly framer: DatagramFramer,
    /** Our integrity wish, as a UdpIntegrity code. */
    private readonly integrity: number,
    /** Report what a context had outstanding as failed (a peer restart). */
    private readonly drainFailures: (e: Entry, reason: FailReason) => void,
  ) {
    this.deviceResets = new TokenBucket(opts.resetRate, opts.resetBurst);
    this.hostResets = new HostBuckets(opts.resetRatePerHost, opts.resetBurstPerHost, opts.maxTrackedHosts);
  }

  /** Destination hosts with a RESET rate bucket (a peer-growable table). */
  get resetHosts(): number {
    return this.hostResets.size;
  }

  /**
   * A datagram without our id (dstCtx 0) from a source we have no context with under its id
   * (`e`: what we have at its address): a first contact or a restart claim. Only DATA with a
   * valid cookie of ours and the peer's token gets a context (returned); anything else is
   * counted, and a DATA without a cookie is answered with one (pushed to `out`).
   */
  firstContact(e: Entry | undefined, from: PeerAddress, h: UdpHdr, triggerLen: number, now: number, out: OutDatagram[]): Entry | undefined {
    const c = this.counters;
    if (this.table.retired.has(h.srcCtx)) {
      c.stale++;
      return undefined;
    }
    if (h.type !== UdpType.Data) {
      c.unvalidated++;
      return undefined;
    }
    const k = h.cookie === undefined ? 'none' : this.secret.checkCookie(h.cookie, from.host, from.port, h.srcCtx, now, this.opts.cookieLifetimeMs);
    if (k !== 'ok') {
      if (k === 'bad') c.cookiesFailed++;
      else if (k === 'expired') c.cookiesExpired++;
      if (e !== undefined && e.ctx.peerId !== 0) c.restartClaims++;
      this.sendCookie(from, h, triggerLen, now, out);
      return undefined;
    }
    if (h.token === undefined) {
      c.unvalidated++;
      return undefined;
    }
    const integ = settleIntegrity(this.integrity, h.integ, c);
    if (integ === undefined) return undefined;
    c.cookiesValidated++;
    return this.admit(e, from, h, h.token, now, integ);
  }

  /**
   * The first answer from a context the peer keeps for us (`e` has no peer id yet): it names
   * our id (only someone who saw our datagrams knows it) and brings its reset token. `kind`:
   * its trailer, which must say what both wishes settle. False: refused (counted).
   */
  firstAnswer(e: Entry, h: UdpHdr, kind: number, now: number): boolean {
    if (h.token === undefined) {
      this.counters.unvalidated++;
      return false;
    }
    const settled = settleIntegrity(this.integrity, h.integ, this.counters, kind);
    if (settled === undefined) return false;
    this.establish(e, h.srcCtx, h.token, now, h.tsEcr, settled);
    return true;
  }

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

  onCookie(h: UdpHdr, now: number): void {
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

  onReset(h: UdpHdr, now: number): void {
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
  private sendCookie(to: PeerAddress, h: UdpHdr, triggerLen: number, now: number, out: OutDatagram[]): void {
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
    out.push(this.framer.frame({ host: to.host, port: to.port }, hdr, null, 0, UdpIntegrity.Crc32c));
  }

  /**
   * Tell the sender we lost the context it names: at most 3x the trigger, and rate-limited —
   * unless `owed`: a context we dropped, named from its peer's address (ContextTable.owesReset).
   */
  sendReset(to: PeerAddress, h: UdpHdr, triggerLen: number, now: number, out: OutDatagram[], owed = false): void {
    if (RESET_DATAGRAM_LEN > AMPLIFICATION * triggerLen) {
      this.counters.amplificationRefused++;
      return;
    }
    if (owed) this.counters.resetsOwed++;
    // Per destination host as the context caps count hosts (core/address hostKey): a flood
    // spoofed from addresses of one IPv6 /64 draws one host's RESETs, not the device's rate.
    else if (!this.hostResets.take(hostKey(to.host), now)) {
      this.counters.resetsSuppressed++;
      return;
    } else if (!this.deviceResets.take(now)) {
      this.counters.resetsSuppressed++;
      return;
    }
    const hdr: UdpHdr = {
      type: UdpType.Reset, ackReq: false, retx: false, window: 0, srcCtx: h.dstCtx, dstCtx: h.srcCtx, psn: 0, ackPsn: 0,
      tsVal: tsNow(now), tsEcr: h.tsVal, dstQpn: 0, srcQpn: 0, sack: [], token: this.secret.token(h.dstCtx),
    };
    this.counters.resetsSent++;
    out.push(this.framer.frame({ host: to.host, port: to.port }, hdr, null, 0, UdpIntegrity.Crc32c));
  }

  /**
   * What a context's header carries of the handshake. First contact: the cookie block — zeros
   * until the peer gave us a cookie, so that the COOKIE answering this datagram is never longer
   * than it — and, with a cookie, our token; later, our token until the peer names our id.
   * The handshake datagrams (those with our cookie echo or token) carry our integrity wish.
   */
  decorate(e: Entry, h: UdpHdr): void {
    if (h.dstCtx === 0) {
      h.cookie = e.cookie ?? ZERO_COOKIE;
      if (e.cookie !== undefined) h.token = e.token;
    } else if (!e.peerKnowsUs) {
      h.token = e.token;
    }
    if (h.dstCtx === 0 || h.token !== undefined) h.integ = this.integrity;
  }
}
