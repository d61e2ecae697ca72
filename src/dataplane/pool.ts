// A piscina pool for batch work that is worth a thread hand-off (bulk CRC32C or hashing
// of large ranges, registration-time work): tasks carry only offsets and lengths into the
// device memory, which every pool thread maps. The packet path uses DataPlaneWorkers and
// rings instead.
import { Piscina } from 'piscina';
import { ErrorCode, SabreError } from '../core/errors.js';
import { Lifecycle } from '../core/lifecycle.js';
import type { DeviceMemory } from './device-memory.js';
import { CRC_DESC_BYTES, crcDescOut, writeCrcDesc } from './descriptors.js';
import type { PoolTask } from './pool-task.js';
import { workerScript } from './worker-url.js';

export interface KernelPoolOptions {
  /** Threads (min = max, so a batch never waits for a thread to start). Default 2. */
  threads?: number;
}

export class KernelPool {
  readonly #pool: Piscina;
  readonly #dm: DeviceMemory;
  /** Tasks are owed promises: close() rejects the ones still running with ERR_CLOSED, not piscina's own error. */
  readonly #life = new Lifecycle(() => new SabreError(ErrorCode.Closed, 'kernel pool is closed'));

  constructor(dm: DeviceMemory, opts: KernelPoolOptions = {}) {
    const threads = opts.threads ?? 2;
    this.#dm = dm;
    this.#pool = new Piscina({
      filename: workerScript('pool-task.js'),
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: Infinity,
      workerData: { module: dm.module, memory: dm.memory },
    });
  }

  get threads(): number {
    return this.#pool.threads.length;
  }

  /** Call kernel `fn` with `args` on a pool thread. */
  run(fn: string, args: Array<number | bigint>): Promise<unknown> {
    if (this.#life.closing) return Promise.reject(this.#life.closedError());
    const t: PoolTask = { fn, args };
    const { promise, settle } = this.#life.owe<unknown>();
    this.#pool.run(t).then(settle.resolve, settle.reject);
    return promise;
  }

  /**
   * CRC32C of each `chunk`-byte piece of [ptr, ptr+len) (the last may be shorter), spread over
   * the pool as contiguous runs of pieces, one task per thread. Results in piece order.
   */
  async crc32cChunks(ptr: number, len: number, chunk: number): Promise<Uint32Array> {
    const pieces = Math.ceil(len / chunk);
    const descs = this.#dm.alloc(pieces * CRC_DESC_BYTES);
    try {
      const dv = this.#dm.dataView();
      for (let k = 0; k < pieces; k++) {
        writeCrcDesc(dv, descs + k * CRC_DESC_BYTES, ptr + k * chunk, Math.min(chunk, len - k * chunk), 0);
      }
      const per = Math.ceil(pieces / Math.max(1, this.threads));
      const tasks: Promise<unknown>[] = [];
      for (let k = 0; k < pieces; k += per) tasks.push(this.run('crc32cBatch', [descs + k * CRC_DESC_BYTES, Math.min(per, pieces - k)]));
      await Promise.all(tasks);
      const out = new Uint32Array(pieces);
      const v = this.#dm.dataView();
      for (let k = 0; k < pieces; k++) out[k] = crcDescOut(v, descs + k * CRC_DESC_BYTES);
      return out;
    } finally {
      this.#dm.free(descs);
    }
  }

  /** Stop the threads; tasks still running reject with ERR_CLOSED. Every call returns the first call's promise. */
  close(): Promise<void> {
    return this.#life.close(async () => {
      // Owed tasks settle first, so piscina's termination error never reaches a caller.
      this.#life.end();
      await this.#pool.destroy();
    });
  }
}
