// Direct placement (M3) and scatter/gather copy over the device's shared memory.
//
// Both kernels check every descriptor against the region table before a single byte of it
// moves, and a failing descriptor is reported, never executed: a peer can only ever write
// inside what it was granted. The bounds test is written so it cannot overflow:
//   off = to - base            (only after to >= base)
//   ok  = off <= rlen && len <= rlen - off
// which is [to, to+len) ⊆ [base, base+rlen) with no to+len sum anywhere.
//
// Every record layout (region table entry, placement descriptor, amended-metadata record,
// scatter/gather descriptor) and every status code comes from src/wire/spec.ts through the
// generated accessors of wire.gen.ts; docs/wire.md ("Data-plane records") draws them.
import {
  PLACE_DESC_SIZE, PLACE_OUT_SIZE, PLACE_SRC_CALLER, PLACE_STATUS_ACCESS, PLACE_STATUS_BOUNDS,
  PLACE_STATUS_CALLER_COPIES, PLACE_STATUS_CALLER_COPIES_HASHED, PLACE_STATUS_INDIRECT,
  PLACE_STATUS_INVALID_STAG, PLACE_STATUS_PD_MISMATCH, PLACE_STATUS_PLACED, PLACE_STATUS_SRC_FAULT,
  REGION_ENTRY_FLAGS_EXTERNAL, REGION_ENTRY_SIZE, SG_DESC_SIZE, SG_STATUS_DST_BOUNDS, SG_STATUS_DST_ENTRY,
  SG_STATUS_OK, SG_STATUS_SRC_BOUNDS, SG_STATUS_SRC_ENTRY,
  getPlaceDescAccess, getPlaceDescLen, getPlaceDescPd, getPlaceDescSrc, getPlaceDescStag, getPlaceDescTag,
  getPlaceDescTo, getRegionEntryAccess, getRegionEntryBase, getRegionEntryFlags, getRegionEntryLength,
  getRegionEntryHashDir, getRegionEntryPd, getRegionEntryStag, getSgDescDst, getSgDescDstIdx, getSgDescLen, getSgDescSrc,
  getSgDescSrcIdx, setPlaceOutLen, setPlaceOutStag, setPlaceOutStatus, setPlaceOutTag,
} from './wire.gen';
import { chunkHashZone } from './chunkhash';

/**
 * Direct placement of a batch of tagged segments: `count` placeDesc records at descPtr, one
 * placeOut (amended-metadata) record per descriptor at outPtr.
 * Checks, in order: stag (index in range, entry stag equal and nonzero) → pd → access →
 * bounds → EXTERNAL (valid but not in device memory: INDIRECT, the caller copies).
 * src PLACE_SRC_CALLER: the payload is outside device memory (node's datagram buffer); a
 * descriptor that passes every check comes back CALLER_COPIES (or _HASHED for a hash-tracked
 * landing zone, whose caller then runs placedHash) and the caller copies it — one copy where
 * staging it here first would make two.
 * SRC_FAULT: the payload range itself lies outside the memory (a caller bug; reported instead
 * of trapping half-way through a batch).
 * Returns the number of PLACED descriptors.
 */
export function place(descPtr: usize, count: u32, tablePtr: usize, tableEntries: u32, outPtr: usize): u32 {
  // Memory only grows, so a size taken once is a safe (conservative) limit for the batch.
  const memBytes: u64 = <u64>memory.size() << 16;
  let placed: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const d = descPtr + <usize>i * PLACE_DESC_SIZE;
    const src = getPlaceDescSrc(d);
    const len = getPlaceDescLen(d);
    const stag = getPlaceDescStag(d);
    const to = getPlaceDescTo(d);
    let status = PLACE_STATUS_INVALID_STAG;
    const idx = stag >>> 8;
    if (idx < tableEntries && stag != 0) {
      const e = tablePtr + <usize>idx * REGION_ENTRY_SIZE;
      if (getRegionEntryStag(e) != stag) {
        status = PLACE_STATUS_INVALID_STAG;
      } else if (getRegionEntryPd(e) != getPlaceDescPd(d)) {
        status = PLACE_STATUS_PD_MISMATCH;
      } else {
        const need = getPlaceDescAccess(d);
        const rlen = <u64>getRegionEntryLength(e);
        const base = <u64>getRegionEntryBase(e);
        if ((getRegionEntryAccess(e) & need) != need) {
          status = PLACE_STATUS_ACCESS;
        } else if (to < base || to - base > rlen || <u64>len > rlen - (to - base)) {
          status = PLACE_STATUS_BOUNDS;
        } else if (getRegionEntryFlags(e) & REGION_ENTRY_FLAGS_EXTERNAL) {
          status = PLACE_STATUS_INDIRECT;
        } else if (src == PLACE_SRC_CALLER) {
          status = getRegionEntryHashDir(e) != 0 ? PLACE_STATUS_CALLER_COPIES_HASHED : PLACE_STATUS_CALLER_COPIES;
        } else if (<u64>src + <u64>len > memBytes) {
          status = PLACE_STATUS_SRC_FAULT;
        } else {
          memory.copy(<usize>to, <usize>src, <usize>len);
          status = PLACE_STATUS_PLACED;
          placed++;
          // In-band dedup hashing (docs/dedup.md "Hooking into place()"): a hash-tracked landing
          // zone advances its chunks' hashes over the bytes just placed, still in cache. Every
          // other region pays this one load and branch.
          const dir = getRegionEntryHashDir(e);
          if (dir != 0) chunkHashZone(<usize>dir, <usize>to, len);
        }
      }
    }
    const o = outPtr + <usize>i * PLACE_OUT_SIZE;
    setPlaceOutTag(o, getPlaceDescTag(d));
    setPlaceOutStatus(o, status);
    setPlaceOutLen(o, len);
    setPlaceOutStag(o, stag);
  }
  return placed;
}

/**
 * After the caller copied a CALLER_COPIES_HASHED descriptor's payload to [to, to+len): advance
 * the landing zone's chunk hashes over it, as place() does after its own copy. The entry is
 * looked up again (same stag check); a stale or unhashed one does nothing. Returns
 * chunkHashZone's result, 0 when nothing was hashed.
 */
export function placedHash(tablePtr: usize, tableEntries: u32, stag: u32, to: usize, len: u32): u32 {
  const idx = stag >>> 8;
  if (idx >= tableEntries || stag == 0) return 0;
  const e = tablePtr + <usize>idx * REGION_ENTRY_SIZE;
  if (getRegionEntryStag(e) != stag) return 0;
  const dir = getRegionEntryHashDir(e);
  return dir != 0 ? chunkHashZone(<usize>dir, to, len) : 0;
}

/** [p, p+len) inside region table entry e (u32 math; no sum can overflow). */
// @ts-ignore: decorator
@inline function inside(e: usize, p: u32, len: u32): bool {
  const base = getRegionEntryBase(e);
  const rlen = getRegionEntryLength(e);
  return p >= base && p - base <= rlen && len <= rlen - (p - base);
}

/**
 * Batch scatter/gather copy between registered regions: `count` sgDesc records at descPtr.
 * The src range must lie in region table entry srcIdx and the dst range in entry dstIdx; an
 * entry is usable iff idx < tableEntries and its stag is nonzero (bounds only: pd and access
 * are the caller's business, it already checked the work request's keys).
 * One u32 SgStatus per desc at outStatusPtr. Descriptors run in order; overlapping ranges
 * copy as memmove. Returns the number of descriptors executed.
 */
export function sgCopy(descPtr: usize, count: u32, tablePtr: usize, tableEntries: u32, outStatusPtr: usize): u32 {
  let done: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const d = descPtr + <usize>i * SG_DESC_SIZE;
    const src = getSgDescSrc(d);
    const dst = getSgDescDst(d);
    const len = getSgDescLen(d);
    const si = getSgDescSrcIdx(d);
    const di = getSgDescDstIdx(d);
    const se = tablePtr + <usize>si * REGION_ENTRY_SIZE;
    const de = tablePtr + <usize>di * REGION_ENTRY_SIZE;
    let status: u32;
    if (si >= tableEntries || getRegionEntryStag(se) == 0) status = SG_STATUS_SRC_ENTRY;
    else if (di >= tableEntries || getRegionEntryStag(de) == 0) status = SG_STATUS_DST_ENTRY;
    else if (!inside(se, src, len)) status = SG_STATUS_SRC_BOUNDS;
    else if (!inside(de, dst, len)) status = SG_STATUS_DST_BOUNDS;
    else {
      memory.copy(<usize>dst, <usize>src, <usize>len);
      status = SG_STATUS_OK;
      done++;
    }
    store<u32>(outStatusPtr + (<usize>i << 2), status);
  }
  return done;
}
