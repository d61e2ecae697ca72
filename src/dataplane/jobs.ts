// Data-plane jobs: what a worker does with one request-ring slot. The same function runs
// inline (tests, single-threaded devices) and in workers, so both give identical results.
// The slots' layouts (jobReq, jobCpl) are in src/wire/dataplane-spec.ts; the rings are read as
// u32 words, so the fields are exported here as word indices.
import * as H from '../wire/host-fields.gen.js';
import type { Kernels } from './wasm.js';

/** Words of a request slot, and each field's word index. */
export const REQ_WORDS = H.JOB_REQ_SIZE >>> 2;
export const REQ_OP = H.JOB_REQ_OP_OFF >>> 2;
export const REQ_ID = H.JOB_REQ_ID_OFF >>> 2;
/** The first argument's word; a0 … a5 follow it. */
export const REQ_ARGS = H.JOB_REQ_A0_OFF >>> 2;
export const REQ_MAX_ARGS = (H.JOB_REQ_SIZE - H.JOB_REQ_A0_OFF) >>> 2;
/** Words of a completion slot, and each field's word index. */
export const CPL_WORDS = H.JOB_CPL_SIZE >>> 2;
export const CPL_ID = H.JOB_CPL_ID_OFF >>> 2;
export const CPL_STATUS = H.JOB_CPL_STATUS_OFF >>> 2;
export const CPL_RESULT = H.JOB_CPL_RESULT_OFF >>> 2;
export const CPL_OP = H.JOB_CPL_OP_OFF >>> 2;

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

type Fn = (...a: number[]) => unknown;

/** Kernels looked up by name, so a build without a given kernel still runs the others. */
export function kernelFn(kernels: Kernels, name: string): Fn | undefined {
  const f = (kernels as unknown as Record<string, unknown>)[name];
  return typeof f === 'function' ? (f as Fn) : undefined;
}

/** Execute one job; `w` holds the request words at `o`. */
export function runJob(kernels: Kernels, w: ArrayLike<number>, o: number): JobResult {
  const op = w[o + REQ_OP]!;
  const a = o + REQ_ARGS;
  const a0 = w[a]!;
  const a1 = w[a + 1]!;
  const a2 = w[a + 2]!;
  const a3 = w[a + 3]!;
  const a4 = w[a + 4]!;
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
