// Direct placement (M3) and scatter/gather copy over the device's shared memory.
//
// Both kernels check every descriptor against the region table before a single byte of it
// moves, and a failing descriptor is reported, never executed: a peer can only ever write
// inside what it was granted. The bounds test is written so it cannot overflow:
//   off = to - base            (only after to >= base)
//   ok  = off <= rlen && len <= rlen - off
// which is [to, to+len) ⊆ [base, base+rlen) with no to+len sum anywhere.
//
// Region table entry (32 bytes, LE; src/dataplane/region-table.ts writes them):
//   +0 base u32, +4 length u32, +8 stag u32 (0 = free), +12 pd u32, +16 access u32,
//   +20 flags u32 (bit0 EXTERNAL), +24 iova lo, +28 iova hi (reserved)
// Entry index = stag >>> 8.

// @ts-ignore: decorator
@inline const ENTRY_SHIFT: u32 = 5;
// @ts-ignore: decorator
@inline const FLAG_EXTERNAL: u32 = 1;

// Place statuses (shared with src/dataplane/region-table.ts PlaceStatus).
// @ts-ignore: decorator
@inline const PLACED: u32 = 0;
// @ts-ignore: decorator
@inline const INVALID_STAG: u32 = 1;
// @ts-ignore: decorator
@inline const PD_MISMATCH: u32 = 2;
// @ts-ignore: decorator
@inline const ACCESS: u32 = 3;
// @ts-ignore: decorator
@inline const BOUNDS: u32 = 4;
// @ts-ignore: decorator
@inline const INDIRECT: u32 = 5;
// @ts-ignore: decorator
@inline const SRC_FAULT: u32 = 6;

/**
 * Direct placement of a batch of tagged segments.
 *
 * PlaceDesc, 32 bytes, LE:
 *   +0 src u32 (payload address), +4 len u32, +8 stag u32, +12 pd u32,
 *   +16 to u64 (absolute target address), +24 access u32 (required Access bits), +28 tag u32
 * Amended-metadata record written per desc at outPtr (16 bytes):
 *   +0 tag u32, +4 status u32, +8 len u32, +12 stag u32
 * Checks, in order: stag (index in range, entry stag equal and nonzero) → pd → access →
 * bounds → EXTERNAL (valid but not in device memory: INDIRECT, the caller copies).
 * SRC_FAULT (6): the payload range itself lies outside the memory (a caller bug; reported
 * instead of trapping half-way through a batch).
 * Returns the number of PLACED descriptors.
 */
export function place(descPtr: usize, count: u32, tablePtr: usize, tableEntries: u32, outPtr: usize): u32 {
  // Memory only grows, so a size taken once is a safe (conservative) limit for the batch.
  const memBytes: u64 = <u64>memory.size() << 16;
  let placed: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const d = descPtr + (<usize>i << 5);
    const src = load<u32>(d, 0);
    const len = load<u32>(d, 4);
    const stag = load<u32>(d, 8);
    const to = load<u64>(d, 16);
    let status = INVALID_STAG;
    const idx = stag >>> 8;
    if (idx < tableEntries && stag != 0) {
      const e = tablePtr + (<usize>idx << ENTRY_SHIFT);
      if (load<u32>(e, 8) != stag) {
        status = INVALID_STAG;
      } else if (load<u32>(e, 12) != load<u32>(d, 12)) {
        status = PD_MISMATCH;
      } else {
        const need = load<u32>(d, 24);
        const rlen = <u64>load<u32>(e, 4);
        const base = <u64>load<u32>(e, 0);
        if ((load<u32>(e, 16) & need) != need) {
          status = ACCESS;
        } else if (to < base || to - base > rlen || <u64>len > rlen - (to - base)) {
          status = BOUNDS;
        } else if (load<u32>(e, 20) & FLAG_EXTERNAL) {
          status = INDIRECT;
        } else if (<u64>src + <u64>len > memBytes) {
          status = SRC_FAULT;
        } else {
          memory.copy(<usize>to, <usize>src, <usize>len);
          status = PLACED;
          placed++;
        }
      }
    }
    const o = outPtr + (<usize>i << 4);
    store<u32>(o, load<u32>(d, 28), 0);
    store<u32>(o, status, 4);
    store<u32>(o, len, 8);
    store<u32>(o, stag, 12);
  }
  return placed;
}

// sgCopy statuses (src/dataplane/region-table.ts SgStatus).
// @ts-ignore: decorator
@inline const SG_OK: u32 = 0;
// @ts-ignore: decorator
@inline const SG_SRC_ENTRY: u32 = 1;
// @ts-ignore: decorator
@inline const SG_DST_ENTRY: u32 = 2;
// @ts-ignore: decorator
@inline const SG_SRC_BOUNDS: u32 = 3;
// @ts-ignore: decorator
@inline const SG_DST_BOUNDS: u32 = 4;

/** [p, p+len) inside entry e (u32 math; no sum can overflow). */
// @ts-ignore: decorator
@inline function inside(e: usize, p: u32, len: u32): bool {
  const base = load<u32>(e, 0);
  const rlen = load<u32>(e, 4);
  return p >= base && p - base <= rlen && len <= rlen - (p - base);
}

/**
 * Batch scatter/gather copy between registered regions.
 *
 * SgDesc, 32 bytes, LE:
 *   +0 src u32, +4 dst u32, +8 len u32, +12 srcIdx u32, +16 dstIdx u32, +20..31 reserved
 * The src range must lie in region table entry srcIdx and the dst range in entry dstIdx; an
 * entry is usable iff idx < tableEntries and its stag is nonzero (bounds only: pd and access
 * are the caller's business, it already checked the work request's keys).
 * One u32 status per desc at outStatusPtr: 0 OK, 1 SRC_ENTRY, 2 DST_ENTRY, 3 SRC_BOUNDS,
 * 4 DST_BOUNDS. Descriptors run in order; overlapping ranges copy as memmove.
 * Returns the number of descriptors executed.
 */
export function sgCopy(descPtr: usize, count: u32, tablePtr: usize, tableEntries: u32, outStatusPtr: usize): u32 {
  let done: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const d = descPtr + (<usize>i << 5);
    const src = load<u32>(d, 0);
    const dst = load<u32>(d, 4);
    const len = load<u32>(d, 8);
    const si = load<u32>(d, 12);
    const di = load<u32>(d, 16);
    const se = tablePtr + (<usize>si << ENTRY_SHIFT);
    const de = tablePtr + (<usize>di << ENTRY_SHIFT);
    let status: u32;
    if (si >= tableEntries || load<u32>(se, 8) == 0) status = SG_SRC_ENTRY;
    else if (di >= tableEntries || load<u32>(de, 8) == 0) status = SG_DST_ENTRY;
    else if (!inside(se, src, len)) status = SG_SRC_BOUNDS;
    else if (!inside(de, dst, len)) status = SG_DST_BOUNDS;
    else {
      memory.copy(<usize>dst, <usize>src, <usize>len);
      status = SG_OK;
      done++;
    }
    store<u32>(outStatusPtr + (<usize>i << 2), status);
  }
  return done;
}
