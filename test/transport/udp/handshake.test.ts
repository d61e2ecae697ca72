// The cookie handshake, restart proofs, RESETs and the limits, sans-I/O (issue #11): endpoints
// on a hand-cranked wire, an attacker that writes datagrams from any source address, no
// sockets, no clock but the one passed in. What must hold: a first contact costs one round
// trip and no state; nothing an off-path sender can forge (a restart claim, an echo, a RESET)
// changes a live context; answers to unvalidated sources are never bigger than what came;
// every table a sender can grow stops at its bound, with a counter.
import { describe, expect, it } from 'vitest';
import { UdpEndpoint, COOKIE_DATAGRAM_LEN, type EndpointOptions, type OutDatagram, type PeerAddress, type PollResult } from '../../../src/transport/udp/endpoint.js';
import { UdpIntegrity } from '../../../src/wire/spec.js';
import { UdpType, decodeUdpHdr, type UdpHdr } from '../../../src/wire/udp.js';
import { makePayload, payloadIndex, seededIds } from '../../sim/random.js';
import { seal, ZERO_COOKIE } from './raw-peer.js';

const A = { host: '10.0.0.1', port: 1 };
const B = { host: '10.0.0.2', port: 2 };
const C = { host: '10.0.0.3', port: 3 };

function bytes(d: OutDatagram): Uint8Array {
  return new Uint8Array(Buffer.concat(d.parts));
}

function hdrOf(b: Uint8Array): UdpHdr {
  const r = decodeUdpHdr(b, 0, b.length - 4);
  if (!r.ok) throw new Error(r.error);
  return r.value;
}

interface Node {
  addr: PeerAddress;
  ep: UdpEndpoint;
  delivered: number[];
  failed: string[];
  acked: number;
}

/** Endpoints joined by a lossless wire that the test cranks round by round. */
class Wire {
  readonly nodes: Node[] = [];
  /** Every datagram put on the wire, in order (after polls). */
  readonly log: { from: PeerAddress; to: PeerAddress; bytes: Uint8Array }[] = [];
  /** Return false to drop a datagram. */
  filter: (from: PeerAddress, to: PeerAddress, b: Uint8Array) => boolean = () => true;

  add(addr: PeerAddress, seed: number, opts: Partial<EndpointOptions> = {}): Node {
    const n: Node = { addr, ep: new UdpEndpoint({ mtu: 1472, randomId: seededIds(seed), ...opts }), delivered: [], failed: [], acked: 0 };
    this.nodes.push(n);
    return n;
  }

  private take(n: Node, r: PollResult): void {
    for (const d of r.delivered) {
      n.delivered.push(payloadIndex(d.payload));
      n.ep.release(d.ctx);
    }
    for (const f of r.failed) n.failed.push(f.reason);
    n.acked += r.acked.length;
  }

  /** Poll every node, deliver what they sent; returns the number of datagrams moved. */
  round(now: number): number {
    const sent: { from: PeerAddress; to: PeerAddress; bytes: Uint8Array }[] = [];
    for (const n of this.nodes) {
      const r = n.ep.poll(now);
      this.take(n, r);
      for (const d of r.datagrams) sent.push({ from: n.addr, to: d.to, bytes: bytes(d) });
    }
    for (const s of sent) {
      this.log.push(s);
      if (!this.filter(s.from, s.to, s.bytes)) continue;
      const to = this.nodes.find((n) => n.addr.host === s.to.host && n.addr.port === s.to.port);
      to?.ep.receive(s.bytes, s.from, now);
    }
    // Deliveries happen on receipt: collect them now (failures and acks come with the next poll).
    for (const n of this.nodes) {
      for (const d of n.ep.takeDelivered()) {
        n.delivered.push(payloadIndex(d.payload));
        n.ep.release(d.ctx);
      }
    }
    return sent.length;
  }

  /** Rounds until quiet (bounded); returns how many carried something. */
  settle(now: number, max = 50): number {
    let k = 0;
    while (k < max && this.round(now) > 0) k++;
    return k;
  }
}

const typeOf = (b: Uint8Array) => hdrOf(b).type;
const same = (x: PeerAddress, y: PeerAddress) => x.host === y.host && x.port === y.port;

describe('first contact: a cookie before any state', () => {
  it('costs one round trip: probe → COOKIE → echo; the receiver keeps nothing before the echo; only one DATA goes before the COOKIE', () => {
    const w = new Wire();
    const a = w.add(A, 1);
    const b = w.add(B, 2);
    for (let i = 0; i < 10; i++) a.ep.send(B, makePayload(i, 200), 0);
    // A → B: the probe only (one datagram in flight while nothing is known), carrying the zero cookie block.
    w.round(0);
    const probe = w.log.filter((l) => same(l.to, B));
    expect(probe.length).toBe(1);
    expect(hdrOf(probe[0]!.bytes)).toMatchObject({ type: UdpType.Data, dstCtx: 0, psn: 0, cookie: ZERO_COOKIE });
    expect(b.ep.contexts).toBe(0);
    expect(b.ep.counters.cookiesSent).toBe(1);
    // B → A: the COOKIE.
    w.round(0);
    expect(b.delivered).toEqual([]);
    const cookie = w.log.find((l) => same(l.to, A))!;
    expect(typeOf(cookie.bytes)).toBe(UdpType.Cookie);
    // Never bigger than what it answers.
    expect(cookie.bytes.length).toBe(COOKIE_DATAGRAM_LEN);
    expect(cookie.bytes.length).toBeLessThanOrEqual(probe[0]!.bytes.length);
    // A → B: everything goes, with the cookie and A's token; B creates the context and delivers
    // (one round trip later than without the handshake).
    w.round(0);
    expect(b.ep.contexts).toBe(1);
    expect(b.ep.counters.cookiesValidated).toBeGreaterThanOrEqual(1);
    expect(b.delivered.sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    w.settle(0);
    expect(a.acked).toBe(10);
    // B's answers carried its token until A named B's id; A's later datagrams carry neither block.
    a.ep.send(B, makePayload(10, 100), 0);
    const before = w.log.length;
    w.settle(0);
    const later = w.log.slice(before).map((l) => hdrOf(l.bytes));
    expect(later.every((h) => h.cookie === undefined && h.token === undefined && h.dstCtx !== 0)).toBe(true);
    expect(a.ep.context(B)!.peerId).toBe(b.ep.context(A)!.localId);
    expect(b.ep.context(A)!.peerId).toBe(a.ep.context(B)!.localId);
  });

  it('an ACK (or anything but DATA) from an unknown sender opens nothing and gets no answer', () => {
    const ep = new UdpEndpoint({ mtu: 1472 });
    ep.receive(seal({ type: UdpType.Ack, srcCtx: 5, sack: [{ start: 1, end: 0x8000_0000 }] }), A, 0);
    ep.receive(seal({ type: UdpType.Ack, srcCtx: 6, cookie: ZERO_COOKIE }), A, 0);
    expect(ep.counters.unvalidated).toBe(2);
    expect(ep.poll(0).datagrams).toEqual([]);
    expect(ep.contexts).toBe(0);
  });

  it('a first contact too short to out-size the COOKIE is not answered (no amplification)', () => {
    const ep = new UdpEndpoint({ mtu: 1472 });
    ep.receive(seal({ srcCtx: 5 }, Uint8Array.of(1, 2)), A, 0); // 42 bytes, no cookie block
    expect(ep.counters.amplificationRefused).toBe(1);
    expect(ep.poll(0).datagrams).toEqual([]);
    ep.receive(seal({ srcCtx: 5, cookie: ZERO_COOKIE }, Uint8Array.of(1, 2)), A, 0); // 54 bytes
    const out = ep.poll(0).datagrams.map(bytes);
    expect(out.length).toBe(1);
    expect(out[0]!.length).toBeLessThanOrEqual(54);
  });

  it('forged echoes open nothing: a bad mac, a cookie minted for another address or context, an expired one, an echo without the token', () => {
    const ep = new UdpEndpoint({ mtu: 1472, cookieLifetimeMs: 1000 });
    // A genuine cookie for the attacker's own address and context 7.
    ep.receive(seal({ srcCtx: 7, cookie: ZERO_COOKIE }), C, 0);
    const mine = hdrOf(bytes(ep.poll(0).datagrams[0]!)).cookie!;
    const token = new Uint8Array(8);
    const tries: [Partial<UdpHdr>, PeerAddress, number][] = [
      [{ srcCtx: 7, cookie: { time: mine.time, mac: mine.mac.map((x) => x ^ 1) }, token }, C, 10], // bad mac
      [{ srcCtx: 7, cookie: mine, token }, A, 10], // replayed from a spoofed address
      [{ srcCtx: 7, cookie: mine, token }, { ...C, port: 4 }, 10], // another port
      [{ srcCtx: 8, cookie: mine, token }, C, 10], // another context id
      [{ srcCtx: 7, cookie: mine, token }, C, 1200], // too old
      [{ srcCtx: 7, cookie: { time: mine.time + 5000, mac: mine.mac }, token }, C, 10], // from the future (and a bad mac)
    ];
    for (const [h, from, now] of tries) ep.receive(seal(h), from, now);
    expect(ep.counters.cookiesFailed).toBe(4);
    expect(ep.counters.cookiesExpired).toBe(2);
    expect(ep.counters.cookiesValidated).toBe(0);
    expect(ep.contexts).toBe(0);
    // The right echo without the token is refused too, and (this endpoint asks xxh3) without a
    // wish block (docs/integrity.md); with both, it opens the context.
    ep.receive(seal({ srcCtx: 7, cookie: mine }), C, 10);
    expect(ep.counters.unvalidated).toBe(1);
    ep.receive(seal({ srcCtx: 7, cookie: mine, token }), C, 10);
    expect(ep.counters.integrityRefused).toBe(1);
    expect(ep.contexts).toBe(0);
    ep.receive(seal({ srcCtx: 7, cookie: mine, token, integ: UdpIntegrity.Xxh3 }), C, 10);
    expect(ep.counters.cookiesValidated).toBe(1);
    expect(ep.contexts).toBe(1);
  });

  it('simultaneous open: both sides contact each other at once and end with one context each, every payload delivered once', () => {
    const w = new Wire();
    const a = w.add(A, 1);
    const b = w.add(B, 2);
    for (let i = 0; i < 5; i++) {
      a.ep.send(B, makePayload(i, 100), 0);
      b.ep.send(A, makePayload(100 + i, 100), 0);
    }
    w.settle(0);
    expect(b.delivered.sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4]);
    expect(a.delivered.sort((x, y) => x - y)).toEqual([100, 101, 102, 103, 104]);
    expect(a.acked + b.acked).toBe(10);
    expect(a.ep.contexts + b.ep.contexts).toBe(2);
    expect(a.ep.context(B)!.peerId).toBe(b.ep.context(A)!.localId);
    expect(b.ep.context(A)!.peerId).toBe(a.ep.context(B)!.localId);
    expect(a.failed.concat(b.failed)).toEqual([]);
  });

  it('a lost COOKIE or echo: the probe is retransmitted on its timer and the handshake completes', () => {
    const w = new Wire();
    const a = w.add(A, 1);
    const b = w.add(B, 2);
    let drops = 2; // the first COOKIE, then the first echo
    w.filter = (_f, _t, bts) => {
      const t = typeOf(bts);
      if (drops > 0 && (t === UdpType.Cookie || (t === UdpType.Data && hdrOf(bts).cookie?.time))) {
        drops--;
        return false;
      }
      return true;
    };
    a.ep.send(B, makePayload(1, 100), 0);
    let now = 0;
    for (let i = 0; i < 40 && b.delivered.length === 0; i++) {
      w.settle(now);
      now = Math.max(now + 1, a.ep.nextDeadline());
      a.ep.tick(now);
    }
    expect(b.delivered).toEqual([1]);
    expect(drops).toBe(0);
    expect(a.failed).toEqual([]);
  });
});

describe('restart claims and RESETs', () => {
  function established() {
    const w = new Wire();
    const a = w.add(A, 1);
    const b = w.add(B, 2);
    a.ep.send(B, makePayload(0, 100), 0);
    b.ep.send(A, makePayload(1, 100), 0);
    w.settle(0);
    expect(a.delivered).toEqual([1]);
    expect(b.delivered).toEqual([0]);
    return { w, a, b };
  }

  it('a forged restart claim (the peer\'s address, dstCtx 0, an invented srcCtx) fails nothing, changes no id; the real peer ignores the COOKIE', () => {
    const { w, a, b } = established();
    const ids = [a.ep.context(B)!.localId, a.ep.context(B)!.peerId];
    // Work in flight both ways when the forgery lands.
    a.ep.send(B, makePayload(2, 100), 1);
    b.ep.send(A, makePayload(3, 100), 1);
    const x = a.ep.poll(1);
    for (const d of b.ep.poll(1).datagrams) a.ep.receive(bytes(d), B, 1);
    for (let i = 0; i < 3; i++) b.ep.receive(seal({ srcCtx: 0xbad0 + i, dstCtx: 0, cookie: ZERO_COOKIE }), A, 1);
    for (let i = 0; i < 3; i++) b.ep.receive(seal({ srcCtx: 0xbad0 + i, dstCtx: 0, cookie: { time: 1, mac: new Uint8Array(8).fill(i) }, token: new Uint8Array(8) }), A, 1);
    expect(b.ep.counters.restartClaims).toBe(6);
    expect(b.ep.counters.cookiesFailed).toBe(3);
    expect(b.ep.counters.peerRestarts).toBe(0);
    expect([b.ep.context(A)!.peerId, b.ep.context(A)!.localId]).toEqual([ids[0], ids[1]]);
    for (const d of x.datagrams) b.ep.receive(bytes(d), A, 1);
    // The COOKIEs go to the real A, which has no such context: ignored, never answered.
    w.settle(1);
    expect(a.ep.counters.cookiesIgnored).toBe(6);
    expect(a.failed.concat(b.failed)).toEqual([]);
    expect(a.delivered).toEqual([1, 3]);
    expect(b.delivered).toEqual([0, 2]);
    expect([a.ep.context(B)!.localId, a.ep.context(B)!.peerId]).toEqual(ids);
  });

  it('RESETs: without both ids ignored; with both and the peer\'s token a fresh stream (nothing fails); with another token the peer restarted (outstanding fails)', () => {
    const { w, a, b } = established();
    const ctx = a.ep.context(B)!;
    a.ep.send(B, makePayload(4, 100), 1);
    a.ep.poll(1); // in flight, never delivered
    const reset = (h: Partial<UdpHdr>) => seal({ type: UdpType.Reset, ...h });
    a.ep.receive(reset({ srcCtx: 0x1234, dstCtx: ctx.localId, token: new Uint8Array(8) }), B, 1); // wrong echo of B's id
    a.ep.receive(reset({ srcCtx: ctx.peerId, dstCtx: 0x1234 }), B, 1); // wrong id of ours
    expect(a.ep.counters.resetsInvalid).toBe(1);
    expect(a.ep.counters.unknownContext).toBe(1);
    expect(a.failed).toEqual([]);
    // B drops its context (idle reclaim at its side): its RESET carries B's token → resend, nothing lost.
    const bIds = [b.ep.context(A)!.localId];
    b.ep.poll(40_000);
    expect(b.ep.contexts).toBe(0);
    w.settle(40_001);
    expect(a.ep.counters.resetsReceived).toBe(1);
    expect(b.delivered).toEqual([0, 4]);
    expect(a.failed).toEqual([]);
    expect(b.ep.context(A)!.localId).not.toBe(bIds[0]);
    // The same ids with another token: a new incarnation. In-flight work fails with peer-reset.
    const c2 = a.ep.context(B)!;
    a.ep.send(B, makePayload(5, 100), 40_002);
    a.ep.poll(40_002);
    a.ep.receive(reset({ srcCtx: c2.peerId, dstCtx: c2.localId, token: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8) }), B, 40_002);
    expect(a.ep.counters.peerRestarts).toBe(1);
    expect(a.ep.poll(40_002).failed.map((f) => f.reason)).toEqual(['peer-reset']);
  });

  it('a peer that restarted is detected at its first answer: a RESET it cannot sign (we sent first) or its proven cookie echo (it sent first)', () => {
    // B restarts (same address, new secret) while A has work in flight to it; A speaks first.
    let { w, a, b } = established();
    w.nodes.splice(w.nodes.indexOf(b), 1);
    b = w.add(B, 22);
    a.ep.send(B, makePayload(6, 100), 2);
    const rounds = w.settle(2);
    expect(a.failed).toEqual(['peer-reset']);
    expect(a.ep.counters.peerRestarts).toBe(1);
    expect(b.ep.counters.resetsSent).toBe(1);
    expect(rounds).toBeLessThanOrEqual(2);
    // The new B speaks first instead (A has work in flight to the old one): one cookie round trip, then A fails it.
    ({ w, a, b } = established());
    a.ep.send(B, makePayload(7, 100), 3);
    a.ep.poll(3); // lost with the old B
    w.nodes.splice(w.nodes.indexOf(b), 1);
    b = w.add(B, 33);
    b.ep.send(A, makePayload(8, 100), 3);
    w.round(3); // B → A: the probe; A owes a COOKIE, nothing fails
    expect(a.ep.counters.restartClaims).toBe(1);
    w.round(3); // A → B: the COOKIE
    expect(a.ep.counters.peerRestarts).toBe(0);
    w.round(3); // B → A: the echo: proven
    expect(a.ep.counters.peerRestarts).toBe(1);
    w.settle(3);
    expect(a.failed).toEqual(['peer-reset']);
    expect(a.delivered).toEqual([1, 8]);
  });
});

describe('limits', () => {
  it('RESETs for unknown contexts are rate-limited per host and per device; each is at most 3x its trigger', () => {
    const ep = new UdpEndpoint({ mtu: 1472, resetBurstPerHost: 20, resetRatePerHost: 50, resetBurst: 100, resetRate: 1000 });
    let sent = 0;
    let bytesIn = 0;
    let bytesOut = 0;
    // 10 000 datagrams for unknown contexts from one host over one virtual second.
    for (let i = 0; i < 10_000; i++) {
      const d = seal({ type: UdpType.Ack, srcCtx: i + 1, dstCtx: 0xdead0000 + i });
      bytesIn += d.length;
      ep.receive(d, { host: '10.6.6.6', port: 1000 + (i % 5000) }, i / 10);
      if (i % 500 === 0) for (const o of ep.poll(i / 10).datagrams) (sent++, (bytesOut += bytes(o).length));
    }
    for (const o of ep.poll(1000).datagrams) (sent++, (bytesOut += bytes(o).length));
    expect(ep.counters.unknownContext).toBe(10_000);
    // 20 saved up + 50/s for one second.
    expect(sent).toBeLessThanOrEqual(20 + 50 + 1);
    expect(sent).toBeGreaterThanOrEqual(20 + 49);
    expect(ep.counters.resetsSuppressed).toBe(10_000 - sent);
    expect(bytesOut).toBeLessThan(bytesIn / 50);
    // 200 hosts at once: the device bucket caps them all together.
    let other = 0;
    for (let h = 0; h < 200; h++) for (let k = 0; k < 5; k++) ep.receive(seal({ type: UdpType.Ack, srcCtx: 1, dstCtx: 77 }), { host: `10.7.0.${h}`, port: 9 }, 1000);
    other = ep.poll(1000).datagrams.length;
    expect(other).toBeLessThanOrEqual(100);
    expect(ep.stats().resetHosts).toBeLessThanOrEqual(201);
  });

  it('the per-host RESET buckets are bounded: the oldest host is forgotten past maxTrackedHosts', () => {
    const ep = new UdpEndpoint({ mtu: 1472, maxTrackedHosts: 64 });
    for (let h = 0; h < 1000; h++) ep.receive(seal({ type: UdpType.Ack, srcCtx: 1, dstCtx: 77 }), { host: `10.${h >> 8}.${h & 255}.1`, port: 9 }, h);
    expect(ep.stats().resetHosts).toBe(64);
  });

  it('one host completing handshakes from many ports gets at most maxContextsPerHost contexts; another host still gets one; idle ones make room after the guard', () => {
    const ep = new UdpEndpoint({ mtu: 1472, maxContextsPerHost: 8, maxContexts: 16 });
    const token = new Uint8Array(8);
    const open = (from: PeerAddress, id: number, now: number) => {
      ep.receive(seal({ srcCtx: id, cookie: ZERO_COOKIE }), from, now);
      const cookie = hdrOf(bytes(ep.poll(now).datagrams.find((d) => d.to.port === from.port && d.to.host === from.host)!)).cookie!;
      ep.receive(seal({ srcCtx: id, cookie, token, integ: UdpIntegrity.Xxh3 }), from, now);
      for (const d of ep.poll(now).delivered) ep.release(d.ctx);
    };
    for (let i = 0; i < 50; i++) open({ host: '10.5.5.5', port: 2000 + i }, 100 + i, 0);
    expect(ep.contexts).toBe(8);
    expect(ep.counters.hostLimit).toBe(42);
    expect(ep.stats().hostsWithContexts).toBe(1);
    // Another host is not locked out.
    open({ host: '10.5.5.6', port: 1 }, 999, 0);
    expect(ep.contexts).toBe(9);
    // More hosts fill the device; past it, refusals are counted.
    for (let h = 0; h < 10; h++) open({ host: `10.4.0.${h}`, port: 1 }, 500 + h, 0);
    expect(ep.contexts).toBe(16);
    expect(ep.counters.contextLimit).toBe(3);
    // After a second of quiet, a newcomer takes the place of the context idle longest.
    ep.poll(500);
    open({ host: '10.3.0.1', port: 1 }, 777, 1500);
    expect(ep.contexts).toBe(16);
    expect(ep.counters.contextsReclaimed).toBe(1);
  });

  it('a peer that never answers: at most maxSendQueue payloads wait for it, then send() refuses (QueueFull)', () => {
    const ep = new UdpEndpoint({ mtu: 1472, context: { maxSendQueue: 100, maxWindow: 64, initialPeerWindow: 64, initialCwnd: 64 } });
    let refused = 0;
    for (let i = 0; i < 500; i++) {
      try {
        ep.send(B, makePayload(i, 20), 0);
      } catch (e) {
        expect((e as { code: string }).code).toBe('ERR_QUEUE_FULL');
        refused++;
      }
    }
    expect(refused).toBe(400);
    expect(ep.context(B)!.outstanding).toBe(100);
  });

  it('retired peer ids (kept so an old incarnation\'s strays count as stale) stop at maxRetiredIds through any number of proven restarts', () => {
    const ep = new UdpEndpoint({ mtu: 1472, maxRetiredIds: 16 });
    const token = new Uint8Array(8);
    for (let i = 0; i < 100; i++) {
      // A new incarnation at the same address each time, proven by its cookie echo.
      ep.receive(seal({ srcCtx: 1000 + i, cookie: ZERO_COOKIE }), A, i);
      const cookie = hdrOf(bytes(ep.poll(i).datagrams[0]!)).cookie!;
      ep.receive(seal({ srcCtx: 1000 + i, cookie, token, integ: UdpIntegrity.Xxh3 }), A, i);
      for (const d of ep.poll(i).delivered) ep.release(d.ctx);
    }
    expect(ep.counters.peerRestarts).toBe(99);
    expect(ep.contexts).toBe(1);
    expect(ep.stats().retiredIds).toBe(16);
    // The latest retired ids still count as stale.
    ep.receive(seal({ srcCtx: 1098, cookie: ZERO_COOKIE }), A, 200);
    expect(ep.counters.stale).toBe(1);
  });

  it('a flood of 60 000 first contacts, forged echoes, stray datagrams and RESETs from 60 000 addresses leaves no state behind but bounded RESET buckets', () => {
    const ep = new UdpEndpoint({ mtu: 1472 });
    const live = new UdpEndpoint({ mtu: 1472 });
    let now = 0;
    for (let i = 0; i < 60_000; i++) {
      const from = { host: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, port: 1 + (i % 50_000) };
      if (i % 4 === 0) ep.receive(seal({ srcCtx: i + 1, cookie: ZERO_COOKIE }), from, now);
      else if (i % 4 === 1) ep.receive(seal({ srcCtx: i + 1, cookie: { time: 5, mac: new Uint8Array(8) }, token: new Uint8Array(8) }), from, now);
      else if (i % 4 === 2) ep.receive(seal({ type: UdpType.Ack, srcCtx: i + 1, dstCtx: i }), from, now);
      else ep.receive(seal({ type: UdpType.Reset, srcCtx: i + 1, dstCtx: i }), from, now);
      if (i % 1000 === 999) {
        ep.poll(now);
        now += 1;
      }
    }
    const s = ep.stats();
    expect(s.contexts).toBe(0);
    expect(s.hostsWithContexts).toBe(0);
    expect(s.retiredIds).toBe(0);
    expect(s.resetHosts).toBeLessThanOrEqual(4096);
    expect(s.cookiesSent).toBe(30_000);
    expect(s.resetsSent).toBeLessThanOrEqual(100 + 1000 * (now / 1000) + 1);
    // A genuine peer still gets in.
    live.send(B, makePayload(1, 50), now);
    let got = 0;
    for (let r = 0; r < 6; r++) {
      for (const d of live.poll(now).datagrams) ep.receive(bytes(d), A, now);
      const o = ep.poll(now);
      got += o.delivered.length;
      for (const d of o.datagrams) if (same(d.to, A)) live.receive(bytes(d), B, now);
    }
    expect(got).toBe(1);
    expect(ep.contexts).toBe(1);
  });
});
