// CRC32C of bytes wherever they live, for the framers of both transports: a few dozen bytes
// built in JS go through the byte table (crc32c-short.ts), bytes already in device memory to
// the kernel in place, anything else through the kernel's scratch window (crc32c.ts). Short
// data is tested first, before `.buffer`: on a small on-heap array that property makes V8 move
// the bytes to a fresh off-heap backing store.
import { crc32c as crc32cCopy } from './crc32c.js';
import { CRC32C_SHORT_MAX, crc32cShort } from './crc32c-short.js';

/** The part of the device memory the CRC needs (see dataplane/device-memory.ts). */
export interface CrcMemory {
  u8(): Uint8Array;
  readonly kernels: { crc32c(ptr: number, len: number, previous: number): number };
}

/** CRC32C of `data` continuing from `previous` (same contract as kernels' crc32c). */
export function crc32cIn(dm: CrcMemory, data: Uint8Array, previous = 0): number {
  if (data.length <= CRC32C_SHORT_MAX) return crc32cShort(data, previous);
  // A view made before a memory.grow has the old buffer object: copy path, still correct.
  if (data.buffer === dm.u8().buffer) return dm.kernels.crc32c(data.byteOffset, data.length, previous) >>> 0;
  return crc32cCopy(data, previous);
}
