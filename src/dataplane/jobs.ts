// Data-plane jobs: what a worker does with one request-ring slot. The same function runs
// inline (tests, single-threaded devices) and in workers, so both give identical results.
//
// Request slot (u32 words): w0 op, w1 id, w2..w7 args a0..a5.
// Completion slot (u32 words): w0 id, w1 status, w2 result, w3 op.
import type { Kernels } from './wasm.js';

export const JobOp = {
  Nop: 0,
  /** a0 ptr, a1 len, a2 previous → result = CRC32C. */
  Crc32c: 1,
  /** a0 descPtr, a1 count: crcBatchDesc records (src/wire/spec.ts), results in their `out`. */
  Crc32cBatch: 2,
  /** a0 descPtr, a1 count, a2 tablePtr, a3 tableEntries, a4 outPtr → result = placed count. */
  Place: 3,
  /** a0 descPtr, a1 count, a2 tablePtr, a3 tableEntries, a4 outStatusPtr → result = executed count. */
  SgCopy: 4,
  /** a0 ptr, a1 len, a2 seed lo, a3 seed hi, a4 outPtr (16 bytes) → XXH3-128 written at outPtr. */
  Xxh128: 5,
  /** The worker finishes the batch it is in and exits. */
  Stop: 6,
  /** a0 descPtr, a1 count: dedupHashDesc records (M4 in-band chunk hashing) → result = chunks made final. */
  ChunkHashBatch: 7,
} as const;

export const JobStatus = {
  Ok: 0,
  /** The op is unknown or its kernel is not in this build. */
  Unsupported: 1,
  /** The kernel trapped (out-of-bounds pointer from the submitter). */
  Fault: 2,
} as const;

export interface Job {
  op: number;
  args?: ArrayLike<number>;
}

export interface JobResult {
  status: number;
  result: number;
}

export const REQ_WORDS = 8;
export const CPL_WORDS = 4;

type Fn = (...a: number[]) => unknown;

/** Kernels looked up by name, so a build without a given kernel still runs the others. */
export function kernelFn(kernels: Kernels, name: string): Fn | undefined {
  const f = (kernels as unknown as Record<string, unknown>)[name];
  return typeof f === 'function' ? (f as Fn) : undefined;
}

/** Execute one job; `w` holds the request words at `o`. */
export function runJob(kernels: Kernels, w: ArrayLike<number>, o: number): JobResult {
  const op = w[o]!;
  const a0 = w[o + 2]!;
  const a1 = w[o + 3]!;
  const a2 = w[o + 4]!;
  const a3 = w[o + 5]!;
  const a4 = w[o + 6]!;
  try {
    switch (op) {
      case JobOp.Nop:
        return { status: JobStatus.Ok, result: 0 };
      case JobOp.Crc32c: {
        const f = kernelFn(kernels, 'crc32c');
        return f ? { status: JobStatus.Ok, result: (f(a0, a1, a2) as number) >>> 0 } : unsupported;
      }
      case JobOp.Crc32cBatch: {
        const f = kernelFn(kernels, 'crc32cBatch');
        if (!f) return unsupported;
        f(a0, a1);
        return { status: JobStatus.Ok, result: a1 };
      }
      case JobOp.Place:
        return { status: JobStatus.Ok, result: kernels.place(a0, a1, a2, a3, a4) >>> 0 };
      case JobOp.SgCopy:
        return { status: JobStatus.Ok, result: kernels.sgCopy(a0, a1, a2, a3, a4) >>> 0 };
      case JobOp.Xxh128: {
        const f = kernelFn(kernels, 'xxh128') as ((p: number, l: number, s: bigint, o: number) => void) | undefined;
        if (!f) return unsupported;
        f(a0, a1, (BigInt(a3 >>> 0) << 32n) | BigInt(a2 >>> 0), a4);
        return { status: JobStatus.Ok, result: 0 };
      }
      case JobOp.ChunkHashBatch: {
        const f = kernelFn(kernels, 'chunkHashBatch');
        return f ? { status: JobStatus.Ok, result: (f(a0, a1) as number) >>> 0 } : unsupported;
      }
      default:
        return unsupported;
    }
  } catch {
    return { status: JobStatus.Fault, result: 0 };
  }
}

const unsupported: JobResult = { status: JobStatus.Unsupported, result: 0 };
