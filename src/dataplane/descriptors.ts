// Writing and reading the records the data-plane kernels exchange with TypeScript: placement
// descriptors and their amended-metadata records (place), scatter/gather descriptors (sgCopy)
// and CRC32C batch descriptors (crc32cBatch). Offsets and sizes come from the layouts of
// src/wire/dataplane-spec.ts, through the constants generated from them (fields.gen.ts) — the
// kernels read the same layouts through assembly/wire.gen.ts — so neither side keeps a copy of
// its own. Little-endian, as the kernels load them.
import * as W from '../wire/fields.gen.js';
import { PlaceStatus, SgStatus } from '../wire/spec.js';

export { PlaceStatus, SgStatus };

export const PLACE_DESC_BYTES = W.PLACE_DESC_SIZE;
export const PLACE_OUT_BYTES = W.PLACE_OUT_SIZE;
export const SG_DESC_BYTES = W.SG_DESC_SIZE;
/** One u32 status per SgDesc. */
export const SG_OUT_BYTES = 4;
export const CRC_DESC_BYTES = W.CRC_BATCH_DESC_SIZE;

// Offsets as this module's own consts: V8 folds those into optimised code but loads an imported
// binding, or a property of the spec object, at every use (bench/wire-codec.bench.mjs).
const PD_ACCESS = W.PLACE_DESC_ACCESS_OFF;
const PD_LEN = W.PLACE_DESC_LEN_OFF;
const PD_PD = W.PLACE_DESC_PD_OFF;
const PD_SRC = W.PLACE_DESC_SRC_OFF;
const PD_STAG = W.PLACE_DESC_STAG_OFF;
const PD_TAG = W.PLACE_DESC_TAG_OFF;
const PD_TO = W.PLACE_DESC_TO_OFF;
const PO_LEN = W.PLACE_OUT_LEN_OFF;
const PO_STAG = W.PLACE_OUT_STAG_OFF;
const PO_STATUS = W.PLACE_OUT_STATUS_OFF;
const PO_TAG = W.PLACE_OUT_TAG_OFF;
const SD_DST = W.SG_DESC_DST_OFF;
const SD_DST_IDX = W.SG_DESC_DST_IDX_OFF;
const SD_LEN = W.SG_DESC_LEN_OFF;
const SD_RSVD = W.SG_DESC_RSVD_OFF;
const SD_RSVD_LEN = W.SG_DESC_RSVD_LEN;
const SD_SRC = W.SG_DESC_SRC_OFF;
const SD_SRC_IDX = W.SG_DESC_SRC_IDX_OFF;
const CD_LEN = W.CRC_BATCH_DESC_LEN_OFF;
const CD_OUT = W.CRC_BATCH_DESC_OUT_OFF;
const CD_PREVIOUS = W.CRC_BATCH_DESC_PREVIOUS_OFF;
const CD_PTR = W.CRC_BATCH_DESC_PTR_OFF;

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
  dv.setUint32(addr + PD_SRC, src, true);
  dv.setUint32(addr + PD_LEN, len, true);
  dv.setUint32(addr + PD_STAG, stag, true);
  dv.setUint32(addr + PD_PD, pd, true);
  dv.setUint32(addr + PD_TO, to % 2 ** 32, true);
  dv.setUint32(addr + PD_TO + 4, Math.floor(to / 2 ** 32), true);
  dv.setUint32(addr + PD_ACCESS, access, true);
  dv.setUint32(addr + PD_TAG, tag, true);
}

export function writePlaceDesc(dv: DataView, addr: number, d: PlaceDesc): void {
  if (typeof d.to === 'bigint') {
    putPlaceDesc(dv, addr, d.src, d.len, d.stag, d.pd, 0, d.access, d.tag);
    dv.setBigUint64(addr + PD_TO, d.to, true);
  } else putPlaceDesc(dv, addr, d.src, d.len, d.stag, d.pd, d.to, d.access, d.tag);
}

/** Source address of the descriptor at addr. */
export const placeDescSrc = (dv: DataView, addr: number): number => dv.getUint32(addr + PD_SRC, true);
export const placeOutTag = (dv: DataView, addr: number): number => dv.getUint32(addr + PO_TAG, true);
export const placeOutStatus = (dv: DataView, addr: number): number => dv.getUint32(addr + PO_STATUS, true);

export function readPlaceOut(dv: DataView, addr: number): PlaceResult {
  return {
    tag: placeOutTag(dv, addr),
    status: placeOutStatus(dv, addr),
    len: dv.getUint32(addr + PO_LEN, true),
    stag: dv.getUint32(addr + PO_STAG, true),
  };
}

export function writeSgDesc(dv: DataView, addr: number, d: SgDesc): void {
  dv.setUint32(addr + SD_SRC, d.src, true);
  dv.setUint32(addr + SD_DST, d.dst, true);
  dv.setUint32(addr + SD_LEN, d.len, true);
  dv.setUint32(addr + SD_SRC_IDX, d.srcIdx, true);
  dv.setUint32(addr + SD_DST_IDX, d.dstIdx, true);
  for (let o = SD_RSVD; o < SD_RSVD + SD_RSVD_LEN; o += 4) dv.setUint32(addr + o, 0, true);
}

/** A crc32cBatch descriptor: CRC32C of [ptr, ptr+len) continuing from `previous`. */
export function writeCrcDesc(dv: DataView, addr: number, ptr: number, len: number, previous: number): void {
  dv.setUint32(addr + CD_PTR, ptr, true);
  dv.setUint32(addr + CD_LEN, len, true);
  dv.setUint32(addr + CD_PREVIOUS, previous >>> 0, true);
  dv.setUint32(addr + CD_OUT, 0, true);
}

export const crcDescPtr = (dv: DataView, addr: number): number => dv.getUint32(addr + CD_PTR, true);
export const crcDescLen = (dv: DataView, addr: number): number => dv.getUint32(addr + CD_LEN, true);
/** The result the kernel wrote into the descriptor at addr. */
export const crcDescOut = (dv: DataView, addr: number): number => dv.getUint32(addr + CD_OUT, true);
