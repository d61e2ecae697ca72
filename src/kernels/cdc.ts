// Content-defined chunking (FastCDC, keyed gear table; assembly/cdc.ts) for plain Uint8Arrays,
// and the pieces every user of the kernel shares: option checking and the mask arithmetic
// (./cdc-params.ts: apart, so a protocol core checks a peer's parameters by the same rule without
// loading the kernel), the keyed table derivation and the state-record writer. The dedup data
// path (src/dedup/chunker.ts) runs the same kernel on bytes already in device memory.
//
// Why a key: with a public gear table, the sequence of chunk lengths is a function of the content
// alone, so anyone who sees lengths (on a wire, in a store's stats) can test whether a known file
// went through. With the table derived from a secret key, the boundaries are a secret of the key's
// holders (docs/dedup.md, "Keyed chunking", for the attacks and the limits of this defence).
import { hkdfSync } from 'node:crypto';
import { CDC_AREA, own as ctx, SCRATCH_BYTES, STATE_BYTES } from './scratch.js';
import { bad, type CdcOptions, type CdcParams, cdcParams } from './cdc-params.js';

export { CDC_DEFAULT_AVG, type CdcOptions, type CdcParams, cdcParams, cdcParamsUsable } from './cdc-params.js';

export const CDC_TABLE_BYTES = 4096;
export const CDC_STATE_BYTES = 64;
/** "CDC" + layout version 1, at state +60 (lets TypeScript recognise a record). */
export const CDC_STATE_MAGIC = 0x01434443;

const KDF_SALT = new TextEncoder().encode('sabre/cdc/v1');
const KDF_INFO = new TextEncoder().encode('gear table');
const DEFAULT_KEY = new Uint8Array(0);

/**
 * The 256 gear words (2048 bytes, little-endian u64) for a key: HKDF-SHA256 (RFC 5869) with a
 * fixed salt and label, so a table reveals nothing about the key and two keys give unrelated
 * tables. The kernel's second half (G << 1) is filled by cdcPrepareTable.
 */
export function gearTable(key: Uint8Array = DEFAULT_KEY): Uint8Array {
  if (!(key instanceof Uint8Array)) bad('key must be a Uint8Array');
  return new Uint8Array(hkdfSync('sha256', key, KDF_SALT, KDF_INFO, 2048));
}

/** Write a fresh state record at `st` for a table at `table` (both in the kernel's memory). */
export function writeCdcState(dv: DataView, st: number, p: CdcParams, table: number): void {
  for (let i = 0; i < CDC_STATE_BYTES; i += 4) dv.setUint32(st + i, 0, true);
  dv.setUint32(st + 16, p.min, true);
  dv.setUint32(st + 20, p.avg, true);
  dv.setUint32(st + 24, p.max, true);
  dv.setUint32(st + 28, table, true);
  dv.setBigUint64(st + 32, p.maskS, true);
  dv.setBigUint64(st + 40, p.maskL, true);
  dv.setUint32(st + 60, CDC_STATE_MAGIC, true);
}

// ---- sabre/kernels: chunking ordinary Uint8Arrays through the kernel context --------------------

const TABLE = ctx.stateBase + CDC_AREA;
const STATE = TABLE + CDC_TABLE_BYTES;
const OUT = STATE + CDC_STATE_BYTES;
const OUT_CAP = Math.floor((ctx.stateBase + STATE_BYTES - OUT) / 4);
const view = new DataView(ctx.memory.buffer);

export interface Chunker {
  /** Feed the next bytes of the stream; returns the lengths of the chunks that ended in them. */
  push(data: Uint8Array): number[];
  /** End the stream: the length of the last (open) chunk, if any; the chunker can start over. */
  finish(): number[];
  readonly params: CdcParams;
}

/** The chunker whose table and state are in the context's working slot (write-back, as xxh128). */
let resident: ChunkerImpl | null = null;

class ChunkerImpl implements Chunker {
  readonly params: CdcParams;
  readonly #slot = new Uint8Array(CDC_TABLE_BYTES + CDC_STATE_BYTES);

  constructor(o: CdcOptions) {
    this.params = cdcParams(o);
    this.#acquire(false);
    ctx.u8.set(gearTable(o.key), TABLE);
    ctx.kernels.cdcPrepareTable(TABLE);
    writeCdcState(view, STATE, this.params, TABLE);
  }

  #acquire(load: boolean): void {
    if (resident === this) return;
    const { u8 } = ctx;
    if (resident !== null) resident.#slot.set(u8.subarray(TABLE, STATE + CDC_STATE_BYTES));
    if (load) u8.set(this.#slot, TABLE);
    resident = this;
  }

  push(data: Uint8Array): number[] {
    if (!(data instanceof Uint8Array)) bad('push needs a Uint8Array');
    this.#acquire(true);
    const { kernels, u8, scratchBase } = ctx;
    const out: number[] = [];
    for (let off = 0; off < data.length; off += SCRATCH_BYTES) {
      const len = Math.min(SCRATCH_BYTES, data.length - off);
      u8.set(data.subarray(off, off + len), scratchBase);
      let at = 0;
      while (at < len) {
        const n = kernels.cdcChunk(STATE, scratchBase + at, len - at, OUT, OUT_CAP);
        for (let i = 0; i < n; i++) out.push(view.getUint32(OUT + 4 * i, true));
        at += view.getUint32(STATE + 12, true);
      }
    }
    return out;
  }

  finish(): number[] {
    this.#acquire(true);
    const last = ctx.kernels.cdcFinish(STATE);
    return last > 0 ? [last] : [];
  }
}

/** A streaming content-defined chunker: boundaries do not depend on how the stream is split. */
export function createChunker(o: CdcOptions = {}): Chunker {
  return new ChunkerImpl(o);
}

/** Chunk lengths of `data` as one stream (they sum to data.length). */
export function chunkLengths(data: Uint8Array, o: CdcOptions = {}): number[] {
  const c = createChunker(o);
  return [...c.push(data), ...c.finish()];
}
