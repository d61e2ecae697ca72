// The UDP data plane on worker threads: the CRC32C of large datagrams — checked on receive,
// computed on transmit — runs on the device's data-plane workers (src/dataplane/workers.ts)
// over the device memory, a batch of datagrams per ring job, while the event loop goes on
// reading and sending. Small datagrams stay inline: a hand-off costs more than the CRC of a
// few KiB.
//
// Each direction has its own descriptor area (one batch of each may be in flight at once);
// a batch is split into contiguous runs of about equal bytes, one Crc32cBatch job per worker.
import type { DataPlaneWorkers } from '../../dataplane/workers.js';
import { CRC_DESC_BYTES as DESC, crcDescOut, writeCrcDesc } from '../../dataplane/descriptors.js';
import { JobOp, JobStatus } from '../../dataplane/jobs.js';

/** What the socket shell needs from an offload (tests may supply their own). */
export interface CrcOffloadLike {
  /** Datagrams (rx) or device-memory parts (tx) shorter than this are done inline. */
  readonly minBytes: number;
  /** Largest batch `run` accepts. */
  readonly maxBatch: number;
  /** The memory the pointers refer to: a view must be over it to be offloaded. */
  readonly buffer: ArrayBufferLike;
  /**
   * CRC32C of n device-memory ranges (ptr[i], len[i]) continuing from prev[i], in order.
   * `dir` 0 (receive) and 1 (transmit) use separate descriptor areas: one batch of each may
   * be in flight. Rejects when a worker failed: the caller computes inline instead.
   */
  run(dir: 0 | 1, ptr: ArrayLike<number>, len: ArrayLike<number>, prev: ArrayLike<number>, n: number): Promise<Uint32Array>;
  close(): Promise<void>;
}

interface Memory {
  alloc(length: number, align?: number): number;
  u8(): Uint8Array;
  dataView(): DataView;
}


export class CrcOffload implements CrcOffloadLike {
  readonly minBytes: number;
  readonly maxBatch: number;
  readonly #dm: Memory;
  readonly #workers: DataPlaneWorkers;
  readonly #desc: [number, number];

  constructor(dm: Memory, workers: DataPlaneWorkers, opts: { minBytes?: number; maxBatch?: number } = {}) {
    this.#dm = dm;
    this.#workers = workers;
    this.minBytes = opts.minBytes ?? 8192;
    this.maxBatch = opts.maxBatch ?? 64;
    const base = dm.alloc(2 * this.maxBatch * DESC, 64);
    this.#desc = [base, base + this.maxBatch * DESC];
  }

  get buffer(): ArrayBufferLike {
    return this.#dm.u8().buffer;
  }

  async run(dir: 0 | 1, ptr: ArrayLike<number>, len: ArrayLike<number>, prev: ArrayLike<number>, n: number): Promise<Uint32Array> {
    if (n < 1 || n > this.maxBatch) throw new RangeError(`batch of ${n} outside 1..${this.maxBatch}`);
    const base = this.#desc[dir];
    const dv = this.#dm.dataView();
    let total = 0;
    for (let i = 0; i < n; i++) {
      writeCrcDesc(dv, base + i * DESC, ptr[i]!, len[i]!, prev[i]!);
      total += len[i]!;
    }
    // Contiguous runs of about total/workers bytes, one job per worker.
    const k = Math.min(this.#workers.size, n);
    const jobs: Promise<{ status: number }>[] = [];
    let start = 0;
    let acc = 0;
    for (let w = 0; w < k; w++) {
      const target = (total * (w + 1)) / k;
      acc += len[start]!;
      let end = start + 1;
      // Leave at least one item for each worker still to come.
      while (end < n - (k - 1 - w) && acc + len[end]! / 2 <= target) acc += len[end++]!;
      if (w === k - 1) while (end < n) acc += len[end++]!;
      jobs.push(this.#workers.submit({ op: JobOp.Crc32cBatch, args: [base + start * DESC, end - start] }, w));
      start = end;
    }
    const rs = await Promise.all(jobs);
    if (rs.some((r) => r.status !== JobStatus.Ok)) throw new Error('crc offload job failed');
    const out = new Uint32Array(n);
    const v = this.#dm.dataView();
    for (let i = 0; i < n; i++) out[i] = crcDescOut(v, base + i * DESC);
    return out;
  }

  close(): Promise<void> {
    return this.#workers.close();
  }
}
