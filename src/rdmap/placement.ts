// Placement (M3): the data of one receive step's segments goes into registered memory with ONE
// WASM place() call. Each segment is described by placement descriptors — one per target
// piece — and the kernel checks key / PD / access / bounds against the region table and
// copies. A payload that already lies in device memory (a udp receive area, a tcp receive
// buffer, a source region of this device) is copied from there. A tagged segment's payload
// outside it (over inproc, the requester's region; over udp, a datagram that found its receive
// area full) and aligned as its target is not staged: the kernel only checks (PLACE_SRC_CALLER)
// and the copy happens here, once (staging and copying again is a second copy of every
// byte). Other payloads outside (misaligned ones, a Send's pieces) are staged. The
// amended-metadata records come back here: direct placements are counted, external regions
// (the indirect path) and caller copies are copied by TypeScript after the same checks, and
// failures mark the message for a Terminate.
import { Access, WcStatus, type WcStatusValue } from '../core/enums.js';
import type { SegFrame } from '../core/frame.js';
import { PlaceStatus } from '../dataplane/descriptors.js';
import { PLACE_SRC_CALLER } from '../wire/spec.js';
import { decodeDdp } from '../wire/rdmap.js';
import { TERM, termForPlaceStatus, type TermCode } from '../wire/terminate.js';
import { settle } from './budget.js';
import { type EngineQp, type EngineState, type Flow, type InMessage, type RecvWork, recvSpans, type SegmentPlacement } from './state.js';

/** Descriptors per place() call (the engine memory's batch area). */
const MAX_DESCS = 1024;

/** Mark message `m` failed (once): it is Terminated when it is next in order. */
export function failMsg(m: InMessage, hdr: Uint8Array, plen: number, term: TermCode, local?: WcStatusValue): void {
  if (m.fail) return;
  m.fail = { term, ...(local !== undefined ? { local } : {}) };
  const d = decodeDdp(hdr, 0, hdr.length);
  m.hdr = hdr.slice(0, d.ok ? d.length : 0);
  m.segLen = plen;
}

/**
 * Where the payload of `f` will be placed from: where it lies, PLACE_SRC_CALLER (a tagged
 * segment's payload outside device memory, aligned as its target `to` is: flushPlacement
 * copies it), or staged (flushing a full batch first). `to` -1: a receive's pieces, staged.
 */
function stage(e: EngineState, f: SegFrame, plen: number, ndesc: number, to: number): number {
  const mem = e.mem;
  const at = mem.inDevice(f.payload);
  const direct = to >= 0 && at < 0 && wordCopies(f.payload, to, plen);
  // The kernel will copy these bytes: after any caller copy of this batch to the same place.
  // (A caller copy after caller copies keeps its order: they run in the batch's order.)
  if (to >= 0 && !direct) afterCallerCopies(e, to, plen);
  if (at >= 0 || direct) {
    if (!mem.hasRoom(0) || mem.count + ndesc > MAX_DESCS) flushPlacement(e);
    return at >= 0 ? at : PLACE_SRC_CALLER;
  }
  if (!mem.hasRoom(plen) || mem.count + ndesc > MAX_DESCS) flushPlacement(e);
  e.counters.stagedBytes += plen;
  return mem.stage(f.payload, plen);
}

/**
 * Whether copying `parts` (`len` bytes in all) to device memory at `to` runs word by word. V8
 * copies into shared memory (relaxed_memmove) a word at a time only when source and target are
 * equally aligned, else byte by byte, several times slower (bench/copy.bench.mjs).
 * Staging at the source's alignment then the kernel's memory.copy is faster than one byte-wise
 * copy, so a misaligned payload is staged.
 */
function wordCopies(parts: Uint8Array[], to: number, len: number): boolean {
  let at = to;
  for (const v of parts) {
    if (((v.byteOffset - at) & 7) !== 0) return false;
    at += v.length;
  }
  // The kernel checks [to, to + len): the copy must be exactly that long.
  return at - to === len;
}

/** Copy payload parts to `dst` at `at` (a caller copy or the indirect path). */
function copyParts(parts: Uint8Array[], dst: Uint8Array, at: number): void {
  for (const v of parts) {
    dst.set(v, at);
    at += v.length;
  }
}

/**
 * A tagged segment: placed at the STag/TO it names, needing `access` there. `local`: the
 * status our own work request gets when it cannot be placed (a Read Response into our sinks).
 */
export function placeTagged(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, f: SegFrame, stag: number, to: number, plen: number, access: number, local?: WcStatusValue): void {
  if (f.hdr.length !== m.hdrLen) return failMsg(m, f.hdr, plen, TERM.invalidRequest);
  const src = stage(e, f, plen, 1, to);
  if (src === PLACE_SRC_CALLER) {
    if (to < e.callerLo) e.callerLo = to;
    if (to + plen > e.callerHi) e.callerHi = to + plen;
  }
  const seg: SegmentPlacement = { qp, flow, m, off: f.env.off, len: plen, remaining: 1, bad: 0, recvLocal: false, local };
  e.mem.addDesc(src, plen, stag, qp.pd, to, access, e.descs.length);
  e.descs.push({ seg, stag, to, len: plen, parts: src === PLACE_SRC_CALLER ? f.payload : undefined });
}

/**
 * A tagged segment placed only at the pieces of [to, to + plen) in `pieces` ([start, end, …] in
 * TO space, sorted, disjoint): the rest is not written (write-order.ts), yet the whole segment
 * counts as arrived. The payload goes through device memory (staged if it lies outside), so
 * each piece is a plain descriptor at its offset into it.
 */
export function placeTaggedPieces(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, f: SegFrame, stag: number, to: number, plen: number, access: number, pieces: number[]): void {
  if (f.hdr.length !== m.hdrLen) return failMsg(m, f.hdr, plen, TERM.invalidRequest);
  const n = pieces.length >> 1;
  const seg: SegmentPlacement = { qp, flow, m, off: f.env.off, len: plen, remaining: n, bad: 0, recvLocal: false, local: undefined };
  if (n === 0) return segDone(seg);
  afterCallerCopies(e, to, plen);
  // At most MAX_DESCS descriptors go in one batch: a segment cut into more pieces (a hostile
  // peer's gaps) is placed in chunks, each staged into the batch it goes with.
  for (let i = 0; i < pieces.length; i += 2 * MAX_DESCS) {
    const j = Math.min(pieces.length, i + 2 * MAX_DESCS);
    const src = stage(e, f, plen, (j - i) >> 1, -1);
    for (let k = i; k < j; k += 2) {
      const at = pieces[k]!;
      const len = pieces[k + 1]! - at;
      e.mem.addDesc(src + (at - to), len, stag, qp.pd, at, access, e.descs.length);
      e.descs.push({ seg, stag, to: at, len, parts: undefined });
    }
  }
}

/** An untagged data segment into receive `r`, cut along its scatter list: one descriptor per piece it touches. */
export function placeInto(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, f: SegFrame, r: RecvWork, plen: number): void {
  const off = f.env.off;
  const spans = recvSpans(r, off, plen);
  for (const { p, at, n } of spans) afterCallerCopies(e, p.addr + at, n);
  const src = stage(e, f, plen, Math.max(1, spans.length), -1);
  const seg: SegmentPlacement = { qp, flow, m, off, len: plen, remaining: spans.length, bad: 0, recvLocal: true, local: undefined };
  if (spans.length === 0) {
    segDone(seg);
    return;
  }
  let s = src;
  for (const { p, at, n } of spans) {
    e.mem.addDesc(s, n, p.rec.stag, qp.pd, p.addr + at, Access.LocalWrite, e.descs.length);
    e.descs.push({ seg, stag: p.rec.stag, to: p.addr + at, len: n, parts: undefined });
    s += n;
  }
}

/**
 * Bytes [to, to + len) are about to be placed by the kernel: if a caller copy of this batch
 * (run after the kernel's copies) lands there too, place the batch first, so that the bytes end
 * as the segments' order says.
 */
function afterCallerCopies(e: EngineState, to: number, len: number): void {
  if (to < e.callerHi && to + len > e.callerLo) flushPlacement(e);
}

/** One place() call for the batch; then the amended records are consumed (M3). */
export function flushPlacement(e: EngineState): void {
  const mem = e.mem;
  const n = mem.run();
  if (n > 0) e.counters.placeBatches++;
  const u8 = n > 0 ? mem.dm.u8() : undefined;
  for (let i = 0; i < n; i++) {
    const dc = e.descs[mem.outTag(i)]!;
    const st = mem.outStatus(i);
    // A caller copy: the kernel checked its target against the region table just now, in this
    // same step; it is a direct placement like the kernel's own.
    const copied = (st === PlaceStatus.CallerCopies || st === PlaceStatus.CallerCopiesHashed) && dc.parts !== undefined;
    if (copied) {
      copyParts(dc.parts!, u8!, dc.to);
      if (st === PlaceStatus.CallerCopiesHashed) mem.placedHash(dc.stag, dc.to, dc.len);
    }
    if (st === PlaceStatus.Placed || copied) {
      e.counters.directSegments++;
      e.counters.directBytes += dc.len;
    } else if (st === PlaceStatus.Indirect) {
      const rec = mem.lookup(dc.stag);
      if (rec?.ext) {
        if (dc.parts) copyParts(dc.parts, rec.ext, dc.to - rec.addr);
        else {
          const src = mem.descSrc(i);
          rec.ext.set(u8!.subarray(src, src + dc.len), dc.to - rec.addr);
        }
        mem.extWritten(rec, dc.to, dc.len);
        e.counters.indirectSegments++;
        e.counters.indirectBytes += dc.len;
      } else dc.seg.bad = PlaceStatus.InvalidStag;
    } else if (!dc.seg.bad) dc.seg.bad = st;
    if (--dc.seg.remaining === 0) segDone(dc.seg);
  }
  // A step that placed nothing (acks, control messages only) keeps its empty list: no new one.
  if (e.descs.length > 0) e.descs = [];
  e.callerLo = Infinity;
  e.callerHi = -Infinity;
  mem.reset();
}

/** Every descriptor of a segment is back: count its bytes, or fail its message. */
function segDone(seg: SegmentPlacement): void {
  const m = seg.m;
  if (m.fail) return;
  if (seg.bad) {
    const hdr = m.hdr ?? new Uint8Array(0);
    // A receive of ours that cannot take the data is our failure; a peer-named target, the peer's.
    if (seg.recvLocal) failMsg(m, hdr, seg.len, TERM.catastrophic, WcStatus.LocProtErr);
    else failMsg(m, hdr, seg.len, termForPlaceStatus(seg.bad), seg.local);
    return;
  }
  if (m.offs.has(seg.off)) return;
  m.offs.add(seg.off, seg.len);
  m.got += seg.len;
  settle(seg.qp, m);
}
