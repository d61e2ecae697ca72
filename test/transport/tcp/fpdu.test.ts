// FPDU conformance (hand-derived bytes from the RFC 5040/5041/5044 diagrams, CRC checked against
// @node-rs/crc32) and the resumable deframer under every segmentation, with and without markers.
import { crc32c as refCrc } from '@node-rs/crc32';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { encodeDdp, encodeTerminate, RdmapOpcode } from '../../../src/wire/rdmap.js';
import { FpduDeframer, FpduFramer, fpduLength, mulpdu, type FramingMemory, type RxUlpdu } from '../../../src/transport/tcp/fpdu.js';
import type { TcpFault } from '../../../src/transport/tcp/fault.js';

let dp: DeviceMemory;
beforeAll(async () => {
  dp = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 64 << 20, regionEntries: 16, workerSlots: 0 });
});

const hex = (s: string): Uint8Array => Uint8Array.from(s.replace(/\s+/g, '').match(/../g)!.map((h) => parseInt(h, 16)));
const le32 = (v: number): number[] => [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, v >>> 24];
const cat = (parts: Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
};

function frameAll(f: FpduFramer, hdr: Uint8Array, payload: Uint8Array[] = []): Uint8Array {
  const out: Uint8Array[] = [];
  f.frame(hdr, payload, out);
  return cat(out);
}

/** Collects a deframer's output as copied ULPDUs. */
/**
 * No error and exactly `want` delivered: a byte compare, and the matchers (slow on typed arrays,
 * element by element) only when it differs, to say how.
 */
function expectDelivered(errors: TcpFault[], got: Uint8Array[], want: Uint8Array[]): void {
  const same = got.length === want.length && got.every((x, i) => Buffer.from(x.buffer, x.byteOffset, x.length).equals(want[i]!));
  if (errors.length === 0 && same) return;
  expect(errors).toEqual([]);
  expect(got).toEqual(want);
}

function collector(dplane: FramingMemory, opts: { crc: boolean; markers: boolean; maxUlpdu?: number; capacity?: number }) {
  const got: Uint8Array[] = [];
  const errors: TcpFault[] = [];
  const d = new FpduDeframer({ dp: dplane, ...opts }, {
    ulpdus(batch: RxUlpdu[], u8: Uint8Array) {
      for (const u of batch) got.push(u8.slice(u.ptr, u.ptr + u.len));
    },
    error(f) {
      errors.push(f);
    },
  });
  return { d, got, errors };
}

describe('FPDU bytes (hand-derived)', () => {
  it('RDMA Write, tagged: length, DDP/RDMAP control, STag, TO, payload, pad, CRC32C little-endian', () => {
    // RFC 5041 §5.1 tagged header: [T|L|Rsvd|DV][RV|Rsvd|Opcode] STag(4) TO(8), all big-endian.
    // T=1 L=1 DV=01 -> 0xC1; RV=01 opcode 0 (RDMA Write) -> 0x40. ULPDU = 14 + 5 = 19 = 0x0013.
    // 2 + 19 = 21 -> 3 pad bytes. CRC over the 24 bytes before it.
    const expectBody = hex('0013 c1 40 11223344 0000000055667788 68656c6c6f 000000');
    const hdr = new Uint8Array(14);
    encodeDdp({ tagged: true, last: true, opcode: RdmapOpcode.RdmaWrite, stag: 0x11223344, to: 0x55667788 }, hdr, 0);
    const wire = frameAll(new FpduFramer({ dp, crc: true, markers: false }), hdr, [new TextEncoder().encode('hello')]);
    expect(wire.length).toBe(28);
    expect([...wire.subarray(0, 24)]).toEqual([...expectBody]);
    const crc = refCrc(expectBody);
    expect([...wire.subarray(24)]).toEqual(le32(crc));
    // Byte order: the first CRC byte on the wire is the least significant byte of the value.
    expect(wire[24]).toBe(crc & 0xff);
    expect(wire[27]).toBe(crc >>> 24);
    // The same trailer as a literal (docs/tcp-framing.md shows this example).
    expect([...wire.subarray(24)]).toEqual([0xc9, 0xa5, 0x04, 0xf2]);
  });

  it('Send, untagged: RsvdULP, QN, MSN, MO, 1 pad byte', () => {
    // RFC 5041 §5.2 untagged header: ctrl(2) RsvdULP(4) QN(4) MSN(4) MO(4). T=0 L=1 DV=01 -> 0x41,
    // RV=01 opcode 3 (Send) -> 0x43. QN 0, MSN 1, MO 0. ULPDU = 18 + 3 = 21 -> 1 pad byte.
    const expectBody = hex('0015 41 43 00000000 00000000 00000001 00000000 616263 00');
    const hdr = new Uint8Array(18);
    encodeDdp({ tagged: false, last: true, opcode: RdmapOpcode.Send, ulp: 0, qn: 0, msn: 1, mo: 0 }, hdr, 0);
    const wire = frameAll(new FpduFramer({ dp, crc: true, markers: false }), hdr, [new TextEncoder().encode('abc')]);
    expect([...wire.subarray(0, 24)]).toEqual([...expectBody]);
    expect([...wire.subarray(24)]).toEqual(le32(refCrc(expectBody)));
  });

  it('Terminate (LLP, MPA, CRC error): QN 2, control word 0x20020000', () => {
    // RFC 5040 §4.8: untagged header with opcode 7, QN 2, then Layer(4) EType(4) ECode(8) M D R Rsvd.
    // Layer 2 (LLP), etype 0 (MPA), ecode 2 (CRC) -> 0x2002 0000. ULPDU 22, pad 0.
    const expectBody = hex('0016 41 47 00000000 00000002 00000001 00000000 20020000');
    const hdr = new Uint8Array(22);
    encodeDdp({ tagged: false, last: true, opcode: RdmapOpcode.Terminate, ulp: 0, qn: 2, msn: 1, mo: 0 }, hdr, 0);
    encodeTerminate({ layer: 2, etype: 0, ecode: 2 }, hdr, 18);
    const wire = frameAll(new FpduFramer({ dp, crc: true, markers: false }), hdr);
    expect([...wire.subarray(0, 24)]).toEqual([...expectBody]);
    expect([...wire.subarray(24)]).toEqual(le32(refCrc(expectBody)));
  });

  it('without CRC the trailer is four zero bytes', () => {
    const hdr = new Uint8Array(14);
    encodeDdp({ tagged: true, last: true, opcode: 0, stag: 1, to: 0 }, hdr, 0);
    const wire = frameAll(new FpduFramer({ dp, crc: false, markers: false }), hdr, [new Uint8Array(2)]);
    expect(wire.length).toBe(fpduLength(16));
    expect([...wire.subarray(-4)]).toEqual([0, 0, 0, 0]);
  });

  it('large segments go out as gathered pieces (payload views untouched) with the same CRC', () => {
    const payload = dp.u8().subarray(dp.alloc(40000), 0);
    const at = dp.alloc(40000);
    const view = dp.u8().subarray(at, at + 40000);
    for (let i = 0; i < view.length; i++) view[i] = (i * 31) & 0xff;
    void payload;
    const hdr = new Uint8Array(14);
    encodeDdp({ tagged: true, last: true, opcode: 0, stag: 9, to: 4096 }, hdr, 0);
    const out: Uint8Array[] = [];
    new FpduFramer({ dp, crc: true, markers: false }).frame(hdr, [view], out);
    expect(out.some((p) => p === view)).toBe(true);
    const wire = cat(out);
    expect(wire.length).toBe(fpduLength(40014));
    expect((wire[0]! << 8) | wire[1]!).toBe(40014);
    const crcAt = wire.length - 4;
    expect([...wire.subarray(crcAt)]).toEqual(le32(refCrc(wire.subarray(0, crcAt))));
  });

  it('MULPDU from EMSS as RFC 5044 §4.4 states', () => {
    expect(mulpdu(1460, false)).toBe(1460 - 6);
    expect(mulpdu(1448, false)).toBe(1448 - 6);
    expect(mulpdu(1461, false)).toBe(1461 - 7);
    expect(mulpdu(1460, true)).toBe(1460 - (6 + 4 * 3));
    expect(mulpdu(65483, false)).toBe(65483 - (6 + 3));
    expect(mulpdu(65535, false)).toBe(65535 - 9);
  });
});

describe('markers', () => {
  it('first FPDU starts with a marker (FPDUPTR 0); interior markers point back to the ULPDU Length; CRC covers them', () => {
    const f = new FpduFramer({ dp, crc: true, markers: true });
    const hdr = new Uint8Array(14);
    encodeDdp({ tagged: true, last: true, opcode: 0, stag: 7, to: 0 }, hdr, 0);
    const payload = new Uint8Array(600).map((_, i) => i & 0xff);
    const wire = frameAll(f, hdr, [payload]);
    // Stream positions: marker 0..3, ULPDU Length at 4, marker at 512 (FPDUPTR 508), and the
    // FPDU is 2 + 614 + 0 pad + 4 CRC = 620 plain bytes + 2 markers = 628.
    expect(wire.length).toBe(628);
    expect([...wire.subarray(0, 4)]).toEqual([0, 0, 0, 0]);
    expect((wire[4]! << 8) | wire[5]!).toBe(614);
    expect([...wire.subarray(512, 516)]).toEqual([0, 0, 508 >> 8, 508 & 0xff]);
    expect([...wire.subarray(-4)]).toEqual(le32(refCrc(wire.subarray(0, 624))));
    // Plain bytes without the markers are the unmarked FPDU.
    const unmarked = cat([wire.subarray(4, 512), wire.subarray(516, 624)]);
    expect((unmarked[0]! << 8) | unmarked[1]!).toBe(614);
    expect([...unmarked.subarray(2 + 14)]).toEqual([...payload]);
    expect(f.streamPos).toBe(628);
  });

  it('frameTo copies the header with markers as without: a header reused right after framing does not change the bytes sent', () => {
    const hdr = new Uint8Array(14);
    encodeDdp({ tagged: true, last: true, opcode: 0, stag: 7, to: 0 }, hdr, 0);
    const payload = new Uint8Array(40).fill(0x33);
    for (const markers of [false, true]) {
      const want = frameAll(new FpduFramer({ dp, crc: true, markers }), hdr.slice(), [payload]);
      // A sink that keeps the stream's pieces in order: its small space, and the views it is handed.
      const pieces: Uint8Array[] = [];
      const buf = Buffer.alloc(4096);
      let off = 0;
      const sink = {
        buf,
        small: (k: number) => {
          pieces.push(buf.subarray(off, off + k));
          off += k;
          return off - k;
        },
        view: (v: Uint8Array) => {
          pieces.push(v);
        },
      };
      const scratch = hdr.slice();
      const n = new FpduFramer({ dp, crc: true, markers }).frameTo(scratch, [payload], sink);
      scratch.fill(0xee); // the caller reuses its header buffer at once
      expect(n).toBe(want.length);
      expect(Buffer.from(cat(pieces)).equals(Buffer.from(want))).toBe(true);
    }
  });

  it('a marker falling between pad and CRC belongs to the FPDU; one falling right after the CRC leads the next', () => {
    const f = new FpduFramer({ dp, crc: true, markers: true });
    // Choose ULPDU so the plain bytes before the CRC end exactly at stream 512: 4 (marker) + 2 + u + pad = 512.
    const u = 506; // 2 + 506 = 508 -> pad 0 -> bytes up to 512, marker at 512, CRC at 516..519.
    const hdr = new Uint8Array(14);
    encodeDdp({ tagged: true, last: true, opcode: 0, stag: 7, to: 0 }, hdr, 0);
    const a = frameAll(f, hdr, [new Uint8Array(u - 14).fill(0xaa)]);
    expect(a.length).toBe(4 + 2 + u + 4 + 4);
    expect([...a.subarray(512, 516)]).toEqual([0, 0, 508 >> 8, 508 & 0xff]);
    expect([...a.subarray(516)]).toEqual(le32(refCrc(a.subarray(0, 516))));
    const { d, got, errors } = collector(dp, { crc: true, markers: true });
    d.push(a);
    expect(errors).toEqual([]);
    expect(got.length).toBe(1);
    expect(got[0]!.length).toBe(u);
  });
});

/** A stream of FPDUs with varied sizes (tiny, odd, multi-marker) plus the ULPDUs it carries. */
function makeStream(markers: boolean, crc: boolean, sizes: number[]): { wire: Uint8Array; ulpdus: Uint8Array[] } {
  const f = new FpduFramer({ dp, crc, markers });
  const parts: Uint8Array[] = [];
  const ulpdus: Uint8Array[] = [];
  let seed = 1;
  for (const size of sizes) {
    const hdr = new Uint8Array(14);
    encodeDdp({ tagged: true, last: true, opcode: 0, stag: size, to: seed }, hdr, 0);
    const payload = new Uint8Array(size).map(() => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24);
    f.frame(hdr, [payload], parts);
    ulpdus.push(cat([hdr, payload]));
  }
  return { wire: cat(parts), ulpdus };
}

describe('deframer', () => {
  for (const markers of [false, true]) {
    it(`every split point, two pieces (markers ${markers})`, () => {
      const { wire, ulpdus } = makeStream(markers, true, [0, 1, 3, 513, 70, 1030, 2]);
      for (let cut = 0; cut <= wire.length; cut++) {
        const { d, got, errors } = collector(dp, { crc: true, markers });
        d.push(wire.subarray(0, cut));
        d.push(wire.subarray(cut));
        d.end();
        expectDelivered(errors, got, ulpdus);
        d.dispose();
      }
    });

    it(`random segmentation (fast-check, markers ${markers})`, () => {
      fc.assert(
        fc.property(
          fc.array(fc.integer({ min: 0, max: 3000 }), { minLength: 1, maxLength: 12 }),
          fc.array(fc.integer({ min: 1, max: 900 }), { minLength: 1, maxLength: 40 }),
          fc.boolean(),
          (sizes, cuts, crc) => {
            const { wire, ulpdus } = makeStream(markers, crc, sizes);
            const { d, got, errors } = collector(dp, { crc, markers, capacity: 128 * 1024 });
            let o = 0;
            let i = 0;
            while (o < wire.length) {
              const n = cuts[i++ % cuts.length]!;
              d.push(wire.subarray(o, o + n));
              o += n;
            }
            d.end();
            d.dispose();
            expectDelivered(errors, got, ulpdus);
          },
        ),
        { numRuns: 150 },
      );
    });
  }

  it('many FPDUs in one chunk, and a stream larger than the staging area', () => {
    const sizes = Array.from({ length: 400 }, (_, i) => (i * 977) % 3000);
    const { wire, ulpdus } = makeStream(false, true, sizes);
    expect(wire.length).toBeGreaterThan(128 * 1024);
    const { d, got, errors } = collector(dp, { crc: true, markers: false, capacity: 128 * 1024 });
    d.push(wire);
    expectDelivered(errors, got, ulpdus);
    d.dispose();
  });

  it('maximal FPDUs (65535-byte ULPDU) in 64 KiB reads', () => {
    const { wire, ulpdus } = makeStream(false, true, [65535 - 14, 65535 - 14, 7]);
    const { d, got, errors } = collector(dp, { crc: true, markers: false, capacity: 128 * 1024 });
    for (let o = 0; o < wire.length; o += 65536) d.push(wire.subarray(o, o + 65536));
    expectDelivered(errors, got, ulpdus);
    d.dispose();
  });
});

describe('zero-copy receive (rxSpace/commit, as the socket reads straight into staging)', () => {
  /** Feed `wire` as reads of the sizes `cuts` gives, each written into rxSpace() as a socket read would. */
  function readInto(d: FpduDeframer, wire: Uint8Array, cut: (i: number, room: number) => number): void {
    let o = 0;
    for (let i = 0; o < wire.length; i++) {
      const room = d.rxSpace();
      const n = Math.min(wire.length - o, room.length, Math.max(1, cut(i, room.length)));
      room.set(wire.subarray(o, o + n));
      o += n;
      if (!d.commit(n)) return;
    }
  }

  it.each([false, true])('random read sizes, a stream several times the staging area (markers %s)', (markers) => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 66000 }), { minLength: 1, maxLength: 16 }), fc.array(fc.integer({ min: 1, max: 200000 }), { minLength: 1, maxLength: 50 }), (sizes, reads) => {
        const { wire, ulpdus } = makeStream(markers, true, sizes.map((s) => Math.min(s, (markers ? 64962 : 65535) - 14)));
        const { d, got, errors } = collector(dp, { crc: true, markers, capacity: 128 * 1024 });
        readInto(d, wire, (i) => reads[i % reads.length]!);
        d.dispose();
        expectDelivered(errors, got, ulpdus);
      }),
      { numRuns: 10 },
    );
  });

  it('a bad CRC in the middle of one read: the FPDUs before it are delivered, then LLP/MPA/CRC', () => {
    const { wire, ulpdus } = makeStream(false, true, [10, 20, 30, 40]);
    const bad = wire.slice();
    const third = fpduLength(14 + 10) + fpduLength(14 + 20);
    bad[third + 5]! ^= 1;
    const { d, got, errors } = collector(dp, { crc: true, markers: false });
    readInto(d, bad, () => bad.length);
    expect(got).toEqual(ulpdus.slice(0, 2));
    expect(errors.map((e) => [e.layer, e.etype, e.ecode])).toEqual([[2, 0, 2]]);
    d.dispose();
  });
});

describe('malformed streams', () => {
  it('a flipped bit anywhere in a CRC-protected FPDU: LLP/MPA/CRC (2,0,2), nothing delivered after it', () => {
    const { wire } = makeStream(false, true, [40]);
    for (let i = 2; i < wire.length; i++) {
      const bad = wire.slice();
      bad[i]! ^= 0x10;
      const { d, got, errors } = collector(dp, { crc: true, markers: false });
      expect(d.push(bad)).toBe(false);
      expect(got).toEqual([]);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatchObject({ layer: 2, etype: 0, ecode: 2, code: 'CRC' });
      expect(d.push(wire)).toBe(false);
      expect(got).toEqual([]);
      d.dispose();
    }
  });

  it('length over the limit: LLP/MPA/FPDU-start (2,0,3)', () => {
    const { wire } = makeStream(false, true, [100]);
    const { d, errors } = collector(dp, { crc: true, markers: false, maxUlpdu: 64 });
    d.push(wire);
    expect(errors).toEqual([expect.objectContaining({ layer: 2, etype: 0, ecode: 3, code: 'LENGTH' })]);
    d.dispose();
  });

  it('truncated then closed: LLP/MPA/stream lost (2,0,1)', () => {
    const { wire, ulpdus } = makeStream(false, true, [10, 20]);
    const { d, got, errors } = collector(dp, { crc: true, markers: false });
    d.push(wire.subarray(0, wire.length - 3));
    expect(got).toEqual(ulpdus.slice(0, 1));
    d.end();
    expect(errors).toEqual([expect.objectContaining({ layer: 2, etype: 0, ecode: 1, code: 'TRUNCATED' })]);
    d.dispose();
  });

  it('a bad marker FPDUPTR: (2,0,3) MARKER', () => {
    const { wire } = makeStream(true, false, [700]);
    const bad = wire.slice();
    bad[515] = 0x08; // interior marker at 512: FPDUPTR low byte
    const { d, errors } = collector(dp, { crc: false, markers: true });
    d.push(bad);
    expect(errors).toEqual([expect.objectContaining({ layer: 2, etype: 0, ecode: 3, code: 'MARKER' })]);
    d.dispose();
  });

  it('random garbage never throws and never delivers past an error', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 3000 }), fc.boolean(), (junk, markers) => {
        const { d, errors } = collector(dp, { crc: true, markers, maxUlpdu: 4096 });
        expect(() => {
          d.push(junk);
          d.end();
        }).not.toThrow();
        expect(errors.length).toBeLessThanOrEqual(1);
        d.dispose();
      }),
      { numRuns: 200 },
    );
  });
});
