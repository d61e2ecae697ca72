// CRC32C for ordinary Uint8Arrays: the bytes go through the kernel context's scratch window a
// chunk at a time, each chunk continuing the previous chunk's CRC. The device data path calls
// the kernel directly on bytes already in device memory (crc32cBatch) and never comes here.
import { ErrorCode, SabreError } from '../core/errors.js';
import { own, forEachChunk } from './scratch.js';

/**
 * CRC32C (Castagnoli) of `data`, continuing from `previous` (default 0, i.e. a fresh CRC):
 * `crc32c(b, crc32c(a)) === crc32c(a ‖ b)`. Returns an unsigned 32-bit integer.
 */
export function crc32c(data: Uint8Array, previous = 0): number {
  if (!(data instanceof Uint8Array)) {
    throw new SabreError(ErrorCode.InvalidArgument, 'crc32c: data must be a Uint8Array');
  }
  if (!Number.isInteger(previous) || previous < 0 || previous > 0xffffffff) {
    throw new SabreError(ErrorCode.InvalidArgument, `crc32c: previous must be a uint32, got ${String(previous)}`);
  }
  const { kernels } = own;
  let crc = previous;
  forEachChunk(data, (ptr, len) => {
    crc = kernels.crc32c(ptr, len, crc) >>> 0;
  });
  return crc;
}
