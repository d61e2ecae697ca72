// CRC32C of a few dozen bytes held in ordinary memory (the datagram and FPDU headers, pads and
// trailers the transports build in JS objects): below ~256 bytes a byte-table loop here costs
// less than copying the bytes into the kernel's scratch window and calling into WebAssembly.
// Everything longer, and everything already in device memory, goes to the WASM kernel.
const T = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  T[n] = c >>> 0;
}

/** Up to this many bytes, crc32cShort is the cheaper path. */
export const CRC32C_SHORT_MAX = 256;

/** CRC32C of data[from, to) continuing from `previous` (same contract as kernels' crc32c). */
export function crc32cShort(data: Uint8Array, previous = 0, from = 0, to = data.length): number {
  let c = ~previous;
  for (let i = from; i < to; i++) c = T[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}
