// The engine envelope inside UDP DATA payloads: hand-derived bytes for each frame kind (from
// the layout in docs/wire.md, not from the codec), round trips, and decode never throwing on
// arbitrary input.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeFrame, encodeFrame, ENV_SEG_LEN, frameBytes, frameLength } from '../../../src/transport/udp/frame-codec.js';
import type { Frame } from '../../../src/core/frame.js';
import { encodeDdp } from '../../../src/wire/rdmap.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('engine envelope codec', () => {
  it('control frames are 8 bytes: kind, flags, rsvd, ssn (big-endian)', () => {
    expect(hex(frameBytes({ kind: 'ack', srcQpn: 1, dstQpn: 2, ssn: 0x01020304 }))).toBe('0200000001020304');
    expect(hex(frameBytes({ kind: 'rnr', srcQpn: 1, dstQpn: 2, ssn: 7 }))).toBe('0300000000000007');
    expect(hex(frameBytes({ kind: 'hello', srcQpn: 1, dstQpn: 2, reply: false }))).toBe('0400000000000000');
    expect(hex(frameBytes({ kind: 'hello', srcQpn: 1, dstQpn: 2, reply: true }))).toBe('0401000000000000');
  });

  it('a seg frame: udpEnv + udpEnvSeg, then the DDP header and the gathered payload', () => {
    const hdr = new Uint8Array(14);
    encodeDdp({ tagged: true, last: true, opcode: 0, stag: 0xaabbccdd, to: 0x1000 }, hdr, 0);
    const f: Frame = {
      kind: 'seg', env: { srcQpn: 5, dstQpn: 6, ssn: 9, msgLen: 0x10203, off: 0x400, ack: 0xfffffffe }, hdr,
      payload: [Uint8Array.of(1, 2), Uint8Array.of(3)],
    };
    const b = frameBytes(f);
    expect(b.length).toBe(20 + 14 + 3);
    expect(frameLength(f)).toBe(b.length);
    expect(hex(b.subarray(0, 20))).toBe('01020000' + '00000009' + '00010203' + '00000400' + 'fffffffe');
    expect(hex(b.subarray(20, 34))).toBe(hex(hdr));
    expect([...b.subarray(34)]).toEqual([1, 2, 3]);
    // Without a piggy-backed ack: flag clear, field zero.
    const { ack: _, ...env } = (f as Extract<Frame, { kind: 'seg' }>).env;
    expect(hex(frameBytes({ ...f, env } as Frame).subarray(0, 20))).toBe('01000000' + '00000009' + '00010203' + '00000400' + '00000000');
  });

  it('round trips every kind; QPNs come from the reliability header', () => {
    const hdrT = new Uint8Array(14);
    encodeDdp({ tagged: true, last: false, opcode: 2, stag: 77, to: 12345 }, hdrT, 0);
    const hdrU = new Uint8Array(18 + 8);
    encodeDdp({ tagged: false, last: true, opcode: 14, ulp: 0, qn: 0, msn: 3, mo: 0 }, hdrU, 0);
    const hdrS = new Uint8Array(18);
    encodeDdp({ tagged: false, last: true, opcode: 12, ulp: 0xdead, qn: 0, msn: 1, mo: 100 }, hdrS, 0);
    const frames: Frame[] = [
      { kind: 'ack', srcQpn: 3, dstQpn: 4, ssn: 0xffffffff, epoch: 5 },
      { kind: 'rnr', srcQpn: 3, dstQpn: 4, ssn: 1, epoch: 63 },
      { kind: 'hello', srcQpn: 3, dstQpn: 4, reply: true },
      { kind: 'seg', env: { srcQpn: 3, dstQpn: 4, ssn: 2, msgLen: 5000, off: 1000, epoch: 1 }, hdr: hdrT, payload: [new Uint8Array(1000).fill(9)] },
      { kind: 'seg', env: { srcQpn: 3, dstQpn: 4, ssn: 2, msgLen: 8, off: 0, ack: 1, epoch: 45 }, hdr: hdrU, payload: [] },
      { kind: 'seg', env: { srcQpn: 3, dstQpn: 4, ssn: 2, msgLen: 150, off: 100, epoch: 0 }, hdr: hdrS, payload: [new Uint8Array(50).fill(1)] },
      { kind: 'seg', env: { srcQpn: 3, dstQpn: 4, ssn: 2, msgLen: 0, off: 0, epoch: 17 }, hdr: hdrS, payload: [] },
    ];
    for (const f of frames) {
      const d = decodeFrame(frameBytes(f), 4, 3);
      expect(d).toEqual(f);
    }
    // The srd epoch is flags bits 2-7, beside AckPresent (docs/wire.md udpEnv.flags).
    expect(frameBytes(frames[4]!)[1]).toBe(0x02 | (45 << 2));
    expect(frameBytes(frames[1]!)[1]).toBe(63 << 2);
  });

  it('encodes at an offset inside a larger buffer', () => {
    const buf = new Uint8Array(64).fill(0xee);
    const n = encodeFrame({ kind: 'ack', srcQpn: 1, dstQpn: 1, ssn: 5 }, buf, 10);
    expect(n).toBe(8);
    expect(buf[9]).toBe(0xee);
    expect(buf[18]).toBe(0xee);
  });

  it('rejects what is not a frame: unknown kind, short seg, padded control, QPN 0', () => {
    expect(decodeFrame(Uint8Array.of(9, 0, 0, 0, 0, 0, 0, 1), 1, 1)).toBeUndefined();
    expect(decodeFrame(new Uint8Array(ENV_SEG_LEN + 1).fill(0).map((_, i) => (i === 0 ? 1 : 0)), 1, 1)).toBeUndefined();
    expect(decodeFrame(Uint8Array.of(2, 0, 0, 0, 0, 0, 0, 1, 0), 1, 1)).toBeUndefined();
    expect(decodeFrame(Uint8Array.of(2, 0, 0, 0, 0, 0, 0, 1), 0, 1)).toBeUndefined();
    expect(decodeFrame(Uint8Array.of(2, 0, 0), 1, 1)).toBeUndefined();
  });

  it('never throws on arbitrary payloads', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(), fc.nat(), (b, d, s) => {
        const f = decodeFrame(b, d, s);
        if (f !== undefined && f.kind === 'seg') {
          // Views, not copies, and nothing beyond the datagram.
          let n = ENV_SEG_LEN + f.hdr.length;
          for (const p of f.payload) n += p.length;
          expect(n).toBe(b.length);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
