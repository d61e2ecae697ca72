// Integrity downgrade on the path (docs/integrity.md, "What a relay can do to the wishes"): the
// udpInteg block rides in the clear, and a relay on the path can rewrite or strip it and re-seal
// the datagram. What must hold: no side ever settles weaker than its own wish. Lowering a wish
// leaves each side on at least its own (the stronger one wins); stripping the block — which an
// xxh3 device cannot tell from a peer older than the block — is refused and counted
// (integrityRefused), so two devices that asked xxh3 never end up on crc32c without a trace.
// Devices asking crc32c or none still serve a peer without the block (it speaks crc32c).
import dgram from 'node:dgram';
import { crc32c as nodeCrc32c } from '@node-rs/crc32';
import { xxh3 } from '@node-rs/xxhash';
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { UdpEndpoint, type OutDatagram } from '../../../src/transport/udp/endpoint.js';
import { UdpLink } from '../../../src/transport/udp/link.js';
import { Device } from '../../../src/verbs/device.js';
import { UDP_COOKIE, UDP_HDR, UDP_INTEG, UDP_TOKEN, UDP_TRAILER_LENS, UdpFlag, UdpIntegrity } from '../../../src/wire/spec.js';
import { udpTrailerKind } from '../../../src/wire/udp.js';
import { seededIds } from '../../sim/random.js';

type Mode = 'crc32c' | 'xxh3' | 'none';
const A = { host: '10.0.0.1', port: 1 };
const B = { host: '10.0.0.2', port: 2 };

/** The trailer of `body` (flags already name `kind`) appended, as a relay on the path re-seals. */
function reseal(body: Uint8Array, kind: number): Uint8Array {
  const out = Buffer.alloc(body.length + UDP_TRAILER_LENS[kind]!);
  out.set(body);
  if (kind === UdpIntegrity.Crc32c) out.writeUInt32LE(nodeCrc32c(Buffer.from(body)), body.length);
  if (kind === UdpIntegrity.Xxh3) out.writeBigUInt64LE(xxh3.xxh64(Buffer.from(body)), body.length);
  return new Uint8Array(out);
}

/** Where the udpInteg block of `d` starts, or -1 when it carries none. */
function wishAt(d: Uint8Array): number {
  const f = d[UDP_HDR.fields.flags.offset]!;
  if (!(f & UdpFlag.Integ)) return -1;
  return UDP_HDR.size + (f & UdpFlag.Cookie ? UDP_COOKIE.size : 0) + (f & UdpFlag.Token ? UDP_TOKEN.size : 0);
}

/** `d` without its udpInteg block (flag cleared, trailer of the same kind recomputed). */
export function stripWish(d: Uint8Array): Uint8Array {
  const at = wishAt(d);
  if (at < 0) return d;
  const kind = udpTrailerKind(d);
  const body = new Uint8Array(d.length - UDP_TRAILER_LENS[kind]! - UDP_INTEG.size);
  body.set(d.subarray(0, at));
  body.set(d.subarray(at + UDP_INTEG.size, d.length - UDP_TRAILER_LENS[kind]!), at);
  body[UDP_HDR.fields.flags.offset]! &= ~UdpFlag.Integ;
  return reseal(body, kind);
}

/** `d` with its wish replaced by `code` (re-sealed). */
function rewriteWish(d: Uint8Array, code: number): Uint8Array {
  const at = wishAt(d);
  if (at < 0) return d;
  const kind = udpTrailerKind(d);
  const body = d.slice(0, d.length - UDP_TRAILER_LENS[kind]!);
  body[at + UDP_INTEG.fields.wish.offset] = code;
  return reseal(body, kind);
}

const bytes = (d: OutDatagram) => new Uint8Array(Buffer.concat(d.parts));
const payload = (k: number) => new Uint8Array(2000).map((_, i) => (i * 7 + k) & 0xff);
type Path = (d: Uint8Array) => Uint8Array;
const keep: Path = (d) => d;

/** Two sans-I/O endpoints through a path that may rewrite each direction. */
function pair(wa: Mode, wb: Mode, toB: Path, toA: Path) {
  const context = { retryLimit: 3, retryTimeoutMs: 0, maxRtoMs: 200 };
  const a = new UdpEndpoint({ mtu: 9000, integrity: wa, randomId: seededIds(21), context });
  const b = new UdpEndpoint({ mtu: 9000, integrity: wb, randomId: seededIds(22), context });
  const got: number[] = [];
  const failed: string[] = [];
  let acked = 0;
  const run = (t0: number, rounds: number) => {
    for (let i = 0; i < rounds; i++) {
      const now = t0 + i * 20;
      const ra = a.poll(now);
      const rb = b.poll(now);
      for (const d of ra.datagrams) b.receive(toB(bytes(d)), A, now);
      for (const d of rb.datagrams) a.receive(toA(bytes(d)), B, now);
      for (const d of rb.delivered) {
        got.push(d.payload[0]!);
        b.release(d.ctx);
      }
      for (const f of ra.failed) failed.push(f.reason);
      acked += ra.acked.length;
      a.tick(now);
      b.tick(now);
    }
  };
  return { a, b, got, failed, run, acked: () => acked };
}

describe('udp integrity wishes through a rewriting path (sans-I/O)', () => {
  it('both ask xxh3, the path strips the wish block both ways: neither settles crc32c; refused, counted, the payload fails', () => {
    const p = pair('xxh3', 'xxh3', stripWish, stripWish);
    for (let k = 0; k < 3; k++) p.a.send(B, payload(k), 0);
    p.run(0, 400);
    expect(p.a.integrityOf(B)).not.toBe('crc32c');
    expect(p.b.integrityOf(A)).not.toBe('crc32c');
    expect(p.a.stats().contextsCrc32c + p.b.stats().contextsCrc32c).toBe(0);
    expect(p.b.stats().integrityRefused).toBeGreaterThan(0);
    expect(p.got).toEqual([]);
    // The initiator learns it the way it learns any unanswered handshake: its retry limit.
    expect(p.failed).toEqual(['retry-exceeded', 'retry-exceeded', 'retry-exceeded']);
  });

  it('stripped only toward the initiator: the responder settled xxh3, the initiator refuses the bare answer', () => {
    const p = pair('xxh3', 'xxh3', keep, stripWish);
    p.a.send(B, payload(1), 0);
    p.run(0, 400);
    expect(p.b.integrityOf(A)).toBe('xxh3');
    expect(p.a.integrityOf(B)).toBeUndefined();
    expect(p.a.stats().integrityRefused).toBeGreaterThan(0);
    expect(p.a.stats().contextsCrc32c + p.b.stats().contextsCrc32c).toBe(0);
    expect(p.acked()).toBe(0);
  });

  it('stripped only toward the responder: it refuses the cookie echo, opens no context', () => {
    const p = pair('xxh3', 'xxh3', stripWish, keep);
    p.a.send(B, payload(1), 0);
    p.run(0, 100);
    expect(p.b.stats().integrityRefused).toBeGreaterThan(0);
    expect(p.b.stats().cookiesValidated).toBe(0);
    expect(p.b.integrityOf(A)).toBeUndefined();
    expect(p.got).toEqual([]);
  });

  for (const code of [UdpIntegrity.None, UdpIntegrity.Crc32c]) {
    const name = code === UdpIntegrity.None ? 'none' : 'crc32c';
    it(`both ask xxh3, the path rewrites every wish to '${name}': both still settle xxh3 (the stronger wish wins)`, () => {
      const p = pair('xxh3', 'xxh3', (d) => rewriteWish(d, code), (d) => rewriteWish(d, code));
      for (let k = 0; k < 3; k++) p.a.send(B, payload(k), 0);
      p.run(0, 100);
      expect(p.a.integrityOf(B)).toBe('xxh3');
      expect(p.b.integrityOf(A)).toBe('xxh3');
      expect(p.got).toEqual([0, 1, 2]);
      expect(p.a.stats().integrityRefused + p.b.stats().integrityRefused).toBe(0);
    });
  }

  it("A asks xxh3, B crc32c, the path lowers A's wish to crc32c: B settles crc32c, A refuses its trailers (badIntegrity), nothing silently weaker", () => {
    const p = pair('xxh3', 'crc32c', (d) => rewriteWish(d, UdpIntegrity.Crc32c), keep);
    p.a.send(B, payload(1), 0);
    p.run(0, 400);
    expect(p.a.integrityOf(B)).toBeUndefined();
    expect(p.a.stats().badIntegrity).toBeGreaterThan(0);
    expect(p.acked()).toBe(0);
    expect(p.failed).toEqual(['retry-exceeded']);
  });

  // A peer older than the block (its handshake carries none) speaks crc32c only: served by the
  // devices whose wish crc32c does not weaken.
  for (const [wa, wb] of [['crc32c', 'crc32c'], ['none', 'crc32c'], ['crc32c', 'none'], ['none', 'none']] as const) {
    it(`no wish block either way, devices asking ${wa} and ${wb}: both settle crc32c, data flows`, () => {
      const p = pair(wa, wb, stripWish, stripWish);
      for (let k = 0; k < 3; k++) p.a.send(B, payload(k), 0);
      p.run(0, 100);
      expect(p.a.integrityOf(B)).toBe('crc32c');
      expect(p.b.integrityOf(A)).toBe('crc32c');
      expect(p.got).toEqual([0, 1, 2]);
      expect(p.acked()).toBe(3);
    });
  }
});

/** A udp proxy on 127.0.0.1 for one client that passes every datagram through `path`. */
async function rewritingProxy(server: number, path: Path) {
  const bind = async () => {
    const s = dgram.createSocket('udp4');
    await new Promise<void>((res) => s.bind(0, '127.0.0.1', () => res()));
    return s;
  };
  const front = await bind();
  const up = await bind();
  let client: { port: number; address: string } | undefined;
  front.on('message', (m, r) => {
    client = r;
    up.send(path(new Uint8Array(m)), server, '127.0.0.1');
  });
  up.on('message', (m) => {
    if (client) front.send(path(new Uint8Array(m)), client.port, client.address);
  });
  return {
    front: front.address().port,
    up: up.address().port,
    close: () => Promise.all([front, up].map((s) => new Promise<void>((res) => s.close(() => res())))),
  };
}

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function device(): Promise<Device> {
  const mem = await DeviceMemory.create({ maximumBytes: 64 << 20, workerSlots: 0 });
  // The default wish (xxh3); a short retry span so the refused handshake fails within the test.
  const t = await UdpLink.open({ host: '127.0.0.1', port: 0, mtu: 1500, context: { retryLimit: 3, retryTimeoutMs: 0, maxRtoMs: 200 } });
  const dev = new Device(mem, t, { mss: t.mss });
  cleanup.push(() => dev.close());
  return dev;
}

describe('udp integrity wishes through a rewriting proxy (real sockets)', () => {
  it('two devices asking xxh3 behind a proxy that strips the wish block: no silent crc32c connection; the connect fails, the refusals counted', async () => {
    const a = await device();
    const b = await device();
    const proxy = await rewritingProxy(b.address.port as number, stripWish);
    cleanup.push(proxy.close);
    const cqA = a.createCq({ depth: 8 });
    const cqB = b.createCq({ depth: 8 });
    const qpA = a.allocPd().createQp({ type: 'rc', sendCq: cqA, recvCq: cqA, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    const qpB = b.allocPd().createQp({ type: 'rc', sendCq: cqB, recvCq: cqB, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    // B's side waits for a handshake that never completes; closing the device ends it.
    qpB.connect({ address: { transport: 'udp', host: '127.0.0.1', port: proxy.up }, qpn: qpA.qpn }).catch(() => {});
    const t0 = Date.now();
    await expect(qpA.connect({ address: { transport: 'udp', host: '127.0.0.1', port: proxy.front }, qpn: qpB.qpn })).rejects.toMatchObject({ code: 'ERR_UNREACHABLE' });
    expect(Date.now() - t0).toBeLessThan(10_000);
    const la = a.stats().link!;
    const lb = b.stats().link!;
    const both = JSON.stringify([la, lb]);
    expect(la.contextsCrc32c! + lb.contextsCrc32c!, both).toBe(0);
    expect(lb.integrityRefused, both).toBeGreaterThan(0);
    expect(lb.cookiesValidated, both).toBe(0);
  }, 30_000);
});
