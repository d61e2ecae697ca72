// Detaching queued views from memory that is about to be reused. Links send payloads as views of
// registered memory (no copy on the way out) and keep them until the peer has them: queued,
// in flight for retransmission. Work that fails locally (a QP flushed, destroyed) leaves its
// send queue while such views may still wait in a link, and its region may then be
// deregistered and its memory handed to the next registration: what the link sends later must
// be the bytes the work had, never the new owner's. So, before that memory is let go, each view
// the link still holds of it is replaced by a copy of what it holds now (the deregister fence's
// local half, docs/resource-bounds.md).
import type { Frame } from './frame.js';

/** Which views must become copies: those over the memory about to be reused. */
export type Owns = (v: Uint8Array) => boolean;

/** Views of device memory over [lo, hi) (any shared buffer: a numeric overlap elsewhere only costs a copy). */
export function ownsShared(lo: number, hi: number): Owns {
  return (v) => v.buffer instanceof SharedArrayBuffer && v.byteOffset < hi && v.byteOffset + v.byteLength > lo;
}

/** Views of `mem` (a caller's own buffer registered as a region). */
export function ownsViewsOf(mem: Uint8Array): Owns {
  const lo = mem.byteOffset;
  const hi = lo + mem.byteLength;
  return (v) => v.buffer === mem.buffer && v.byteOffset < hi && v.byteOffset + v.byteLength > lo;
}

/** A copy of `v`'s bytes (slice() of a shared buffer copies byte by byte; set() is a memcpy). */
export function copyOf(v: Uint8Array): Uint8Array {
  const c = new Uint8Array(v.length);
  c.set(v);
  return c;
}

/** `v` itself, or a copy of its bytes when `owns` claims it. */
export function detachView(v: Uint8Array, owns: Owns): Uint8Array {
  return owns(v) ? copyOf(v) : v;
}

/** A payload (one view or a gather list) with the claimed views copied; the list is copied only if one is. */
export function detachPayload<T extends Uint8Array | readonly Uint8Array[]>(p: T, owns: Owns): T {
  if (p instanceof Uint8Array) return detachView(p, owns) as T;
  let out: Uint8Array[] | undefined;
  for (let i = 0; i < p.length; i++) {
    const v = p[i]!;
    if (!owns(v)) continue;
    out ??= p.slice();
    out[i] = copyOf(v);
  }
  return (out ?? p) as T;
}

/** The claimed views of a list, copied in place; true when any was. */
export function detachInPlace(parts: Uint8Array[], owns: Owns): boolean {
  let any = false;
  for (let i = 0; i < parts.length; i++) {
    if (!owns(parts[i]!)) continue;
    parts[i] = copyOf(parts[i]!);
    any = true;
  }
  return any;
}

/** A frame's data views (a segment's payload) with the claimed ones copied. */
export function detachFrame(f: Frame, owns: Owns): void {
  if (f.kind === 'seg' && f.payload.some(owns)) f.payload = detachPayload(f.payload, owns);
}

/** A local segment of send work: its region (`ext` when over a caller's buffer) and the range it names. */
export interface HeldPiece {
  rec: { addr: number; ext?: Uint8Array | undefined };
  addr: number;
  len: number;
}

/**
 * The views of any of `pieces` (a flushed send queue can name thousands): their ranges merged
 * per buffer and searched by halves, so a view costs a few comparisons whatever their number.
 */
export function ownsPieces(pieces: readonly HeldPiece[]): Owns {
  const byBuffer = new Map<ArrayBufferLike | null, number[]>();
  for (const p of pieces) {
    if (p.len <= 0) continue;
    const ext = p.rec.ext;
    const key = ext ? ext.buffer : null;
    const lo = ext ? ext.byteOffset + (p.addr - p.rec.addr) : p.addr;
    let r = byBuffer.get(key);
    if (r === undefined) byBuffer.set(key, (r = []));
    r.push(lo, lo + p.len);
  }
  const merged = new Map<ArrayBufferLike | null, Float64Array>();
  for (const [k, r] of byBuffer) merged.set(k, mergeRanges(r));
  const shared = merged.get(null);
  merged.delete(null);
  return (v) => {
    const m = merged.size > 0 ? merged.get(v.buffer) : undefined;
    if (m !== undefined && overlaps(m, v.byteOffset, v.byteOffset + v.byteLength)) return true;
    return shared !== undefined && v.buffer instanceof SharedArrayBuffer && overlaps(shared, v.byteOffset, v.byteOffset + v.byteLength);
  };
}

/** [lo0, hi0, lo1, hi1, …] sorted by lo, touching or overlapping ranges joined. */
function mergeRanges(flat: number[]): Float64Array {
  const n = flat.length / 2;
  let sorted = true;
  for (let i = 1; i < n && sorted; i++) sorted = flat[2 * i]! >= flat[2 * i - 2]!;
  // A flushed send queue usually names its memory in order: no sort then.
  const idx = Array.from({ length: n }, (_, i) => i);
  if (!sorted) idx.sort((a, b) => flat[2 * a]! - flat[2 * b]!);
  const out: number[] = [];
  for (const i of idx) {
    const lo = flat[2 * i]!;
    const hi = flat[2 * i + 1]!;
    if (out.length > 0 && lo <= out[out.length - 1]!) out[out.length - 1] = Math.max(out[out.length - 1]!, hi);
    else out.push(lo, hi);
  }
  return Float64Array.from(out);
}

/** Whether [lo, hi) meets one of the merged ranges `m`. */
function overlaps(m: Float64Array, lo: number, hi: number): boolean {
  // The last range starting before hi is the only one that can reach past lo.
  let a = 0;
  let b = m.length / 2;
  while (a < b) {
    const mid = (a + b) >>> 1;
    if (m[2 * mid]! < hi) a = mid + 1;
    else b = mid;
  }
  return a > 0 && m[2 * (a - 1) + 1]! > lo;
}
