// Frame packing (udpEnv.len chaining several engine frames in one DATA payload) and the cutting
// of tagged segments at payload boundaries: hand-derived bytes for a packed payload, then a
// property — whatever the frames and the room, every payload fits, frames of different QP pairs
// never share one, decoding gives back every untagged/control frame unchanged and in order, and
// the pieces of a cut tagged segment are ordinary tagged segments (TO and off advanced, L only on
// the last) whose bytes put together are the original data.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeFrames } from '../../../src/transport/udp/frame-codec.js';
import { FramePacker } from '../../../src/transport/udp/packer.js';
import type { Frame, SegFrame } from '../../../src/core/frame.js';
import { decodeDdp, encodeDdp, RdmapOpcode } from '../../../src/wire/rdmap.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const flat = (p: Uint8Array | Uint8Array[]) => (p instanceof Uint8Array ? p : Uint8Array.from(p.flatMap((v) => [...v])));

function packAll(frames: Frame[], room: number): { bytes: Uint8Array; dst: number; src: number }[] {
  const out: { bytes: Uint8Array; dst: number; src: number }[] = [];
  new FramePacker(room).pack(frames, (p, dst, src) => out.push({ bytes: flat(p), dst, src }));
  return out;
}

function tagged(src: number, dst: number, ssn: number, to: number, data: Uint8Array, last = true, off = 0): SegFrame {
  const hdr = new Uint8Array(14);
  encodeDdp({ tagged: true, last, opcode: 0, stag: 0x1234_5600 | ssn, to }, hdr, 0);
  // Data split over two views, as the segmenter hands over gather lists.
  const cut = data.length >> 1;
  return { kind: 'seg', env: { srcQpn: src, dstQpn: dst, ssn, msgLen: off + data.length, off, epoch: 0 }, hdr, payload: [data.subarray(0, cut), data.subarray(cut)].filter((v) => v.length > 0) };
}

describe('frame packer', () => {
  it('chains frames with udpEnv.len; the last frame carries 0', () => {
    const hdr = new Uint8Array(18);
    encodeDdp({ tagged: false, last: true, opcode: 12, ulp: 0, qn: 0, msn: 1, mo: 0 }, hdr, 0);
    const send: Frame = { kind: 'seg', env: { srcQpn: 1, dstQpn: 2, ssn: 3, msgLen: 4, off: 0, epoch: 0 }, hdr, payload: [Uint8Array.of(9, 8, 7, 6)] };
    const ps = packAll([{ kind: 'ack', srcQpn: 1, dstQpn: 2, ssn: 5 }, { kind: 'rnr', srcQpn: 1, dstQpn: 2, ssn: 7 }, send], 1000);
    expect(ps).toHaveLength(1);
    expect(ps[0]!.dst).toBe(2);
    expect(ps[0]!.src).toBe(1);
    const b = ps[0]!.bytes;
    expect(hex(b.subarray(0, 16))).toBe('0200' + '0008' + '00000005' + '0300' + '0008' + '00000007');
    // seg: kind 1, flags 0, len 0 (last), ssn 3, msgLen 4, off 0, ack 0, DDP header, data.
    expect(hex(b.subarray(16, 36))).toBe('01000000' + '00000003' + '00000004' + '00000000' + '00000000');
    expect(hex(b.subarray(36, 54))).toBe(hex(hdr));
    expect([...b.subarray(54)]).toEqual([9, 8, 7, 6]);
    const back: Frame[] = [];
    expect(decodeFrames(b, 2, 1, back)).toBe(0);
    expect(back).toEqual([{ kind: 'ack', srcQpn: 1, dstQpn: 2, ssn: 5, epoch: 0 }, { kind: 'rnr', srcQpn: 1, dstQpn: 2, ssn: 7, epoch: 0 }, send]);
  });

  it('a bad len drops the rest of the payload, never throws', () => {
    const out: Frame[] = [];
    // First frame claims 4 bytes (< 8): malformed.
    expect(decodeFrames(Uint8Array.of(2, 0, 0, 4, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 1), 1, 1, out)).toBe(1);
    expect(out).toEqual([]);
    // Second frame's len runs past the end.
    expect(decodeFrames(Uint8Array.of(2, 0, 0, 8, 0, 0, 0, 1, 2, 0, 0, 99, 0, 0, 0, 1), 1, 1, out)).toBe(1);
    expect(out).toEqual([{ kind: 'ack', srcQpn: 1, dstQpn: 1, ssn: 1, epoch: 0 }]);
    fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
      const o: Frame[] = [];
      const bad = decodeFrames(b, 3, 4, o);
      return bad >= 0;
    }));
  });

  it('cuts a tagged segment across payloads: ordinary tagged pieces, exact bytes, L on the last only', () => {
    const data = Uint8Array.from({ length: 30000 }, (_, i) => (i * 7) & 0xff);
    const f = tagged(5, 6, 9, 0xffff_f000, data);
    const room = 12000;
    const ps = packAll([{ kind: 'ack', srcQpn: 5, dstQpn: 6, ssn: 1 }, f], room);
    expect(ps.length).toBe(3);
    const got = new Uint8Array(data.length);
    let seen = 0;
    for (const p of ps) {
      expect(p.bytes.length).toBeLessThanOrEqual(room);
      const fs: Frame[] = [];
      expect(decodeFrames(p.bytes, 6, 5, fs)).toBe(0);
      for (const x of fs) {
        if (x.kind !== 'seg') continue;
        const d = decodeDdp(x.hdr, 0, x.hdr.length);
        if (!d.ok || !d.value.tagged) throw new Error('not tagged');
        const piece = x.payload[0]!;
        // TO crosses 2^32 here: the carry into the high word must be right.
        expect(d.value.to).toBe(0xffff_f000 + x.env.off);
        expect(d.value.last).toBe(x.env.off + piece.length === data.length);
        expect(x.env.msgLen).toBe(data.length);
        got.set(piece, x.env.off);
        seen += piece.length;
      }
    }
    expect(seen).toBe(data.length);
    expect(hex(got)).toBe(hex(data));
  });

  it('property: payloads fit, QP pairs never mix, order kept, cut pieces reassemble exactly', () => {
    const frameArb = fc.oneof(
      fc.record({ k: fc.constant('ack' as const), qp: fc.integer({ min: 1, max: 2 }), ssn: fc.nat() }),
      fc.record({ k: fc.constant('tag' as const), qp: fc.integer({ min: 1, max: 2 }), len: fc.integer({ min: 1, max: 9000 }), last: fc.boolean() }),
      fc.record({ k: fc.constant('send' as const), qp: fc.integer({ min: 1, max: 2 }), len: fc.integer({ min: 0, max: 2000 }) }),
    );
    fc.assert(fc.property(fc.array(frameArb, { minLength: 1, maxLength: 25 }), fc.integer({ min: 2100, max: 12000 }), (spec, room) => {
      let ssn = 1;
      const frames: Frame[] = spec.map((s) => {
        const n = ssn++;
        if (s.k === 'ack') return { kind: 'ack', srcQpn: 10 + s.qp, dstQpn: 20 + s.qp, ssn: s.ssn, epoch: 0 };
        const data = Uint8Array.from({ length: s.len }, (_, i) => (i + n * 13) & 0xff);
        if (s.k === 'tag') return tagged(10 + s.qp, 20 + s.qp, n, n * 0x10000, data, s.last, 100);
        const hdr = new Uint8Array(18);
        encodeDdp({ tagged: false, last: true, opcode: RdmapOpcode.Send, ulp: 0, qn: 0, msn: n, mo: 0 }, hdr, 0);
        return { kind: 'seg', env: { srcQpn: 10 + s.qp, dstQpn: 20 + s.qp, ssn: n, msgLen: s.len, off: 0, epoch: 0 }, hdr, payload: s.len > 0 ? [data] : [] };
      });
      const ps = packAll(frames, room);
      const decoded: Frame[] = [];
      for (const p of ps) {
        expect(p.bytes.length).toBeLessThanOrEqual(room);
        const fs: Frame[] = [];
        expect(decodeFrames(p.bytes, p.dst, p.src, fs)).toBe(0);
        for (const f of fs) {
          const src = f.kind === 'seg' ? f.env.srcQpn : f.srcQpn;
          const dst = f.kind === 'seg' ? f.env.dstQpn : f.dstQpn;
          expect([src, dst]).toEqual([p.src, p.dst]);
        }
        decoded.push(...fs);
      }
      // Walk the originals in order; a tagged one may come back as several pieces.
      let j = 0;
      for (const f of frames) {
        if (f.kind !== 'seg' || f.hdr.length !== 14) {
          const d = decoded[j++]!;
          if (f.kind === 'seg') {
            expect(d.kind).toBe('seg');
            const s = d as SegFrame;
            expect(s.env).toEqual(f.env);
            expect(hex(s.hdr)).toBe(hex(f.hdr));
            expect(hex(flat(s.payload))).toBe(hex(flat(f.payload)));
          } else expect(d).toEqual(f);
          continue;
        }
        const want = flat(f.payload);
        const origLast = (f.hdr[0]! & 0x40) !== 0;
        let at = 0;
        while (at < want.length) {
          const d = decoded[j++] as SegFrame;
          expect(d.kind).toBe('seg');
          expect(d.env.ssn).toBe(f.env.ssn);
          expect(d.env.off).toBe(f.env.off + at);
          const h = decodeDdp(d.hdr, 0, d.hdr.length);
          if (!h.ok || !h.value.tagged) throw new Error('piece not tagged');
          const piece = flat(d.payload);
          expect(piece.length).toBeGreaterThan(0);
          expect(h.value.to).toBe(f.env.ssn * 0x10000 + at);
          expect(h.value.last).toBe(origLast && at + piece.length === want.length);
          expect(hex(piece)).toBe(hex(want.subarray(at, at + piece.length)));
          at += piece.length;
        }
      }
      expect(j).toBe(decoded.length);
    }), { numRuns: 300 });
  });
});
