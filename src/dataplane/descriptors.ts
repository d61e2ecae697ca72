// Writing and reading the records the data-plane kernels exchange with TypeScript: placement
// descriptors and their amended-metadata records (place), scatter/gather descriptors (sgCopy)
// and CRC32C batch descriptors (crc32cBatch). Offsets and sizes come from src/wire/spec.ts —
// the kernels read the same layouts through assembly/wire.gen.ts — so neither side keeps a
// copy of its own. Little-endian, as the kernels load them.
import { CRC_BATCH_DESC, PLACE_DESC, PLACE_OUT, PlaceStatus, SG_DESC, SgStatus } from '../wire/spec.js';

export { PlaceStatus, SgStatus };

export const PLACE_DESC_BYTES = PLACE_DESC.size;
export const PLACE_OUT_BYTES = PLACE_OUT.size;
export const SG_DESC_BYTES = SG_DESC.size;
/** One u32 status per SgDesc. */
export const SG_OUT_BYTES = 4;
export const CRC_DESC_BYTES = CRC_BATCH_DESC.size;

const PD = PLACE_DESC.fields;
const PO = PLACE_OUT.fields;
const SD = SG_DESC.fields;
const CD = CRC_BATCH_DESC.fields;
const TO = PD.to.offset;

export interface PlaceDesc {
  src: number;
  len: number;
  stag: number;
  pd: number;
  /** Absolute target address (TO); a bigint reaches the full u64 range. */
  to: number | bigint;
  access: number;
  tag: number;
}

export interface SgDesc {
  src: number;
  dst: number;
  len: number;
  srcIdx: number;
  dstIdx: number;
}

export interface PlaceResult {
  tag: number;
  status: number;
  len: number;
  stag: number;
}

/** The placement hot path: one descriptor from plain numbers (no object per segment). */
export function putPlaceDesc(dv: DataView, addr: number, src: number, len: number, stag: number, pd: number, to: number, access: number, tag: number): void {
  dv.setUint32(addr + PD.src.offset, src, true);
  dv.setUint32(addr + PD.len.offset, len, true);
  dv.setUint32(addr + PD.stag.offset, stag, true);
  dv.setUint32(addr + PD.pd.offset, pd, true);
  dv.setUint32(addr + TO, to % 2 ** 32, true);
  dv.setUint32(addr + TO + 4, Math.floor(to / 2 ** 32), true);
  dv.setUint32(addr + PD.access.offset, access, true);
  dv.setUint32(addr + PD.tag.offset, tag, true);
}

export function writePlaceDesc(dv: DataView, addr: number, d: PlaceDesc): void {
  if (typeof d.to === 'bigint') {
    putPlaceDesc(dv, addr, d.src, d.len, d.stag, d.pd, 0, d.access, d.tag);
    dv.setBigUint64(addr + TO, d.to, true);
  } else putPlaceDesc(dv, addr, d.src, d.len, d.stag, d.pd, d.to, d.access, d.tag);
}

/** Source address of the descriptor at addr. */
export const placeDescSrc = (dv: DataView, addr: number): number => dv.getUint32(addr + PD.src.offset, true);
export const placeOutTag = (dv: DataView, addr: number): number => dv.getUint32(addr + PO.tag.offset, true);
export const placeOutStatus = (dv: DataView, addr: number): number => dv.getUint32(addr + PO.status.offset, true);

export function readPlaceOut(dv: DataView, addr: number): PlaceResult {
  return {
    tag: placeOutTag(dv, addr),
    status: placeOutStatus(dv, addr),
    len: dv.getUint32(addr + PO.len.offset, true),
    stag: dv.getUint32(addr + PO.stag.offset, true),
  };
}

export function writeSgDesc(dv: DataView, addr: number, d: SgDesc): void {
  dv.setUint32(addr + SD.src.offset, d.src, true);
  dv.setUint32(addr + SD.dst.offset, d.dst, true);
  dv.setUint32(addr + SD.len.offset, d.len, true);
  dv.setUint32(addr + SD.srcIdx.offset, d.srcIdx, true);
  dv.setUint32(addr + SD.dstIdx.offset, d.dstIdx, true);
  for (let o = SD.rsvd.offset; o < SD.rsvd.offset + SD.rsvd.size; o += 4) dv.setUint32(addr + o, 0, true);
}

/** A crc32cBatch descriptor: CRC32C of [ptr, ptr+len) continuing from `previous`. */
export function writeCrcDesc(dv: DataView, addr: number, ptr: number, len: number, previous: number): void {
  dv.setUint32(addr + CD.ptr.offset, ptr, true);
  dv.setUint32(addr + CD.len.offset, len, true);
  dv.setUint32(addr + CD.previous.offset, previous >>> 0, true);
  dv.setUint32(addr + CD.out.offset, 0, true);
}

export const crcDescPtr = (dv: DataView, addr: number): number => dv.getUint32(addr + CD.ptr.offset, true);
export const crcDescLen = (dv: DataView, addr: number): number => dv.getUint32(addr + CD.len.offset, true);
/** The result the kernel wrote into the descriptor at addr. */
export const crcDescOut = (dv: DataView, addr: number): number => dv.getUint32(addr + CD.out.offset, true);
