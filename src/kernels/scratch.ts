// The private data-plane instance behind `sabre/kernels`: user data arrives in ordinary
// (non-shared) Uint8Arrays, so it is copied into a scratch window of a small shared memory
// of our own, a chunk at a time, and the kernel runs there. The device data path never comes
// through here: it calls the kernels on bytes already in device memory.
import { createSharedMemory, instantiateKernelsSync, type Kernels, PAGE } from '../dataplane/wasm.js';

/** Scratch window size: large enough to amortise the call, small enough to stay in L2. */
export const SCRATCH_BYTES = 256 * 1024;
/** Room below the scratch window for fixed-size kernel state records (e.g. XXH3 streams). */
export const STATE_BYTES = 64 * 1024;
/**
 * Owners of the state area, as offsets from stateBase: xxh128.ts below 1344 (result, two
 * records), xxh3-64.ts from 1344 to 2 KiB (result, one record), cdc.ts from 2 KiB (table,
 * state, lengths).
 */
export const XXH128_AREA = 0;
export const XXH3_64_AREA = 1344;
export const CDC_AREA = 2048;

export interface PrivateKernels {
  readonly kernels: Kernels;
  readonly memory: WebAssembly.Memory;
  /** Base of the state area (64-byte aligned); STATE_BYTES long. */
  readonly stateBase: number;
  /** Base of the scratch window (64-byte aligned); SCRATCH_BYTES long. */
  readonly scratchBase: number;
  /** A view of the whole memory; the memory never grows, so this view stays valid. */
  readonly u8: Uint8Array;
}

function create(): PrivateKernels {
  const probeMemory = createSharedMemory(2, 2);
  const probe = instantiateKernelsSync(probeMemory);
  const heapBase = Number(probe.heapBase());
  const stateBase = Math.ceil(heapBase / 64) * 64;
  const scratchBase = stateBase + STATE_BYTES;
  const pages = Math.ceil((scratchBase + SCRATCH_BYTES) / PAGE);
  const memory = createSharedMemory(pages, pages);
  const kernels = instantiateKernelsSync(memory);
  return { kernels, memory, stateBase, scratchBase, u8: new Uint8Array(memory.buffer) };
}

/**
 * Created once per thread at module load, synchronously (a sync compile and instantiation of
 * the module's bytes): no top-level await, so the package can be require()d.
 */
export const own: PrivateKernels = create();

/**
 * Feed `data` through the scratch window in chunks: `step(ptr, len)` runs once per chunk with
 * the chunk already copied to `ptr`. Zero-length input calls `step` once with len 0 so kernels
 * see a well-defined empty input.
 */
export function forEachChunk(data: Uint8Array, step: (ptr: number, len: number) => void): void {
  const { u8, scratchBase } = own;
  if (data.length === 0) {
    step(scratchBase, 0);
    return;
  }
  for (let off = 0; off < data.length; off += SCRATCH_BYTES) {
    const len = Math.min(SCRATCH_BYTES, data.length - off);
    u8.set(data.subarray(off, off + len), scratchBase);
    step(scratchBase, len);
  }
}
