// The keepalive of an idle transport context, sans-I/O (issue #16 item 3: a service learns that
// a peer died without posting). Two endpoints on a hand-cranked wire and a clock the test
// moves. What must hold: an idle peer that is alive is probed and answers (one ACK for one
// ACK, the same size); one that stopped answering fails the context ('peer-lost', id 0)
// within keepaliveMs × 2.5; nothing is probed while the owner does not keep the peer; a probe
// is answered only inside an established context (no reflector), and datagrams an off-path
// sender forges can neither keep a dead peer up nor make a live one fail.
import { describe, expect, it } from 'vitest';
import { UdpEndpoint, type EndpointOptions, type PeerAddress } from '../../../src/transport/udp/endpoint.js';
import { UdpType, decodeUdpHdr } from '../../../src/wire/udp.js';
import { makePayload, seededIds } from '../../sim/random.js';
import { seal } from './raw-peer.js';

const A = { host: '10.0.0.1', port: 1 };
const B = { host: '10.0.0.2', port: 2 };
const X = { host: '10.0.0.9', port: 9 };
const KA = 1000;
const STEP = 10;

interface Sent { from: PeerAddress; to: PeerAddress; bytes: Uint8Array }

class Wire {
  readonly a: UdpEndpoint;
  readonly b: UdpEndpoint;
  failedA: { id: number; reason: string }[] = [];
  log: Sent[] = [];
  /** Datagrams from B reach A (false: B was killed). */
  bAlive = true;
  /** B's event loop is stalled: what it sends leaves only when it resumes (held here). */
  bStalled = false;
  held: Sent[] = [];
  keepA = true;
  keepB = true;

  constructor(opts: Partial<EndpointOptions> = {}) {
    const base = { mtu: 1472, integrity: 'crc32c' as const, context: { keepaliveMs: KA }, ...opts };
    this.a = new UdpEndpoint({ ...base, randomId: seededIds(1), keepPeer: () => this.keepA });
    this.b = new UdpEndpoint({ ...base, randomId: seededIds(2), keepPeer: () => this.keepB });
  }

  /** One poll of each endpoint at `now`; what they sent is delivered at once. */
  round(now: number): Sent[] {
    const sent: Sent[] = [];
    for (const [ep, from] of [[this.a, A], [this.b, B]] as const) {
      ep.tick(now);
      const r = ep.poll(now);
      if (ep === this.a) for (const f of r.failed) this.failedA.push({ id: f.id, reason: f.reason });
      for (const d of r.delivered) ep.release(d.ctx);
      for (const d of r.datagrams) sent.push({ from, to: d.to, bytes: new Uint8Array(Buffer.concat(d.parts)) });
    }
    if (!this.bStalled && this.held.length > 0) sent.unshift(...this.held.splice(0));
    for (const s of sent) {
      this.log.push(s);
      if (s.from === B && !this.bAlive) continue;
      if (s.from === B && this.bStalled) {
        this.held.push(s);
        continue;
      }
      (s.to.port === A.port ? this.a : this.b).receive(s.bytes, s.from, now);
    }
    for (const ep of [this.a, this.b]) for (const d of ep.takeDelivered()) ep.release(d.ctx);
    return sent;
  }

  /** A sends B one payload and everything settles (handshake, ACKs). */
  connect(now: number): number {
    this.a.send(B, makePayload(1, 100), now, 1, 1);
    for (let i = 0; i < 20; i++) this.round((now += STEP));
    expect(this.a.context(B)?.peerId).not.toBe(0);
    expect(this.a.context(B)?.outstanding).toBe(0);
    return now;
  }

  /** Run the clock from `now` for `ms`, a round every STEP. */
  run(now: number, ms: number, until?: () => boolean): number {
    const end = now + ms;
    while (now < end && !(until?.() ?? false)) this.round((now += STEP));
    return now;
  }
}

function hdr(b: Uint8Array) {
  const r = decodeUdpHdr(b, 0, b.length - 4);
  if (!r.ok) throw new Error(r.error);
  return r.value;
}

describe('udp keepalive (sans-I/O)', () => {
  it('an idle live peer is probed and answers: one ACK for one ACK, the same size; nothing fails', () => {
    const w = new Wire();
    let now = w.connect(0);
    w.log = [];
    now = w.run(now, 10 * KA);
    expect(w.failedA).toEqual([]);
    const a = w.a.stats();
    const b = w.b.stats();
    const probes = a.keepalives + b.keepalives;
    // About one probe a second between them (each side's probe also tells it the peer is alive).
    expect(probes).toBeGreaterThanOrEqual(8);
    expect(probes).toBeLessThanOrEqual(22);
    expect(a.keepaliveAnswers + b.keepaliveAnswers).toBe(probes);
    // Nothing but probes and their answers crossed: bare ACKs (header + CRC32C, 40 bytes) once
    // each side has seen the other name it; before that one may still carry the handshake's
    // token and integrity blocks (52 bytes).
    expect(w.log.length).toBe(2 * probes);
    expect(w.log.every((s) => hdr(s.bytes).type === UdpType.Ack)).toBe(true);
    expect(Math.max(...w.log.map((s) => s.bytes.length))).toBeLessThanOrEqual(52);
    expect(w.log.slice(4).every((s) => s.bytes.length === 40)).toBe(true);
  });

  it('a peer that stops answering fails the context (peer-lost, id 0) within keepaliveMs × 2.5', () => {
    const w = new Wire();
    let now = w.connect(0);
    now = w.run(now, 2500);
    const killed = now;
    w.bAlive = false;
    now = w.run(now, 5 * KA, () => w.failedA.length > 0);
    expect(w.failedA).toEqual([{ id: 0, reason: 'peer-lost' }]);
    expect(now - killed).toBeLessThanOrEqual(2.5 * KA + 2 * STEP);
    expect(now - killed).toBeGreaterThanOrEqual(1.5 * KA - STEP);
    expect(w.a.context(B)).toBeUndefined();
    expect(w.a.stats().contextsFailed).toBe(1);
  });

  it('a peer that stops answering for less than 1.5 × keepaliveMs (a stalled event loop) is not taken for dead', () => {
    const w = new Wire();
    let now = w.connect(0);
    now = w.run(now, 2500);
    // B stalls for 1.4 s (its answers leave when it resumes), starting at the worst moment: A
    // last heard it a keepalive interval ago, so A's probes go at once and the stall covers all three.
    const ctx = w.a.context(B)!;
    now = w.run(now, 2 * KA, () => ctx.keepaliveDeadline() - now <= STEP);
    const k0 = w.a.stats().keepalives;
    w.bStalled = true;
    now = w.run(now, 1400);
    expect(w.a.stats().keepalives - k0).toBe(3);
    w.bStalled = false;
    now = w.run(now, 3000);
    expect(w.failedA).toEqual([]);
    expect(w.a.context(B)).toBeDefined();
  });

  it('nothing is probed while the owner does not keep the peer (no connected QPs)', () => {
    const w = new Wire();
    w.keepA = false;
    w.keepB = false;
    let now = w.connect(0);
    w.log = [];
    w.bAlive = false;
    now = w.run(now, 10 * KA);
    expect(w.log).toEqual([]);
    expect(w.failedA).toEqual([]);
    expect(w.a.stats().keepalives).toBe(0);
  });

  it('keepaliveMs 0 turns it off', () => {
    const w = new Wire({ context: { keepaliveMs: 0 } });
    let now = w.connect(0);
    w.log = [];
    w.bAlive = false;
    now = w.run(now, 10 * KA);
    expect(w.log).toEqual([]);
    expect(w.failedA).toEqual([]);
  });

  it('a probe outside an established context gets no answer (no reflector)', () => {
    const w = new Wire();
    let now = w.connect(0);
    const ctx = w.a.context(B)!;
    const before = w.a.stats();
    // From an address that has no context, naming none or naming A's; from B's address with a
    // wrong peer id; from B with the right ids but an ack beyond what A sent.
    const forged = [
      { from: X, h: { type: UdpType.Ack, ackReq: true, srcCtx: 0x1234, dstCtx: 0 } },
      { from: X, h: { type: UdpType.Ack, ackReq: true, srcCtx: 0x1234, dstCtx: ctx.localId } },
      { from: B, h: { type: UdpType.Ack, ackReq: true, srcCtx: (ctx.peerId ^ 1) >>> 0, dstCtx: ctx.localId } },
      { from: B, h: { type: UdpType.Ack, ackReq: true, srcCtx: ctx.peerId, dstCtx: ctx.localId, ackPsn: 0x4000_0000 } },
    ];
    for (const f of forged) w.a.receive(seal(f.h), f.from, (now += 1));
    const r = w.a.poll(now);
    expect(r.datagrams).toEqual([]);
    const after = w.a.stats();
    expect(after.keepaliveAnswers).toBe(before.keepaliveAnswers);
    expect(after.unvalidated + after.stale + after.badAck - before.unvalidated - before.stale - before.badAck).toBe(forged.length);
  });

  it('forged datagrams do not hold a dead peer up, nor tear a live one down', () => {
    // Dead peer: an off-path sender spoofing B's address with guessed ids every 50 ms.
    const w = new Wire();
    let now = w.connect(0);
    const ctx = w.a.context(B)!;
    w.bAlive = false;
    const killed = now;
    let guess = 1;
    while (now - killed < 5 * KA && w.failedA.length === 0) {
      w.round((now += STEP));
      if (now % 50 === 0) {
        w.a.receive(seal({ type: UdpType.Ack, srcCtx: guess++, dstCtx: ctx.localId, window: 64 }), B, now);
        w.a.receive(seal({ type: UdpType.Ack, srcCtx: ctx.peerId, dstCtx: guess++, window: 64 }), B, now);
      }
    }
    expect(w.failedA).toEqual([{ id: 0, reason: 'peer-lost' }]);
    expect(now - killed).toBeLessThanOrEqual(2.5 * KA + 2 * STEP);

    // Live peer: the same flood changes nothing (probes still answered, no failure).
    const v = new Wire();
    now = v.connect(0);
    const vc = v.a.context(B)!;
    const start = now;
    while (now - start < 5 * KA) {
      v.round((now += STEP));
      if (now % 50 === 0) v.a.receive(seal({ type: UdpType.Reset, srcCtx: guess++, dstCtx: vc.localId }), B, now);
    }
    expect(v.failedA).toEqual([]);
    expect(v.a.context(B)).toBe(vc);
  });
});
