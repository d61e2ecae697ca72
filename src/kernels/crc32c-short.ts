// CRC32C of a few dozen bytes held in ordinary memory (the datagram and FPDU headers, pads and
// trailers the transports build in JS objects, and whole small FPDUs): below ~256 bytes a table
// loop here costs less than copying the bytes into the kernel's scratch window and calling into
// WebAssembly. Everything longer, and everything already in device memory, goes to the WASM kernel.
//
// Slicing-by-8: eight tables, eight bytes per round (one dependent table step per round instead
// of eight), the byte-wise loop for the tail. A small FPDU (a 64-byte Write is 82 bytes framed)
// is CRC'd once per message on the send path, so this loop is a per-message cost.
const T = new Int32Array(256 * 8);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  T[n] = c;
}
for (let t = 1; t < 8; t++) {
  for (let n = 0; n < 256; n++) {
    const p = T[(t - 1) * 256 + n]!;
    T[t * 256 + n] = (p >>> 8) ^ T[p & 0xff]!;
  }
}

/** Up to this many bytes, crc32cShort is the cheaper path. */
export const CRC32C_SHORT_MAX = 256;

/** CRC32C of data[from, to) continuing from `previous` (same contract as kernels' crc32c). */
export function crc32cShort(data: Uint8Array, previous = 0, from = 0, to = data.length): number {
  let c = ~previous;
  let i = from;
  for (; i + 8 <= to; i += 8) {
    const a = c ^ (data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24));
    c = T[1792 + (a & 0xff)]! ^ T[1536 + ((a >>> 8) & 0xff)]! ^ T[1280 + ((a >>> 16) & 0xff)]! ^ T[1024 + (a >>> 24)]!
      ^ T[768 + data[i + 4]!]! ^ T[512 + data[i + 5]!]! ^ T[256 + data[i + 6]!]! ^ T[data[i + 7]!]!;
  }
  for (; i < to; i++) c = T[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}
