// Codec of the dedup transfer messages (layouts dedupMsg … dedupAbort in src/wire/dedup-spec.ts, byte
// by byte in docs/wire.md). decode() checks lengths and counts before it reads a byte of a tail,
// and throws DedupMalformed (never anything else) on bytes that do not parse.
import { ErrorCode, SabreError } from '../core/errors.js';
import {
  DEDUP_ABORT, DEDUP_END, DEDUP_ENTRY, DEDUP_GRANT, DEDUP_HASH_BYTES, DEDUP_HELLO, DEDUP_MSG, DEDUP_NEED, DEDUP_OFFER,
  DEDUP_FLAG_LAST, DEDUP_ROUND, DEDUP_VERSION, DedupKind,
} from '../wire/dedup-spec.js';

export const KEY_BYTES = 32;

export interface Hello {
  kind: typeof DedupKind.Hello;
  hashAlg: number;
  normalization: number;
  avg: number;
  min: number;
  max: number;
  zoneAddr: number;
  zoneRkey: number;
  slotLen: number;
  slots: number;
  maxEntries: number;
  maxChunks: number;
  seed: bigint;
  key: Uint8Array;
}
export interface Offer {
  kind: typeof DedupKind.Offer;
  xfer: number;
  total: number;
  /** The last page of the manifest (flags.Last). */
  last: boolean;
  /** On the last page, the object's chunk count (first + count); else 0. */
  chunks: number;
  first: number;
  count: number;
  /** count entries: lengths, and the 32-byte hash records end to end. */
  lens: Uint32Array;
  hashes: Uint8Array;
}
export interface Need { kind: typeof DedupKind.Need; xfer: number; first: number; count: number; bitmap: Uint8Array }
export interface Round { kind: typeof DedupKind.Round; xfer: number; slot: number; first: number; count: number; bytes: number }
export interface Grant { kind: typeof DedupKind.Grant; xfer: number; slot: number }
export interface End { kind: typeof DedupKind.End; xfer: number; status: number; detail: number; total: number }
export interface Abort { kind: typeof DedupKind.Abort; xfer: number; status: number }
export type DedupMessage = Hello | Offer | Need | Round | Grant | End | Abort;

/** One error class for sabre: a dedup message that does not parse is a SabreError (ERR_MALFORMED). */
export class DedupMalformed extends SabreError {
  constructor(msg: string) {
    super(ErrorCode.Malformed, `dedup: malformed message: ${msg}`);
    this.name = 'DedupMalformed';
  }
}

const HDR = DEDUP_MSG.size;
const M = DEDUP_MSG.fields;

function frame(kind: number, xfer: number, body: number, flags = 0): [Uint8Array, DataView] {
  const b = new Uint8Array(HDR + body);
  const dv = new DataView(b.buffer);
  dv.setUint8(M.kind.offset, kind);
  dv.setUint8(M.version.offset, DEDUP_VERSION);
  dv.setUint16(M.flags.offset, flags);
  dv.setUint32(M.xfer.offset, xfer >>> 0);
  return [b, dv];
}

const setU64 = (dv: DataView, at: number, v: number | bigint): void => dv.setBigUint64(at, BigInt(v));

export function encode(m: DedupMessage): Uint8Array {
  switch (m.kind) {
    case DedupKind.Hello: {
      const F = DEDUP_HELLO.fields;
      const [b, dv] = frame(m.kind, 0, DEDUP_HELLO.size + KEY_BYTES);
      const o = HDR;
      dv.setUint8(o + F.hashAlg.offset, m.hashAlg);
      dv.setUint8(o + F.normalization.offset, m.normalization);
      dv.setUint32(o + F.avg.offset, m.avg);
      dv.setUint32(o + F.min.offset, m.min);
      dv.setUint32(o + F.max.offset, m.max);
      setU64(dv, o + F.zoneAddr.offset, m.zoneAddr);
      dv.setUint32(o + F.zoneRkey.offset, m.zoneRkey);
      dv.setUint32(o + F.slotLen.offset, m.slotLen);
      dv.setUint32(o + F.slots.offset, m.slots);
      dv.setUint32(o + F.maxEntries.offset, m.maxEntries);
      dv.setUint32(o + F.maxChunks.offset, m.maxChunks);
      dv.setUint32(o + F.seedHi.offset, Number((m.seed >> 32n) & 0xffffffffn));
      dv.setUint32(o + F.seedLo.offset, Number(m.seed & 0xffffffffn));
      b.set(m.key.subarray(0, KEY_BYTES), o + DEDUP_HELLO.size);
      return b;
    }
    case DedupKind.Offer: {
      const F = DEDUP_OFFER.fields;
      const E = DEDUP_ENTRY.fields;
      const [b, dv] = frame(m.kind, m.xfer, DEDUP_OFFER.size + m.count * DEDUP_ENTRY.size, m.last ? DEDUP_FLAG_LAST : 0);
      const o = HDR;
      setU64(dv, o + F.total.offset, m.total);
      dv.setUint32(o + F.chunks.offset, m.chunks);
      dv.setUint32(o + F.first.offset, m.first);
      dv.setUint32(o + F.count.offset, m.count);
      for (let i = 0; i < m.count; i++) {
        const e = o + DEDUP_OFFER.size + i * DEDUP_ENTRY.size;
        dv.setUint32(e + E.len.offset, m.lens[i]!);
        b.set(m.hashes.subarray(i * DEDUP_HASH_BYTES, (i + 1) * DEDUP_HASH_BYTES), e + E.hash.offset);
      }
      return b;
    }
    case DedupKind.Need: {
      const F = DEDUP_NEED.fields;
      const [b, dv] = frame(m.kind, m.xfer, DEDUP_NEED.size + ((m.count + 7) >> 3));
      dv.setUint32(HDR + F.first.offset, m.first);
      dv.setUint32(HDR + F.count.offset, m.count);
      b.set(m.bitmap.subarray(0, (m.count + 7) >> 3), HDR + DEDUP_NEED.size);
      return b;
    }
    case DedupKind.Round: {
      const F = DEDUP_ROUND.fields;
      const [b, dv] = frame(m.kind, m.xfer, DEDUP_ROUND.size);
      dv.setUint32(HDR + F.slot.offset, m.slot);
      dv.setUint32(HDR + F.first.offset, m.first);
      dv.setUint32(HDR + F.count.offset, m.count);
      dv.setUint32(HDR + F.bytes.offset, m.bytes);
      return b;
    }
    case DedupKind.Grant: {
      const [b, dv] = frame(m.kind, m.xfer, DEDUP_GRANT.size);
      dv.setUint32(HDR + DEDUP_GRANT.fields.slot.offset, m.slot);
      return b;
    }
    case DedupKind.End: {
      const F = DEDUP_END.fields;
      const [b, dv] = frame(m.kind, m.xfer, DEDUP_END.size);
      dv.setUint32(HDR + F.status.offset, m.status);
      dv.setUint32(HDR + F.detail.offset, m.detail);
      setU64(dv, HDR + F.total.offset, m.total);
      return b;
    }
    case DedupKind.Abort: {
      const [b, dv] = frame(m.kind, m.xfer, DEDUP_ABORT.size);
      dv.setUint32(HDR + DEDUP_ABORT.fields.status.offset, m.status);
      return b;
    }
  }
}

function need(b: Uint8Array, n: number, what: string): void {
  if (b.length < n) throw new DedupMalformed(`${what} needs ${n} bytes, got ${b.length}`);
}

function u64(dv: DataView, at: number, what: string): number {
  const v = dv.getBigUint64(at);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new DedupMalformed(`${what} out of range`);
  return Number(v);
}

/**
 * An OFFER's transfer and the bytes of the chunks it lists (its entries' lengths summed), read
 * without decoding the page; undefined for any other message or one too short for what it says
 * (the receiver's core refuses those when it decodes them).
 */
export function offerSpan(b: Uint8Array): { xfer: number; bytes: number } | undefined {
  if (b.length < HDR + DEDUP_OFFER.size || b[M.kind.offset] !== DedupKind.Offer) return undefined;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const count = dv.getUint32(HDR + DEDUP_OFFER.fields.count.offset);
  if (b.length < HDR + DEDUP_OFFER.size + count * DEDUP_ENTRY.size) return undefined;
  let bytes = 0;
  for (let i = 0, e = HDR + DEDUP_OFFER.size + DEDUP_ENTRY.fields.len.offset; i < count; i++, e += DEDUP_ENTRY.size) bytes += dv.getUint32(e);
  return { xfer: dv.getUint32(M.xfer.offset), bytes };
}

export function decode(b: Uint8Array): DedupMessage {
  need(b, HDR, 'header');
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const kind = dv.getUint8(M.kind.offset);
  if (dv.getUint8(M.version.offset) !== DEDUP_VERSION) throw new DedupMalformed(`version ${dv.getUint8(M.version.offset)}`);
  const xfer = dv.getUint32(M.xfer.offset);
  const flags = dv.getUint16(M.flags.offset);
  const o = HDR;
  switch (kind) {
    case DedupKind.Hello: {
      const F = DEDUP_HELLO.fields;
      need(b, o + DEDUP_HELLO.size + KEY_BYTES, 'HELLO');
      return {
        kind, hashAlg: dv.getUint8(o + F.hashAlg.offset), normalization: dv.getUint8(o + F.normalization.offset),
        avg: dv.getUint32(o + F.avg.offset), min: dv.getUint32(o + F.min.offset), max: dv.getUint32(o + F.max.offset),
        zoneAddr: u64(dv, o + F.zoneAddr.offset, 'zoneAddr'), zoneRkey: dv.getUint32(o + F.zoneRkey.offset),
        slotLen: dv.getUint32(o + F.slotLen.offset), slots: dv.getUint32(o + F.slots.offset),
        maxEntries: dv.getUint32(o + F.maxEntries.offset), maxChunks: dv.getUint32(o + F.maxChunks.offset),
        seed: (BigInt(dv.getUint32(o + F.seedHi.offset)) << 32n) | BigInt(dv.getUint32(o + F.seedLo.offset)),
        key: b.slice(o + DEDUP_HELLO.size, o + DEDUP_HELLO.size + KEY_BYTES),
      };
    }
    case DedupKind.Offer: {
      const F = DEDUP_OFFER.fields;
      const E = DEDUP_ENTRY.fields;
      need(b, o + DEDUP_OFFER.size, 'OFFER');
      const count = dv.getUint32(o + F.count.offset);
      // The count is checked against the bytes before anything proportional to it is allocated.
      need(b, o + DEDUP_OFFER.size + count * DEDUP_ENTRY.size, `OFFER of ${count} entries`);
      const lens = new Uint32Array(count);
      const hashes = new Uint8Array(count * DEDUP_HASH_BYTES);
      for (let i = 0; i < count; i++) {
        const e = o + DEDUP_OFFER.size + i * DEDUP_ENTRY.size;
        lens[i] = dv.getUint32(e + E.len.offset);
        hashes.set(b.subarray(e + E.hash.offset, e + E.hash.offset + DEDUP_HASH_BYTES), i * DEDUP_HASH_BYTES);
      }
      return {
        kind, xfer, total: u64(dv, o + F.total.offset, 'total'), last: (flags & DEDUP_FLAG_LAST) !== 0, chunks: dv.getUint32(o + F.chunks.offset),
        first: dv.getUint32(o + F.first.offset), count, lens, hashes,
      };
    }
    case DedupKind.Need: {
      need(b, o + DEDUP_NEED.size, 'NEED');
      const first = dv.getUint32(o + DEDUP_NEED.fields.first.offset);
      const count = dv.getUint32(o + DEDUP_NEED.fields.count.offset);
      need(b, o + DEDUP_NEED.size + Math.ceil(count / 8), `NEED bitmap of ${count}`);
      return { kind, xfer, first, count, bitmap: b.slice(o + DEDUP_NEED.size, o + DEDUP_NEED.size + Math.ceil(count / 8)) };
    }
    case DedupKind.Round: {
      const F = DEDUP_ROUND.fields;
      need(b, o + DEDUP_ROUND.size, 'ROUND');
      return {
        kind, xfer, slot: dv.getUint32(o + F.slot.offset), first: dv.getUint32(o + F.first.offset),
        count: dv.getUint32(o + F.count.offset), bytes: dv.getUint32(o + F.bytes.offset),
      };
    }
    case DedupKind.Grant:
      need(b, o + DEDUP_GRANT.size, 'GRANT');
      return { kind, xfer, slot: dv.getUint32(o + DEDUP_GRANT.fields.slot.offset) };
    case DedupKind.End: {
      const F = DEDUP_END.fields;
      need(b, o + DEDUP_END.size, 'END');
      return { kind, xfer, status: dv.getUint32(o + F.status.offset), detail: dv.getUint32(o + F.detail.offset), total: u64(dv, o + F.total.offset, 'total') };
    }
    case DedupKind.Abort:
      need(b, o + DEDUP_ABORT.size, 'ABORT');
      return { kind, xfer, status: dv.getUint32(o + DEDUP_ABORT.fields.status.offset) };
    default:
      throw new DedupMalformed(`unknown kind ${kind}`);
  }
}
