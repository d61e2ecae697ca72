// A copy of a byte view, whatever its class. Buffer#slice returns a view (Node kept the old
// meaning), so `b.slice()` copies a Uint8Array but aliases a Buffer — and socket reads arrive
// in Buffers, some in one spare Buffer that the next read overwrites.

/** A new Uint8Array holding the bytes of `v` (never sharing its memory). */
export function copyBytes(v: Uint8Array): Uint8Array {
  return Uint8Array.prototype.slice.call(v);
}
