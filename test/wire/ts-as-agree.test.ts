// The TypeScript codecs and the WebAssembly batch parser/builder must give the same answers:
// TS-encoded headers parsed in WASM, WASM-built headers decoded in TS, and arbitrary bytes
// classified identically by both.
import { beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createSharedMemory, instantiateKernels, type Kernels } from '../../src/dataplane/wasm.js';
import * as R from '../../src/wire/rdmap.js';
import { DDP_BATCH_DESC, DDP_BATCH_OUT, DdpStatus } from '../../src/wire/spec.js';
import { ddpHdr } from './helpers.js';

let k: Kernels & { parseDdpBatch(d: number, n: number, o: number): number; buildDdpBatch(r: number, n: number, d: number): number };
let mem: WebAssembly.Memory;
let base = 0;

beforeAll(async () => {
  mem = createSharedMemory(8, 64);
  k = (await instantiateKernels(mem)) as typeof k;
  base = (k.heapBase() + 63) & ~63;
});

const SLOT = 64; // bytes per segment in memory
const MAX = 64; // segments per batch
const OUT_NAMES = Object.fromEntries(Object.entries(DdpStatus).map(([n, v]) => [v, n]));
const D = DDP_BATCH_DESC.fields;
const O = DDP_BATCH_OUT.fields;

function regions() {
  const segs = base;
  const desc = segs + SLOT * MAX;
  const out = desc + DDP_BATCH_DESC.size * MAX;
  return { segs, desc, out };
}

/** What the WASM record says, in decodeDdp's vocabulary. */
function readRecord(dv: DataView, at: number): R.WireResult<R.DdpHdr> & { payloadLen?: number } {
  const status = dv.getUint8(at + O.status.offset);
  if (status !== 0) return { ok: false, error: OUT_NAMES[status]! };
  const flags = dv.getUint8(at + O.flags.offset);
  const opcode = dv.getUint8(at + O.opcode.offset);
  const hdrLen = dv.getUint8(at + O.hdrLen.offset);
  const last = (flags & 2) !== 0;
  const x = dv.getBigUint64(at + O.toOrMsnMo.offset, true);
  const value: R.DdpHdr =
    flags & 1
      ? { tagged: true, last, opcode, stag: dv.getUint32(at + O.stagOrQn.offset, true), to: Number(x) }
      : { tagged: false, last, opcode, ulp: dv.getUint32(at + O.ulp.offset, true), qn: dv.getUint32(at + O.stagOrQn.offset, true), msn: Number(x & 0xffff_ffffn), mo: Number(x >> 32n) };
  return { ok: true, value, length: hdrLen, payloadLen: dv.getUint32(at + O.payloadLen.offset, true) };
}

/** A segment: either a valid header + payload length, or arbitrary bytes. */
const segment = fc.oneof(
  fc.record({ hdr: ddpHdr, payload: fc.integer({ min: 0, max: 40 }) }).map(({ hdr, payload }) => {
    const b = new Uint8Array(SLOT);
    const n = R.encodeDdp(hdr, b, 0);
    return b.subarray(0, n + Math.min(payload, SLOT - n));
  }),
  fc.uint8Array({ maxLength: SLOT }),
  // Valid-looking control bytes with random rest: exercises every check, not only the first.
  fc.tuple(fc.constantFrom(0x01, 0x41, 0x81, 0xc1, 0x02, 0xc3), fc.integer({ min: 0, max: 255 }), fc.uint8Array({ minLength: 0, maxLength: 20 }))
    .map(([c0, c1, rest]) => Uint8Array.from([c0, c1, ...rest])),
);

describe('parseDdpBatch (WASM) agrees with decodeDdp (TS)', () => {
  it('on TS-encoded headers and on arbitrary bytes, record by record', () => {
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: MAX }), (segsIn) => {
        const { segs, desc, out } = regions();
        const u8 = new Uint8Array(mem.buffer);
        const dv = new DataView(mem.buffer);
        segsIn.forEach((s, i) => {
          u8.fill(0xee, segs + i * SLOT, segs + (i + 1) * SLOT);
          u8.set(s, segs + i * SLOT);
          dv.setUint32(desc + i * DDP_BATCH_DESC.size + D.ptr.offset, segs + i * SLOT, true);
          dv.setUint32(desc + i * DDP_BATCH_DESC.size + D.len.offset, s.length, true);
        });
        u8.fill(0xaa, out, out + DDP_BATCH_OUT.size * segsIn.length);
        const okCount = k.parseDdpBatch(desc, segsIn.length, out);
        let want = 0;
        segsIn.forEach((s, i) => {
          const ts = R.decodeDdp(u8, segs + i * SLOT, segs + i * SLOT + s.length);
          const { payloadLen, ...wasm } = readRecord(dv, out + i * DDP_BATCH_OUT.size);
          expect(wasm).toEqual(ts);
          if (ts.ok) {
            want++;
            expect(payloadLen).toBe(s.length - ts.length);
            expect(dv.getUint32(out + i * DDP_BATCH_OUT.size + O.payloadPtr.offset, true)).toBe(segs + i * SLOT + ts.length);
          } else {
            // Error records are zero apart from the status, so they compare byte for byte.
            const rec = u8.subarray(out + i * DDP_BATCH_OUT.size + 1, out + (i + 1) * DDP_BATCH_OUT.size);
            expect(rec.every((x) => x === 0)).toBe(true);
          }
        });
        expect(okCount).toBe(want);
      }),
      { numRuns: 200 },
    );
  });
});

describe('buildDdpBatch (WASM) agrees with encodeDdp (TS)', () => {
  it('writes the same bytes and TS decodes them to the same header', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ hdr: ddpHdr, payload: fc.integer({ min: 0, max: 9000 }) }), { minLength: 1, maxLength: MAX }), (items) => {
        const { segs, desc, out: recs } = regions();
        const u8 = new Uint8Array(mem.buffer);
        const dv = new DataView(mem.buffer);
        items.forEach(({ hdr, payload }, i) => {
          const r = recs + i * DDP_BATCH_OUT.size;
          u8.fill(0, r, r + DDP_BATCH_OUT.size);
          dv.setUint8(r + O.flags.offset, (hdr.tagged ? 1 : 0) | (hdr.last ? 2 : 0));
          dv.setUint8(r + O.opcode.offset, hdr.opcode);
          dv.setUint32(r + O.payloadLen.offset, payload, true);
          if (hdr.tagged) {
            dv.setUint32(r + O.stagOrQn.offset, hdr.stag, true);
            dv.setBigUint64(r + O.toOrMsnMo.offset, BigInt(hdr.to), true);
          } else {
            dv.setUint32(r + O.stagOrQn.offset, hdr.qn, true);
            dv.setUint32(r + O.ulp.offset, hdr.ulp, true);
            dv.setBigUint64(r + O.toOrMsnMo.offset, BigInt(hdr.msn) | (BigInt(hdr.mo) << 32n), true);
          }
          dv.setUint32(desc + i * DDP_BATCH_DESC.size + D.ptr.offset, segs + i * SLOT, true);
          dv.setUint32(desc + i * DDP_BATCH_DESC.size + D.len.offset, 0, true);
        });
        const total = k.buildDdpBatch(recs, items.length, desc);
        let want = 0;
        items.forEach(({ hdr, payload }, i) => {
          const ref = new Uint8Array(SLOT);
          const n = R.encodeDdp(hdr, ref, 0);
          want += n;
          expect(u8.slice(segs + i * SLOT, segs + i * SLOT + n)).toEqual(ref.subarray(0, n));
          expect(R.decodeDdp(u8, segs + i * SLOT, segs + i * SLOT + n)).toEqual({ ok: true, value: hdr, length: n });
          expect(dv.getUint32(desc + i * DDP_BATCH_DESC.size + D.len.offset, true)).toBe(n + payload);
        });
        expect(total).toBe(want);
      }),
      { numRuns: 200 },
    );
  });
});
