// The chunker on the dedup data path: the FastCDC kernel (assembly/cdc.ts) over bytes already in
// device memory — its keyed table, its state record and its output lengths live in the arena, so
// chunking a region costs one JS→WASM call per ~16 K chunks and no copy. (sabre/kernels
// createChunker is the same kernel for ordinary Uint8Arrays.)
import { type CdcOptions, type CdcParams, CDC_STATE_BYTES, CDC_TABLE_BYTES, cdcParams, gearTable, writeCdcState } from '../kernels/cdc.js';
import type { DedupMemory } from './types.js';

/** Runs a kernel on another thread over the same memory (a KernelPool of the device). */
export interface KernelRunner {
  run(fn: string, args: Array<number | bigint>): Promise<unknown>;
}

const OUT_CAP = 16384;

export class DeviceChunker {
  readonly mem: DedupMemory;
  readonly params: CdcParams;
  readonly #table: number;
  readonly #state: number;
  readonly #out: number;
  #freed = false;

  constructor(mem: DedupMemory, o: CdcOptions = {}) {
    this.params = cdcParams(o);
    const table = gearTable(o.key);
    this.mem = mem;
    this.#table = mem.alloc(CDC_TABLE_BYTES + CDC_STATE_BYTES);
    this.#state = this.#table + CDC_TABLE_BYTES;
    this.#out = mem.alloc(OUT_CAP * 4);
    mem.u8().set(table, this.#table);
    mem.kernels.cdcPrepareTable(this.#table);
    writeCdcState(mem.dataView(), this.#state, this.params, this.#table);
  }

  /** Continue the stream over [addr, addr + len); lengths of the chunks that ended in it. */
  push(addr: number, len: number, out: number[] = []): number[] {
    const k = this.mem.kernels;
    let at = 0;
    while (at < len) {
      const n = k.cdcChunk(this.#state, addr + at, len - at, this.#out, OUT_CAP);
      const dv = this.mem.dataView();
      for (let i = 0; i < n; i++) out.push(dv.getUint32(this.#out + 4 * i, true));
      at += dv.getUint32(this.#state + 12, true);
    }
    return out;
  }

  /**
   * push() on a pool thread: the state record and the lengths are in shared memory, so the
   * stream continues wherever it ran last. The caller's thread is free meanwhile.
   */
  async pushOn(pool: KernelRunner, addr: number, len: number, out: number[] = []): Promise<number[]> {
    let at = 0;
    while (at < len) {
      const n = (await pool.run('cdcChunk', [this.#state, addr + at, len - at, this.#out, OUT_CAP])) as number;
      const dv = this.mem.dataView();
      for (let i = 0; i < n; i++) out.push(dv.getUint32(this.#out + 4 * i, true));
      at += dv.getUint32(this.#state + 12, true);
    }
    return out;
  }

  /** End the stream (the open chunk's length, if any); the chunker can start a new one. */
  finish(out: number[] = []): number[] {
    const last = this.mem.kernels.cdcFinish(this.#state);
    if (last > 0) out.push(last);
    return out;
  }

  /** Chunk lengths of [addr, addr + len) as a whole stream. */
  chunkAll(addr: number, len: number): number[] {
    this.mem.kernels.cdcFinish(this.#state);
    return this.finish(this.push(addr, len));
  }

  free(): void {
    if (this.#freed) return;
    this.#freed = true;
    this.mem.free(this.#table);
    this.mem.free(this.#out);
  }
}
