// Descriptor layouts of the placement and scatter/gather kernels (assembly/sgcopy.ts is the
// other half; the two are kept in step by test/dataplane/place.test.ts).

/** PlaceDesc: +0 src u32, +4 len u32, +8 stag u32, +12 pd u32, +16 to u64, +24 access u32, +28 tag u32. */
export const PLACE_DESC_BYTES = 32;
/** Amended-metadata record: +0 tag u32, +4 status u32, +8 len u32, +12 stag u32. */
export const PLACE_OUT_BYTES = 16;
/** SgDesc: +0 src u32, +4 dst u32, +8 len u32, +12 srcIdx u32, +16 dstIdx u32, +20..31 reserved. */
export const SG_DESC_BYTES = 32;
/** One u32 status per SgDesc. */
export const SG_OUT_BYTES = 4;

export const PlaceStatus = {
  Placed: 0,
  /** Index out of range, entry free, or STag (key byte) mismatch. */
  InvalidStag: 1,
  PdMismatch: 2,
  /** The region lacks a required Access bit. */
  Access: 3,
  /** [to, to+len) not inside the region. */
  Bounds: 4,
  /** Valid, but the region is EXTERNAL (outside device memory): the caller places it in software. */
  Indirect: 5,
  /** The payload range [src, src+len) lies outside the memory (caller bug; nothing written). */
  SrcFault: 6,
} as const;

export const SgStatus = {
  Ok: 0,
  SrcEntry: 1,
  DstEntry: 2,
  SrcBounds: 3,
  DstBounds: 4,
} as const;

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

export function writePlaceDesc(dv: DataView, addr: number, d: PlaceDesc): void {
  dv.setUint32(addr, d.src, true);
  dv.setUint32(addr + 4, d.len, true);
  dv.setUint32(addr + 8, d.stag, true);
  dv.setUint32(addr + 12, d.pd, true);
  if (typeof d.to === 'bigint') dv.setBigUint64(addr + 16, d.to, true);
  else {
    dv.setUint32(addr + 16, d.to % 2 ** 32, true);
    dv.setUint32(addr + 20, Math.floor(d.to / 2 ** 32), true);
  }
  dv.setUint32(addr + 24, d.access, true);
  dv.setUint32(addr + 28, d.tag, true);
}

export interface PlaceResult {
  tag: number;
  status: number;
  len: number;
  stag: number;
}

export function readPlaceOut(dv: DataView, addr: number): PlaceResult {
  return {
    tag: dv.getUint32(addr, true),
    status: dv.getUint32(addr + 4, true),
    len: dv.getUint32(addr + 8, true),
    stag: dv.getUint32(addr + 12, true),
  };
}

export function writeSgDesc(dv: DataView, addr: number, d: SgDesc): void {
  dv.setUint32(addr, d.src, true);
  dv.setUint32(addr + 4, d.dst, true);
  dv.setUint32(addr + 8, d.len, true);
  dv.setUint32(addr + 12, d.srcIdx, true);
  dv.setUint32(addr + 16, d.dstIdx, true);
  dv.setUint32(addr + 20, 0, true);
  dv.setUint32(addr + 24, 0, true);
  dv.setUint32(addr + 28, 0, true);
}
