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
