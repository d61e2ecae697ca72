// In-band chunk hashing (mechanism M4): a hash-tracked landing zone has a chunk map (header,
// one record per chunk, done list; layouts dedupMapHdr / dedupChunk in src/wire/spec.ts and
// docs/wire.md). Every placed segment advances the XXH3-128 stream of each chunk it touches over
// the contiguous prefix it completes, so a chunk's hash is final the moment its last byte lands,
// with no second pass over the buffer.
//
// Arrival order: a chunk's stream only ever takes the bytes right after its watermark (`mark`),
// so the hash is the hash of the chunk whatever order segments come in. A segment beyond the
// watermark is remembered as an interval (at most DEDUP_PEND_MAX per chunk, merged when they
// touch); when the watermark reaches an interval it is hashed then. The bytes are already in the
// zone, so remembering where they are is all that is needed. A full interval list drops the new
// interval and counts it (overflowCount): that chunk is then finished by chunkMapFinish once the
// caller knows the whole message has landed — a counted fallback, never a wrong hash.
//
// Bytes written again after they were hashed (a peer rewriting a chunk it already sent) taint the
// chunk: it ends as a mismatch, so the receiver never trusts bytes that differ from those it hashed.
//
// Called from place() in the same batch (docs/dedup.md, "Hooking into place()") and from
// data-plane workers: a map is advanced under its own spin lock, so workers may share one.
import { xxh128Digest, xxh128Reset, xxh128Update } from './xxh3';
import {
  DEDUP_ARM_BAD_LAYOUT, DEDUP_ARM_BAD_MAGIC, DEDUP_ARM_OK, DEDUP_CHUNK_FLAG_OVERFLOW, DEDUP_CHUNK_FLAG_TAINTED,
  DEDUP_CHUNK_SIZE, DEDUP_CHUNK_STATUS_MISMATCH, DEDUP_CHUNK_STATUS_OK, DEDUP_CHUNK_STATUS_PENDING,
  DEDUP_CHUNK_DIGEST_OFF, DEDUP_CHUNK_EXPECTED_OFF, DEDUP_CHUNK_PEND_OFF, DEDUP_CHUNK_STATE_OFF,
  DEDUP_HASH_DESC_SIZE, DEDUP_MAP_HDR_LOCK_OFF, DEDUP_MAP_HDR_SIZE, DEDUP_MAP_MAGIC, DEDUP_PEND_MAX,
  getDedupChunkFlags, getDedupChunkLen, getDedupChunkMark, getDedupChunkPendCount,
  getDedupChunkStart, getDedupChunkStatus, getDedupHashDescLen, getDedupHashDescMap, getDedupHashDescTo,
  getDedupMapHdrBytesHashed, getDedupMapHdrChunkCount, getDedupMapHdrDoneCount, getDedupMapHdrMagic,
  getDedupMapHdrMismatchCount, getDedupMapHdrOkCount, getDedupMapHdrOutside, getDedupMapHdrOverflowCount,
  getDedupMapHdrRewriteCount, getDedupMapHdrSeed, getDedupMapHdrSegments, getDedupMapHdrZoneBase,
  getDedupMapHdrZoneLen,
  setDedupChunkFlags, setDedupChunkLanded, setDedupChunkMark, setDedupChunkPendCount, setDedupChunkRsvd,
  setDedupChunkStatus, setDedupMapHdrBytesHashed, setDedupMapHdrDoneCount, setDedupMapHdrMismatchCount,
  setDedupMapHdrOkCount, setDedupMapHdrOutside, setDedupMapHdrOverflowCount, setDedupMapHdrRewriteCount,
  setDedupMapHdrSegments, DEDUP_ZONE_MAGIC, DEDUP_ZONE_DIR_SIZE, getDedupZoneDirMagic, getDedupZoneDirSlots,
  getDedupZoneDirSlotLen, getDedupZoneDirZoneBase,
} from './wire.gen';

// @ts-ignore: decorator
@inline function rec(map: usize, i: u32): usize {
  return map + DEDUP_MAP_HDR_SIZE + <usize>i * DEDUP_CHUNK_SIZE;
}

// @ts-ignore: decorator
@inline function doneList(map: usize): usize {
  return map + DEDUP_MAP_HDR_SIZE + <usize>getDedupMapHdrChunkCount(map) * DEDUP_CHUNK_SIZE;
}

/** Spin for the map's lock; false after a bounded number of tries (a stuck owner must not hang us). */
function lock(map: usize): bool {
  for (let i = 0; i < 1 << 22; i++) {
    if (atomic.cmpxchg<u32>(map + DEDUP_MAP_HDR_LOCK_OFF, 0, 1) == 0) return true;
  }
  return false;
}

// @ts-ignore: decorator
@inline function unlock(map: usize): void {
  atomic.store<u32>(map + DEDUP_MAP_HDR_LOCK_OFF, 0);
}

/**
 * Validate a map TypeScript has filled (header fields, each record's start/len/expected) and
 * start every chunk's stream: watermark 0, no intervals, pending, counters zero.
 * Returns a DedupArmStatus.
 */
export function chunkMapArm(map: usize): u32 {
  if (getDedupMapHdrMagic(map) != DEDUP_MAP_MAGIC) return DEDUP_ARM_BAD_MAGIC;
  const n = getDedupMapHdrChunkCount(map);
  const zoneLen = <u64>getDedupMapHdrZoneLen(map);
  const seed = getDedupMapHdrSeed(map);
  let at: u64 = 0;
  for (let i: u32 = 0; i < n; i++) {
    const r = rec(map, i);
    const len = getDedupChunkLen(r);
    if (<u64>getDedupChunkStart(r) != at || len == 0) return DEDUP_ARM_BAD_LAYOUT;
    at += <u64>len;
    if (at > zoneLen) return DEDUP_ARM_BAD_LAYOUT;
  }
  for (let i: u32 = 0; i < n; i++) {
    const r = rec(map, i);
    xxh128Reset(r + DEDUP_CHUNK_STATE_OFF, seed);
    setDedupChunkMark(r, 0);
    setDedupChunkStatus(r, DEDUP_CHUNK_STATUS_PENDING);
    setDedupChunkPendCount(r, 0);
    setDedupChunkFlags(r, 0);
    setDedupChunkLanded(r, 0);
    setDedupChunkRsvd(r, 0);
  }
  setDedupMapHdrDoneCount(map, 0);
  setDedupMapHdrOkCount(map, 0);
  setDedupMapHdrMismatchCount(map, 0);
  setDedupMapHdrOverflowCount(map, 0);
  setDedupMapHdrRewriteCount(map, 0);
  setDedupMapHdrBytesHashed(map, 0);
  setDedupMapHdrSegments(map, 0);
  setDedupMapHdrOutside(map, 0);
  atomic.store<u32>(map + DEDUP_MAP_HDR_LOCK_OFF, 0);
  return DEDUP_ARM_OK;
}

/** Hash [mark, upTo) of chunk record r (zone-relative chunk start cs) and move the watermark. */
// @ts-ignore: decorator
@inline function advance(map: usize, r: usize, zone: usize, upTo: u32): void {
  const mark = getDedupChunkMark(r);
  if (upTo <= mark) return;
  xxh128Update(r + DEDUP_CHUNK_STATE_OFF, zone + <usize>getDedupChunkStart(r) + <usize>mark, <usize>(upTo - mark));
  setDedupMapHdrBytesHashed(map, getDedupMapHdrBytesHashed(map) + <u64>(upTo - mark));
  setDedupChunkMark(r, upTo);
}

/** The digest is final: compare, set the status, append to the done list. Returns 1. */
function finalize(map: usize, r: usize, i: u32): u32 {
  const d = r + DEDUP_CHUNK_DIGEST_OFF;
  xxh128Digest(r + DEDUP_CHUNK_STATE_OFF, d);
  const e = r + DEDUP_CHUNK_EXPECTED_OFF;
  const same = load<u64>(d) == load<u64>(e) && load<u64>(d, 8) == load<u64>(e, 8);
  if (same && (getDedupChunkFlags(r) & DEDUP_CHUNK_FLAG_TAINTED) == 0) {
    setDedupChunkStatus(r, DEDUP_CHUNK_STATUS_OK);
    setDedupMapHdrOkCount(map, getDedupMapHdrOkCount(map) + 1);
  } else {
    setDedupChunkStatus(r, DEDUP_CHUNK_STATUS_MISMATCH);
    setDedupMapHdrMismatchCount(map, getDedupMapHdrMismatchCount(map) + 1);
  }
  const done = getDedupMapHdrDoneCount(map);
  store<u32>(doneList(map) + (<usize>done << 2), i);
  setDedupMapHdrDoneCount(map, done + 1);
  return 1;
}

/** Taint chunk i: bytes it already hashed were written again. A final ok chunk becomes a mismatch. */
function taint(map: usize, r: usize): void {
  setDedupChunkFlags(r, getDedupChunkFlags(r) | DEDUP_CHUNK_FLAG_TAINTED);
  if (getDedupChunkStatus(r) == DEDUP_CHUNK_STATUS_OK) {
    setDedupChunkStatus(r, DEDUP_CHUNK_STATUS_MISMATCH);
    setDedupMapHdrOkCount(map, getDedupMapHdrOkCount(map) - 1);
    setDedupMapHdrMismatchCount(map, getDedupMapHdrMismatchCount(map) + 1);
  }
}

/**
 * Record that [a, b) of chunk i (chunk-relative, 0 ≤ a < b ≤ len) has landed, hashing whatever
 * contiguous prefix that completes. Returns 1 if the chunk became final.
 */
function landed(map: usize, zone: usize, i: u32, a: u32, b: u32): u32 {
  const r = rec(map, i);
  let mark = getDedupChunkMark(r);
  if (a < mark) {
    // Bytes already hashed were written again: whatever they are now, they are not what was hashed.
    setDedupMapHdrRewriteCount(map, getDedupMapHdrRewriteCount(map) + 1);
    taint(map, r);
    if (b <= mark) return 0;
    a = mark;
  }
  if (getDedupChunkStatus(r) != DEDUP_CHUNK_STATUS_PENDING) return 0;
  const pend = r + DEDUP_CHUNK_PEND_OFF;
  let n = getDedupChunkPendCount(r);
  if (a == mark) {
    advance(map, r, zone, b);
    mark = b;
    // Swallow the intervals the watermark now reaches (sorted, so from the front).
    let k: u32 = 0;
    while (k < n && load<u32>(pend + (<usize>k << 3)) <= mark) {
      const e = load<u32>(pend + (<usize>k << 3), 4);
      if (e > mark) {
        advance(map, r, zone, e);
        mark = e;
      }
      k++;
    }
    if (k) {
      memory.copy(pend, pend + (<usize>k << 3), <usize>(n - k) << 3);
      n -= k;
      setDedupChunkPendCount(r, n);
      setDedupChunkLanded(r, recount(pend, n));
    }
  } else {
    // Beyond the watermark: merge into the sorted, disjoint interval list.
    let lo: u32 = 0;
    while (lo < n && load<u32>(pend + (<usize>lo << 3), 4) < a) lo++; // first interval ending at/after a
    let hi = lo;
    let s = a, e = b;
    while (hi < n && load<u32>(pend + (<usize>hi << 3)) <= b) { // intervals touching [a, b]
      const ps = load<u32>(pend + (<usize>hi << 3));
      const pe = load<u32>(pend + (<usize>hi << 3), 4);
      if (ps < s) s = ps;
      if (pe > e) e = pe;
      hi++;
    }
    const merged = hi - lo; // intervals replaced by [s, e)
    if (merged == 0 && n >= DEDUP_PEND_MAX) {
      setDedupChunkFlags(r, getDedupChunkFlags(r) | DEDUP_CHUNK_FLAG_OVERFLOW);
      setDedupMapHdrOverflowCount(map, getDedupMapHdrOverflowCount(map) + 1);
      return 0;
    }
    const tail = n - hi;
    const dst = pend + (<usize>(lo + 1) << 3);
    memory.copy(dst, pend + (<usize>hi << 3), <usize>tail << 3);
    store<u32>(pend + (<usize>lo << 3), s);
    store<u32>(pend + (<usize>lo << 3), e, 4);
    n = lo + 1 + tail;
    setDedupChunkPendCount(r, n);
    setDedupChunkLanded(r, recount(pend, n));
  }
  if (mark == getDedupChunkLen(r)) return finalize(map, r, i);
  return 0;
}

function recount(pend: usize, n: u32): u32 {
  let t: u32 = 0;
  for (let k: u32 = 0; k < n; k++) t += load<u32>(pend + (<usize>k << 3), 4) - load<u32>(pend + (<usize>k << 3));
  return t;
}

/** Last chunk whose start ≤ off (chunks are contiguous from 0, so starts are sorted). */
function findChunk(map: usize, off: u32): u32 {
  let lo: u32 = 0;
  let hi = getDedupMapHdrChunkCount(map); // answer in [lo, hi)
  while (hi - lo > 1) {
    const mid = lo + ((hi - lo) >> 1);
    if (getDedupChunkStart(rec(map, mid)) <= off) lo = mid;
    else hi = mid;
  }
  return lo;
}

let lastStatus: u32 = 0;

/** 0 after a call that ran; 1 when the map's magic was wrong; 2 when its lock could not be had. */
export function chunkHashStatus(): u32 {
  return lastStatus;
}

/**
 * One placed segment [to, to + len) (absolute addresses): advance every chunk of the map it
 * touches. Bytes outside the zone, or beyond the last chunk, are ignored. Returns how many
 * chunks became final (their indices are appended to the map's done list).
 */
export function chunkHashSegment(map: usize, to: usize, len: u32): u32 {
  if (getDedupMapHdrMagic(map) != DEDUP_MAP_MAGIC) { lastStatus = 1; return 0; }
  if (!lock(map)) { lastStatus = 2; return 0; }
  lastStatus = 0;
  setDedupMapHdrSegments(map, getDedupMapHdrSegments(map) + 1);
  const zone = <usize>getDedupMapHdrZoneBase(map);
  const zlen = <u64>getDedupMapHdrZoneLen(map);
  const n = getDedupMapHdrChunkCount(map);
  // Clip to the zone with 64-bit sums (nothing here can wrap).
  let a = <u64>to, b = <u64>to + <u64>len;
  const za = <u64>zone, zb = <u64>zone + zlen;
  if (a < za) a = za;
  if (b > zb) b = zb;
  let completed: u32 = 0;
  if (a >= b || n == 0) {
    setDedupMapHdrOutside(map, getDedupMapHdrOutside(map) + 1);
  } else {
    const off = <u32>(a - za), end = <u32>(b - za);
    for (let i = findChunk(map, off); i < n; i++) {
      const r = rec(map, i);
      const cs = getDedupChunkStart(r);
      if (cs >= end) break;
      const ce = cs + getDedupChunkLen(r);
      const s = off > cs ? off - cs : 0;
      const e = (end < ce ? end : ce) - cs;
      if (s < e) completed += landed(map, zone, i, s, e);
    }
  }
  unlock(map);
  return completed;
}

/**
 * A batch of placed segments: `count` dedupHashDesc records ({map, to, len, 0}) at descPtr, in
 * placement order (the maps may differ). Returns how many chunks became final in all.
 */
export function chunkHashBatch(descPtr: usize, count: u32): u32 {
  let completed: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const d = descPtr + <usize>i * DEDUP_HASH_DESC_SIZE;
    completed += chunkHashSegment(<usize>getDedupHashDescMap(d), <usize>getDedupHashDescTo(d), getDedupHashDescLen(d));
  }
  return completed;
}

/**
 * The caller knows every byte of the zone's chunks has landed (the message completed): hash what
 * the watermark has not reached yet — only chunks whose interval list overflowed, or whose
 * segments the caller did not report — and finalize them. Returns how many became final now.
 */
export function chunkMapFinish(map: usize): u32 {
  if (getDedupMapHdrMagic(map) != DEDUP_MAP_MAGIC) { lastStatus = 1; return 0; }
  if (!lock(map)) { lastStatus = 2; return 0; }
  lastStatus = 0;
  const zone = <usize>getDedupMapHdrZoneBase(map);
  const n = getDedupMapHdrChunkCount(map);
  let completed: u32 = 0;
  for (let i: u32 = 0; i < n; i++) {
    const r = rec(map, i);
    if (getDedupChunkStatus(r) != DEDUP_CHUNK_STATUS_PENDING) continue;
    advance(map, r, zone, getDedupChunkLen(r));
    setDedupChunkPendCount(r, 0);
    setDedupChunkLanded(r, 0);
    completed += finalize(map, r, i);
  }
  unlock(map);
  return completed;
}

/**
 * The placement hook's entry point: a segment [to, to + len) placed into a region whose bytes are
 * a slotted landing zone (directory `dir`, layout dedupZoneDir). Splits it by slot and advances
 * each armed slot's map; bytes of unarmed slots, or outside the zone, are only placed. Returns how
 * many chunks became final. 64-bit sums throughout: a peer's TO and length cannot wrap anything.
 */
export function chunkHashZone(dir: usize, to: usize, len: u32): u32 {
  if (getDedupZoneDirMagic(dir) != DEDUP_ZONE_MAGIC) return 0;
  const slots = getDedupZoneDirSlots(dir);
  const slotLen = <u64>getDedupZoneDirSlotLen(dir);
  const zb = <u64>getDedupZoneDirZoneBase(dir);
  if (slotLen == 0) return 0;
  let a = <u64>to, b = <u64>to + <u64>len;
  const ze = zb + slotLen * <u64>slots;
  if (a < zb) a = zb;
  if (b > ze) b = ze;
  let completed: u32 = 0;
  while (a < b) {
    const s = <u32>((a - zb) / slotLen);
    const se = zb + slotLen * <u64>(s + 1);
    const e = b < se ? b : se;
    const map = <usize>load<u32>(dir + DEDUP_ZONE_DIR_SIZE + (<usize>s << 2));
    if (map != 0) completed += chunkHashSegment(map, <usize>a, <u32>(e - a));
    a = e;
  }
  return completed;
}
