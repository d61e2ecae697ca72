// Batch helpers of the dedup data path (M4): hash a run of chunks laid end to end (the chunker's
// lengths in, one XXH3-128 digest per chunk out) and execute a batch of copies (assembly from the
// chunk store and the landing zone, store inserts). One JS→WASM call per batch, not per chunk.
import { xxh128 } from './xxh3';
import { DEDUP_COPY_DESC_SIZE, getDedupCopyDescDst, getDedupCopyDescLen, getDedupCopyDescSrc } from './wire.gen';

/**
 * `count` chunks laid end to end from `ptr`, lengths (u32 each) at lensPtr: writes each chunk's
 * XXH3-128 (seeded; low64 then high64, LE) at outPtr + 16 * i. Returns the bytes hashed.
 */
export function xxh128Chunks(ptr: usize, lensPtr: usize, count: u32, seed: u64, outPtr: usize): u64 {
  let at = ptr;
  let total: u64 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const len = load<u32>(lensPtr + (<usize>i << 2));
    xxh128(at, <usize>len, seed, outPtr + (<usize>i << 4));
    at += <usize>len;
    total += <u64>len;
  }
  return total;
}

/**
 * `count` dedupCopyDesc records ({dst, src, len, 0}) at descPtr, executed in order (memmove
 * semantics). A record whose source or destination runs past the end of the memory is skipped,
 * never half-done. Returns how many were executed.
 */
export function copyBatch(descPtr: usize, count: u32): u32 {
  const memBytes: u64 = <u64>memory.size() << 16;
  let done: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const d = descPtr + <usize>i * DEDUP_COPY_DESC_SIZE;
    const dst = getDedupCopyDescDst(d);
    const src = getDedupCopyDescSrc(d);
    const len = getDedupCopyDescLen(d);
    if (<u64>dst + <u64>len > memBytes || <u64>src + <u64>len > memBytes) continue;
    memory.copy(<usize>dst, <usize>src, <usize>len);
    done++;
  }
  return done;
}
