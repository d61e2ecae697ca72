// Round trips, robustness and truncation for every wire codec (fast-check).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as R from '../../src/wire/rdmap.js';
import * as M from '../../src/wire/mpa.js';
import * as U from '../../src/wire/udp.js';
import * as H from './helpers.js';

interface Case<T> {
  name: string;
  arb: fc.Arbitrary<T>;
  enc: (v: T, b: Uint8Array, off: number) => number;
  dec: (b: Uint8Array, off: number, end: number) => H.AnyResult;
  /** What decoding gives back for a value (defaults: the value). */
  norm?: (v: T) => unknown;
}

const termNorm = (t: R.Terminate): unknown => ({ m: false, d: false, r: false, ...t });
const udpNorm = (h: U.UdpHdr): unknown => h;

const CASES: Case<any>[] = [
  { name: 'ddp', arb: H.ddpHdr, enc: R.encodeDdp, dec: R.decodeDdp },
  { name: 'readRequest', arb: H.readRequest, enc: R.encodeReadRequest, dec: R.decodeReadRequest },
  { name: 'readRequestV', arb: H.readRequestV, enc: R.encodeReadRequestV, dec: R.decodeReadRequestV },
  { name: 'readComplete', arb: H.pair, enc: R.encodeReadComplete, dec: R.decodeReadComplete },
  { name: 'immediateData', arb: H.pair, enc: R.encodeImmediateData, dec: R.decodeImmediateData },
  { name: 'atomicRequest', arb: H.atomicRequest, enc: R.encodeAtomicRequest, dec: R.decodeAtomicRequest },
  { name: 'atomicResponse', arb: H.atomicResponse, enc: R.encodeAtomicResponse, dec: R.decodeAtomicResponse },
  { name: 'terminate', arb: H.terminate, enc: R.encodeTerminate, dec: R.decodeTerminate, norm: termNorm },
  { name: 'mpaFrame', arb: H.mpaFrame, enc: M.encodeMpaFrame, dec: M.decodeMpaFrame },
  { name: 'mpaV2Private', arb: H.mpaV2, enc: M.encodeMpaV2Private, dec: M.decodeMpaV2Private },
  { name: 'udpHdr', arb: H.udpHdr, enc: U.encodeUdpHdr, dec: U.decodeUdpHdr, norm: udpNorm },
];

const BUF = 4096;

describe.each(CASES)('$name codec', (c) => {
  it('decode(encode(x)) = x, at any offset, consuming exactly what was written', () => {
    fc.assert(
      fc.property(c.arb, fc.integer({ min: 0, max: 64 }), fc.integer({ min: 0, max: 16 }), (v, off, slack) => {
        const buf = new Uint8Array(BUF);
        const n = c.enc(v, buf, off);
        const r = c.dec(buf, off, off + n + slack);
        expect(r).toEqual({ ok: true, value: c.norm ? c.norm(v) : v, length: n });
      }),
      { numRuns: 300 },
    );
  });

  it('every strict prefix is rejected, never thrown at', () => {
    fc.assert(
      fc.property(c.arb, (v) => {
        const buf = new Uint8Array(BUF);
        const n = c.enc(v, buf, 0);
        for (let k = 0; k < n; k++) {
          const r = c.dec(buf, 0, k);
          expect(r.ok).toBe(false);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('bit flips give an error or a well-formed value, never an exception', () => {
    fc.assert(
      fc.property(c.arb, fc.array(fc.nat(), { minLength: 1, maxLength: 4 }), (v, flips) => {
        const buf = new Uint8Array(BUF);
        const n = c.enc(v, buf, 0);
        for (const f of flips) buf[(f >>> 3) % n]! ^= 1 << (f & 7);
        expect(H.wellFormed(c.dec(buf, 0, n), 0, n)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('every decoder on arbitrary input', () => {
  it('never throws, whatever the bytes and the (off, end) window', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 700 }),
        fc.integer({ min: -3, max: 710 }),
        fc.integer({ min: -3, max: 710 }),
        (bytes, off, end) => {
          for (const dec of Object.values(H.DECODERS)) {
            let r: H.AnyResult;
            expect(() => (r = dec(bytes, off, end))).not.toThrow();
            if (r!.ok) expect(off >= 0 && end <= bytes.length && r!.length <= end - off).toBe(true);
            else expect(r!.error).toMatch(/^[A-Z_]+$/);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('non-integer windows are malformed, not crashes', () => {
    const b = new Uint8Array(64);
    for (const dec of Object.values(H.DECODERS)) {
      expect(dec(b, 0.5, 64).ok).toBe(false);
      expect(dec(b, Number.NaN, 64).ok).toBe(false);
      expect(dec(b, 0, Infinity).ok).toBe(false);
    }
  });
});

describe('specific rejections', () => {
  it('DDP: versions, opcode 15, model/opcode mismatch, TO >= 2^53', () => {
    const b = new Uint8Array(32);
    const n = R.encodeDdp({ tagged: true, last: true, opcode: R.RdmapOpcode.RdmaWrite, stag: 1, to: 2 }, b, 0);
    const bad = (mut: (x: Uint8Array) => void) => {
      const x = b.slice();
      mut(x);
      return R.decodeDdp(x, 0, n);
    };
    expect(bad((x) => (x[0] = (x[0]! & ~3) | 2))).toEqual({ ok: false, error: 'BAD_DDP_VERSION' });
    expect(bad((x) => (x[0] = x[0]! & ~3))).toEqual({ ok: false, error: 'BAD_DDP_VERSION' });
    expect(bad((x) => (x[1] = (x[1]! & 0x3f) | 0x80))).toEqual({ ok: false, error: 'BAD_RDMAP_VERSION' });
    expect(bad((x) => (x[1] = 0x4f))).toEqual({ ok: false, error: 'BAD_OPCODE' });
    expect(bad((x) => (x[1] = 0x43))).toEqual({ ok: false, error: 'BAD_OPCODE' }); // tagged Send
    expect(bad((x) => (x[6] = 0x00, x[7] = 0x20))).toEqual({ ok: false, error: 'TO_RANGE' }); // TO = 2^53 + ...
    expect(bad((x) => (x[6] = 0x00, x[7] = 0x1f, x[8] = 0xff))).toMatchObject({ ok: true }); // < 2^53
    expect(() => R.encodeDdp({ tagged: false, last: true, opcode: R.RdmapOpcode.RdmaWrite, ulp: 0, qn: 0, msn: 1, mo: 0 }, b, 0)).toThrow();
    expect(() => R.encodeDdp({ tagged: true, last: true, opcode: 0, stag: 0, to: 2 ** 53 }, b, 0)).toThrow();
    expect(() => R.encodeDdp({ tagged: true, last: true, opcode: 0, stag: 0, to: 0 }, b, 20)).toThrow();
  });

  it('ReadRequestV: zero counts, huge counts and unequal totals', () => {
    const b = new Uint8Array(256);
    const n = R.encodeReadRequestV({ srcs: [{ stag: 1, to: 0, len: 10 }], sinks: [{ stag: 2, to: 0, len: 10 }] }, b, 0);
    const x = b.slice(0, n);
    x[1] = 0;
    expect(R.decodeReadRequestV(x, 0, n)).toEqual({ ok: false, error: 'BAD_COUNT' });
    const y = b.slice(0, n);
    y[0] = 0xff; // 65280 sources: over the cap, rejected before any allocation
    expect(R.decodeReadRequestV(y, 0, n)).toEqual({ ok: false, error: 'BAD_COUNT' });
    const z = b.slice(0, n);
    z[7] = 11; // totalLen 11 vs entries of 10
    expect(R.decodeReadRequestV(z, 0, n)).toEqual({ ok: false, error: 'BAD_LENGTH' });
    expect(() => R.encodeReadRequestV({ srcs: [{ stag: 1, to: 0, len: 10 }], sinks: [{ stag: 2, to: 0, len: 9 }] }, b, 0)).toThrow();
  });

  it('atomics: reserved subcode 1 and unassigned subcodes are rejected', () => {
    const b = new Uint8Array(64);
    const n = R.encodeAtomicRequest({ op: 'fetchAdd', reqId: 1, stag: 2, to: 8, addOrSwap: 1n, addOrSwapMask: 0n, compare: 0n, compareMask: 0n }, b, 0);
    for (const code of [1, 3, 15]) {
      b[3] = code;
      expect(R.decodeAtomicRequest(b, 0, n)).toEqual({ ok: false, error: 'BAD_ATOMIC_OP' });
    }
  });

  it('MPA: wrong key, revision 0/3, private data over 512', () => {
    const b = new Uint8Array(600);
    const n = M.encodeMpaFrame({ reply: false, markers: false, crc: true, reject: false, enhanced: false, revision: 1, privateData: new Uint8Array(0) }, b, 0);
    const x = b.slice();
    x[4] = 0x78;
    expect(M.decodeMpaFrame(x, 0, n)).toEqual({ ok: false, error: 'BAD_MPA_KEY' });
    for (const rev of [0, 3]) {
      const y = b.slice();
      y[17] = rev;
      expect(M.decodeMpaFrame(y, 0, n)).toEqual({ ok: false, error: 'BAD_MPA_REVISION' });
    }
    const z = b.slice();
    z[18] = 0x02;
    z[19] = 0x01; // 513
    expect(M.decodeMpaFrame(z, 0, 600)).toEqual({ ok: false, error: 'BAD_LENGTH' });
  });

  it('UDP: version, type, SACK count; datagram CRC and length rules', () => {
    const hdr: U.UdpHdr = { type: 1, ackReq: false, retx: false, window: 1, srcCtx: 1, dstCtx: 2, psn: 3, ackPsn: 4, tsVal: 5, tsEcr: 6, dstQpn: 7, srcQpn: 8, sack: [{ start: 1, end: 2 }] };
    const b = new Uint8Array(128);
    const n = U.encodeUdpHdr(hdr, b, 0);
    const mut = (i: number, v: number) => { const x = b.slice(); x[i] = v; return U.decodeUdpHdr(x, 0, n); };
    expect(mut(0, 0x11)).toEqual({ ok: false, error: 'BAD_UDP_VERSION' }); // version 1: before cookies
    expect(mut(0, 0x31)).toEqual({ ok: false, error: 'BAD_UDP_VERSION' });
    expect(mut(0, 0x25)).toEqual({ ok: false, error: 'BAD_UDP_TYPE' });
    expect(mut(0, 0x20)).toEqual({ ok: false, error: 'BAD_UDP_TYPE' });
    expect(mut(36, 0)).toEqual({ ok: false, error: 'BAD_COUNT' });
    expect(mut(36, 9)).toEqual({ ok: false, error: 'BAD_COUNT' });
    // DATA with a 2-byte "segment" seals and opens; flip a bit and the CRC catches it.
    b[n] = 0xc1; b[n + 1] = 0x40;
    const len = U.sealUdpDatagram(b, 0, n + 2, H.refCrc);
    expect(U.openUdpDatagram(b, 0, len, H.refCrc)).toMatchObject({ ok: true, value: { segOff: n, segEnd: n + 2 } });
    const c = b.slice(); c[10]! ^= 4;
    expect(U.openUdpDatagram(c, 0, len, H.refCrc)).toEqual({ ok: false, error: 'BAD_CRC' });
    const ack = U.encodeUdpHdr({ ...hdr, type: 2, sack: [] }, b, 0);
    const alen = U.sealUdpDatagram(b, 0, ack + 1, H.refCrc); // ACK with a stray byte
    expect(U.openUdpDatagram(b, 0, alen, H.refCrc)).toEqual({ ok: false, error: 'BAD_LENGTH' });
    // COOKIE must carry its cookie block; the cookie and token blocks sit before the SACK list.
    const ck = U.encodeUdpHdr({ ...hdr, type: 4, sack: [] }, b, 0);
    expect(U.openUdpDatagram(b, 0, U.sealUdpDatagram(b, 0, ck, H.refCrc), H.refCrc)).toEqual({ ok: false, error: 'BAD_COOKIE' });
    const full = { ...hdr, cookie: { time: 9, mac: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8) }, token: Uint8Array.of(9, 9, 9, 9, 8, 8, 8, 8) };
    const fn = U.encodeUdpHdr(full, b, 0);
    expect(fn).toBe(36 + 12 + 8 + 12);
    expect(b[1]! & 0x18).toBe(0x18);
    expect(Array.from(b.subarray(36, 56))).toEqual([0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9, 8, 8, 8, 8]);
    expect(U.decodeUdpHdr(b, 0, fn)).toEqual({ ok: true, value: full, length: fn });
    expect(U.decodeUdpHdr(b, 0, 36 + 11)).toEqual({ ok: false, error: 'TRUNCATED' });
    expect(U.decodeUdpHdr(b, 0, 36 + 12 + 7)).toEqual({ ok: false, error: 'TRUNCATED' });
  });

  it('FPDU: seal/open round trip for every ULPDU length mod 4, CRC mismatch detected', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 300 }), fc.boolean(), (ulpdu, withCrc) => {
        const b = new Uint8Array(400);
        b.set(ulpdu, 2);
        const n = M.sealFpdu(b, 0, ulpdu.length, withCrc ? H.refCrc : undefined);
        expect(n % 4).toBe(0);
        expect(n).toBe(M.fpduLength(ulpdu.length));
        const r = M.openFpdu(b, 0, n, withCrc ? H.refCrc : undefined);
        expect(r).toEqual({ ok: true, value: { ulpduOff: 2, ulpduLen: ulpdu.length, crc: withCrc ? H.refCrc(b, 0, n - 4) : 0 }, length: n });
        if (withCrc && ulpdu.length > 0) {
          b[2]! ^= 0x10;
          expect(M.openFpdu(b, 0, n, H.refCrc)).toEqual({ ok: false, error: 'BAD_CRC' });
        }
      }),
      { numRuns: 200 },
    );
  });
});
