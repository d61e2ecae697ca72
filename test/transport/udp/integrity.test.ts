// Negotiated integrity on the udp transport (docs/integrity.md): every pair of wishes settles on
// the stronger (none < crc32c < xxh3) on both sides, before data flows; after that every DATA
// and ACK carries the settled trailer, and a datagram that does not verify under it — a bad
// hash, a bad CRC, or another trailer kind (a forged 'none' included) — is a counted drop.
// With 'none' on both sides, a corrupted payload byte lands: that is what 'none' means.
import { crc32c as nodeCrc32c } from '@node-rs/crc32';
import { xxh3 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import { Access, Opcode, openDevice, WcStatus } from '../../../src/index.js';
import { UdpEndpoint, type OutDatagram } from '../../../src/transport/udp/endpoint.js';
import { UdpIntegrity } from '../../../src/wire/spec.js';
import { setUdpTrailer, udpTrailerKind } from '../../../src/wire/udp.js';
import { take } from '../../verbs/helpers.js';
import { seededIds } from '../../sim/random.js';

type Mode = 'crc32c' | 'xxh3' | 'none';
const MODES: Mode[] = ['none', 'crc32c', 'xxh3'];
const A = { host: '10.0.0.1', port: 1 };
const B = { host: '10.0.0.2', port: 2 };
const TRAILER: Record<Mode, number> = { crc32c: 4, xxh3: 8, none: 0 };

function bytes(d: OutDatagram): Uint8Array {
  return new Uint8Array(Buffer.concat(d.parts));
}

/** Two endpoints; `tamper` may rewrite (or drop: undefined) each datagram A sends B. */
function pair(wa: Mode, wb: Mode, tamper?: (d: Uint8Array, i: number) => Uint8Array | undefined) {
  const a = new UdpEndpoint({ mtu: 9000, integrity: wa, randomId: seededIds(11) });
  const b = new UdpEndpoint({ mtu: 9000, integrity: wb, randomId: seededIds(12) });
  const got: Uint8Array[] = [];
  const seen = { ab: [] as Uint8Array[], ba: [] as Uint8Array[] };
  let n = 0;
  const run = (t0: number, rounds = 40) => {
    for (let i = 0; i < rounds; i++) {
      const now = t0 + i * 50;
      const ra = a.poll(now);
      const rb = b.poll(now);
      for (const d of ra.datagrams) {
        const x = bytes(d);
        seen.ab.push(x);
        const y = tamper ? tamper(x, n++) : x;
        if (y !== undefined) b.receive(y, A, now);
      }
      for (const d of rb.datagrams) {
        const x = bytes(d);
        seen.ba.push(x);
        a.receive(x, B, now);
      }
      for (const d of rb.delivered) {
        got.push(d.payload.slice());
        b.release(d.ctx);
      }
      a.tick(now);
      b.tick(now);
    }
  };
  return { a, b, got, seen, run };
}

const stronger = (x: Mode, y: Mode): Mode => (MODES.indexOf(x) >= MODES.indexOf(y) ? x : y);
const payload = (k: number, n = 3000) => new Uint8Array(n).map((_, i) => (i * 7 + k) & 0xff);

describe('udp integrity negotiation (sans-I/O)', () => {
  for (const wa of MODES) {
    for (const wb of MODES) {
      it(`A wishes ${wa}, B wishes ${wb}: both settle on ${stronger(wa, wb)}, the trailers say so`, () => {
        const p = pair(wa, wb);
        for (let k = 0; k < 4; k++) p.a.send(B, payload(k), 0);
        p.run(0);
        for (let k = 4; k < 8; k++) p.a.send(B, payload(k), 5000);
        p.run(5000);
        const want = stronger(wa, wb);
        expect(p.a.integrityOf(B)).toBe(want);
        expect(p.b.integrityOf(A)).toBe(want);
        expect(p.got.map((g) => g[0])).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
        // Handshake datagrams (dstCtx 0) are CRC32C; B's answers and A's later datagrams carry the settled trailer.
        const code = { crc32c: UdpIntegrity.Crc32c, xxh3: UdpIntegrity.Xxh3, none: UdpIntegrity.None }[want];
        const dst = (x: Uint8Array) => Buffer.from(x).readUInt32BE(8);
        for (const x of [...p.seen.ab, ...p.seen.ba]) {
          if (dst(x) === 0 || (x[0]! & 0x0f) === 4) expect(udpTrailerKind(x)).toBe(UdpIntegrity.Crc32c);
          else expect(udpTrailerKind(x)).toBe(code);
        }
        const late = p.seen.ab.filter((x) => dst(x) !== 0);
        expect(late.length).toBeGreaterThan(0);
        expect(p.seen.ba.filter((x) => dst(x) !== 0).length).toBeGreaterThan(0);
        // The trailer really is that function of the bytes before it.
        for (const x of late) {
          const body = Buffer.from(x.subarray(0, x.length - TRAILER[want]));
          if (want === 'xxh3') expect(Buffer.from(x).readBigUInt64LE(x.length - 8)).toBe(xxh3.xxh64(body));
          if (want === 'crc32c') expect(Buffer.from(x).readUInt32LE(x.length - 4)).toBe(nodeCrc32c(body));
        }
        const sa = p.a.stats();
        expect(sa.badIntegrity + p.b.stats().badIntegrity + sa.badHash + sa.badCrc).toBe(0);
        expect(sa[({ crc32c: 'contextsCrc32c', xxh3: 'contextsXxh3', none: 'contextsNone' } as const)[want]]).toBe(1);
      });
    }
  }

  for (const mode of ['crc32c', 'xxh3'] as const) {
    it(`${mode}: a flipped payload bit is a counted drop and the payload arrives intact by retransmission`, () => {
      const bad = mode === 'crc32c' ? 'badCrc' : 'badHash';
      const p = pair(mode, mode, (d, i) => {
        if (Buffer.from(d).readUInt32BE(8) === 0 || i % 3 !== 0) return d;
        const x = d.slice();
        x[x.length >> 1] ^= 0x04;
        return x;
      });
      for (let k = 0; k < 12; k++) p.a.send(B, payload(k), 0);
      p.run(0, 200);
      expect(p.b.stats()[bad]).toBeGreaterThan(0);
      expect(p.got.length).toBe(12);
      for (const g of p.got) expect(Buffer.from(g).equals(Buffer.from(payload(g[0]!)))).toBe(true);
    });
  }

  it('a datagram re-sealed under another trailer kind (a forged "none" too) is dropped as badIntegrity', () => {
    const forged: Uint8Array[] = [];
    const p = pair('xxh3', 'crc32c', (d) => {
      if (Buffer.from(d).readUInt32BE(8) === 0 || udpTrailerKind(d) !== UdpIntegrity.Xxh3) return d;
      // Same bytes, trailer stripped, kind set to none: verifies trivially, must still be refused.
      const x = d.slice(0, d.length - 8);
      setUdpTrailer(x, 0, UdpIntegrity.None);
      forged.push(x);
      // And the CRC32C variant (valid CRC, wrong kind for this context).
      const c = new Uint8Array(d.length - 4);
      c.set(d.subarray(0, d.length - 8));
      setUdpTrailer(c, 0, UdpIntegrity.Crc32c);
      Buffer.from(c.buffer).writeUInt32LE(nodeCrc32c(Buffer.from(c.subarray(0, c.length - 4))), c.length - 4);
      forged.push(c);
      return undefined;
    });
    p.a.send(B, payload(1), 0);
    p.run(0, 20);
    p.a.send(B, payload(2), 2000);
    p.run(2000, 1);
    expect(forged.length).toBeGreaterThan(0);
    const before = p.b.stats().badIntegrity;
    const delivered = p.got.length;
    for (const x of forged) p.b.receive(x, A, 2100);
    expect(p.b.stats().badIntegrity - before).toBe(forged.length);
    expect(p.b.poll(2100).delivered.length + p.got.length - delivered).toBe(0);
  });

  it("'none' on both sides: a corrupted payload byte is delivered (only the UDP checksum would have caught it)", () => {
    const p = pair('none', 'none', (d) => {
      if (Buffer.from(d).readUInt32BE(8) === 0 || d.length < 1000) return d;
      const x = d.slice();
      x[x.length - 10] ^= 0xff;
      return x;
    });
    p.a.send(B, payload(9), 0);
    p.run(0, 20);
    p.a.send(B, payload(10), 2000);
    p.run(2000, 10);
    expect(p.got.length).toBe(2);
    const second = p.got.find((g) => g[0] === 10)!;
    expect(Buffer.from(second).equals(Buffer.from(payload(10)))).toBe(false);
  });

  it('an unknown wish or mode is refused', () => {
    expect(() => new UdpEndpoint({ integrity: 'md5' as Mode })).toThrow(/integrity/);
  });
});

describe('udp integrity on real sockets (openDevice)', () => {
  it.each([
    ['none', 'none'], ['none', 'xxh3'], ['crc32c', 'xxh3'], ['crc32c', 'none'],
  ] as const)('devices asking %s and %s move a 256 KiB RdmaWrite exact on the stronger, shown in stats()', async (wa, wb) => {
    const a = await openDevice({ transport: 'udp', integrity: wa });
    const b = await openDevice({ transport: 'udp', integrity: wb });
    try {
      const pdA = a.allocPd();
      const pdB = b.allocPd();
      const cqA = a.createCq({ depth: 16 });
      const cqB = b.createCq({ depth: 16 });
      const qpA = pdA.createQp({ type: 'rc', sendCq: cqA, recvCq: cqA, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
      const qpB = pdB.createQp({ type: 'rc', sendCq: cqB, recvCq: cqB, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
      await Promise.all([qpA.connect({ address: b.address, qpn: qpB.qpn }), qpB.connect({ address: a.address, qpn: qpA.qpn })]);
      const N = 256 * 1024;
      const src = pdA.regMr(N, Access.LocalWrite);
      const dst = pdB.regMr(N, Access.LocalWrite | Access.RemoteWrite);
      for (let i = 0; i < N; i++) src.buffer[i] = (i * 31) & 0xff;
      qpA.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: N, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
      expect((await take(cqA, 1, 10_000)).map((w) => w.status)).toEqual([WcStatus.Success]);
      expect(Buffer.from(dst.buffer).equals(Buffer.from(src.buffer))).toBe(true);
      const want = stronger(wa, wb);
      const key = ({ crc32c: 'contextsCrc32c', xxh3: 'contextsXxh3', none: 'contextsNone' } as const)[want];
      expect(a.stats().link![key]).toBe(1);
      expect(b.stats().link![key]).toBe(1);
      expect(a.integrity).toBe(wa);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('openDevice refuses an unknown mode, and xxh3 on tcp (MPA has only its CRC)', async () => {
    await expect(openDevice({ transport: 'udp', integrity: 'md5' as Mode })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    await expect(openDevice({ transport: 'tcp', integrity: 'xxh3' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});
