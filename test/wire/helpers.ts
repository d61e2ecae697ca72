// Shared by the wire tests: every decoder behind one signature, the reference CRC32C, and
// fast-check arbitraries for valid values of every codec.
import fc from 'fast-check';
import { crc32c as nativeCrc32c } from '@node-rs/crc32';
import * as R from '../../src/wire/rdmap.js';
import * as M from '../../src/wire/mpa.js';
import * as U from '../../src/wire/udp.js';
import { OPCODES } from '../../src/wire/spec.js';

/** Independent CRC32C (Rust crate via napi), not sabre's kernel. */
export const refCrc: M.Crc32c = (buf, off, len) => nativeCrc32c(Buffer.from(buf.buffer, buf.byteOffset + off, len)) >>> 0;

export type AnyResult = { ok: true; value: unknown; length: number } | { ok: false; error: string };

export const DECODERS: Record<string, (b: Uint8Array, off: number, end: number) => AnyResult> = {
  ddp: R.decodeDdp,
  readRequest: R.decodeReadRequest,
  readRequestV: R.decodeReadRequestV,
  readComplete: R.decodeReadComplete,
  immediateData: R.decodeImmediateData,
  atomicRequest: R.decodeAtomicRequest,
  atomicResponse: R.decodeAtomicResponse,
  terminate: R.decodeTerminate,
  mpaFrame: M.decodeMpaFrame,
  mpaV2Private: M.decodeMpaV2Private,
  mpaMarker: M.decodeMarker,
  fpdu: (b, o, e) => M.openFpdu(b, o, e, refCrc),
  fpduNoCrc: (b, o, e) => M.openFpdu(b, o, e),
  udpHdr: U.decodeUdpHdr,
  udpDatagram: (b, o, e) => U.openUdpDatagram(b, o, e, refCrc),
};

/** A decoder's answer must be well-formed whatever it was fed. */
export function wellFormed(r: AnyResult, off: number, end: number): boolean {
  if (r.ok) return Number.isInteger(r.length) && r.length > 0 && r.length <= end - off;
  return typeof r.error === 'string' && /^[A-Z_]+$/.test(r.error);
}

export const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
export const safeTo = fc.oneof(fc.integer({ min: 0, max: 0xffff_ffff }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }));
export const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });

const taggedOps = OPCODES.filter((o) => o.tagged).map((o) => o.code);
const untaggedOps = OPCODES.filter((o) => !o.tagged).map((o) => o.code);

export const taggedHdr: fc.Arbitrary<R.TaggedHdr> = fc.record({
  tagged: fc.constant(true as const), last: fc.boolean(), opcode: fc.constantFrom(...taggedOps), stag: u32, to: safeTo,
});
export const untaggedHdr: fc.Arbitrary<R.UntaggedHdr> = fc.record({
  tagged: fc.constant(false as const), last: fc.boolean(), opcode: fc.constantFrom(...untaggedOps), ulp: u32, qn: u32, msn: u32, mo: u32,
});
export const ddpHdr: fc.Arbitrary<R.DdpHdr> = fc.oneof(taggedHdr, untaggedHdr);

export const readRequest: fc.Arbitrary<R.ReadRequest> = fc.record({ sinkStag: u32, sinkTo: safeTo, size: u32, srcStag: u32, srcTo: safeTo });

const entry = (maxLen: number) => fc.record({ stag: u32, to: safeTo, len: fc.integer({ min: 0, max: maxLen }) });
/** Source and sink lists with equal totals: sinks are a re-split of the same total. */
export const readRequestV: fc.Arbitrary<R.ReadRequestV> = fc
  .tuple(fc.array(entry(1 << 20), { minLength: 1, maxLength: 12 }), fc.array(fc.record({ stag: u32, to: safeTo }), { minLength: 1, maxLength: 12 }), fc.array(fc.nat(), { minLength: 12, maxLength: 12 }))
  .map(([srcs, sinkKeys, cuts]) => {
    const total = srcs.reduce((s, e) => s + e.len, 0);
    const marks = cuts.slice(0, sinkKeys.length - 1).map((c) => (total === 0 ? 0 : c % (total + 1))).sort((a, b) => a - b);
    const bounds = [0, ...marks, total];
    const sinks = sinkKeys.map((k, i) => ({ ...k, len: bounds[i + 1]! - bounds[i]! }));
    return { srcs, sinks };
  });

export const pair = fc.record({ imm: u32, len: u32 });

export const atomicRequest: fc.Arbitrary<R.AtomicRequest> = fc.record({
  op: fc.constantFrom('fetchAdd' as const, 'cmpSwap' as const), reqId: u32, stag: u32, to: safeTo,
  addOrSwap: u64, addOrSwapMask: u64, compare: u64, compareMask: u64,
});
export const atomicResponse: fc.Arbitrary<R.AtomicResponse> = fc.record({ reqId: u32, value: u64 });

export const terminate: fc.Arbitrary<R.Terminate> = fc
  .record({
    layer: fc.integer({ min: 0, max: 15 }), etype: fc.integer({ min: 0, max: 15 }), ecode: fc.integer({ min: 0, max: 255 }),
    m: fc.boolean(), d: fc.boolean(), r: fc.boolean(), copiedTagged: fc.boolean(), seed: fc.uint8Array({ minLength: 48, maxLength: 48 }),
  })
  .map(({ copiedTagged, seed, ...t }) => {
    const n = (t.d ? 2 + (copiedTagged ? 14 : 18) : 0) + (t.r ? 28 : 0);
    const copy = seed.slice(0, n);
    if (t.d) copy[2] = copiedTagged ? copy[2]! | 0x80 : copy[2]! & 0x7f;
    return n > 0 ? { ...t, hdrCopy: copy } : t;
  });

export const mpaFrame: fc.Arbitrary<M.MpaFrame> = fc.record({
  reply: fc.boolean(), markers: fc.boolean(), crc: fc.boolean(), reject: fc.boolean(), enhanced: fc.boolean(),
  revision: fc.constantFrom(1, 2), privateData: fc.uint8Array({ maxLength: 512 }),
});

export const mpaV2: fc.Arbitrary<M.MpaV2Private> = fc.record({
  p2p: fc.boolean(), zeroLenSendRtr: fc.boolean(), writeRtr: fc.boolean(), readRtr: fc.boolean(),
  ird: fc.integer({ min: 0, max: 0x3fff }), ord: fc.integer({ min: 0, max: 0x3fff }),
});

export const udpHdr: fc.Arbitrary<U.UdpHdr> = fc.record(
  {
    type: fc.constantFrom(1 as const, 2 as const, 3 as const, 4 as const), ackReq: fc.boolean(), retx: fc.boolean(),
    window: fc.integer({ min: 0, max: 0xffff }), srcCtx: u32, dstCtx: u32, psn: u32, ackPsn: u32, tsVal: u32, tsEcr: u32,
    dstQpn: u32, srcQpn: u32, sack: fc.array(fc.record({ start: u32, end: u32 }), { maxLength: 8 }),
    cookie: fc.record({ time: u32, mac: fc.uint8Array({ minLength: 8, maxLength: 8 }) }),
    token: fc.uint8Array({ minLength: 8, maxLength: 8 }),
  },
  { requiredKeys: ['type', 'ackReq', 'retx', 'window', 'srcCtx', 'dstCtx', 'psn', 'ackPsn', 'tsVal', 'tsEcr', 'dstQpn', 'srcQpn', 'sack'] },
);
