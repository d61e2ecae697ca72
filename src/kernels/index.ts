// `sabre/kernels`: the data-plane kernels for plain Uint8Arrays. Each call copies the input
// into a private shared memory in 256 KiB chunks and runs the WASM kernel there; the device
// data path calls the same kernels on bytes already in device memory, with no copy.
export { crc32c } from './crc32c.js';
export { xxh128, createXxh128, type Xxh128Hasher } from './xxh128.js';
export { xxh3_64 } from './xxh3-64.js';
export { chunkLengths, createChunker, gearTable, cdcParams, type Chunker, type CdcOptions, type CdcParams } from './cdc.js';
