// Content-defined chunking (FastCDC, keyed gear table; assembly/cdc.ts) for plain Uint8Arrays,
// and the pieces every user of the kernel shares: option checking, the mask arithmetic, the
// keyed table derivation and the state-record writer. The dedup data path (src/dedup/chunker.ts)
// runs the same kernel on bytes already in device memory with these same helpers.
//
// Why a key: with a public gear table, the sequence of chunk lengths is a function of the content
// alone, so anyone who sees lengths (on a wire, in a store's stats) can test whether a known file
// went through. With the table derived from a secret key, the boundaries are a secret of the key's
// holders (docs/dedup.md, "Keyed chunking", for the attacks and the limits of this defence).
import { hkdfSync } from 'node:crypto';
import { ErrorCode, SabreError } from '../core/errors.js';
import { CDC_AREA, own as ctx, SCRATCH_BYTES, STATE_BYTES } from './scratch.js';

export interface CdcOptions {
  /**
   * Secret the gear table is derived from (HKDF-SHA256), so boundaries differ per key. Both ends
   * of a dedup transfer need only agree on it if they chunk the same data; default: a fixed
   * public key (boundaries then fingerprint content: fine for local use, not on a wire).
   */
  key?: Uint8Array;
  /** Average (target) chunk size, a power of two in 256..2^26. Default 16 KiB. */
  avg?: number;
  /** Minimum chunk size (no cut before it), ≥ 64 and ≤ avg. Default avg / 4. */
  min?: number;
  /** Maximum chunk size (always cut there), ≥ avg and < 2^31. Default avg * 4. */
  max?: number;
  /**
   * Normalization level (FastCDC "NC"): the mask before the average has this many bits more than
   * log2(avg), the one after it this many fewer, which narrows the size distribution. 0..3,
   * default 2 (the FastCDC paper's recommendation).
   */
  normalization?: number;
}

export interface CdcParams {
  readonly avg: number;
  readonly min: number;
  readonly max: number;
  readonly normalization: number;
  /** Mask before the normalization point (avg): log2(avg) + normalization bits. */
  readonly maskS: bigint;
  /** Mask from the normalization point on: log2(avg) - normalization bits. */
  readonly maskL: bigint;
}

export const CDC_DEFAULT_AVG = 16 * 1024;
export const CDC_TABLE_BYTES = 4096;
export const CDC_STATE_BYTES = 64;
/** "CDC" + layout version 1, at state +60 (lets TypeScript recognise a record). */
export const CDC_STATE_MAGIC = 0x01434443;

const KDF_SALT = new TextEncoder().encode('sabre/cdc/v1');
const KDF_INFO = new TextEncoder().encode('gear table');
const DEFAULT_KEY = new Uint8Array(0);

/** Bits [63-k, 62]: bit 63 stays out (assembly/cdc.ts: it makes the two-byte step exact). */
function mask(k: number): bigint {
  return ((1n << BigInt(k)) - 1n) << BigInt(63 - k);
}

const isPow2 = (n: number): boolean => Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;

function bad(msg: string): never {
  throw new SabreError(ErrorCode.InvalidArgument, `chunker: ${msg}`);
}

/** Checked parameters with defaults filled in. */
export function cdcParams(o: CdcOptions = {}): CdcParams {
  if (o === null || typeof o !== 'object') bad('options must be an object');
  const avg = o.avg ?? CDC_DEFAULT_AVG;
  if (!isPow2(avg) || avg < 256 || avg > 1 << 26) bad(`avg must be a power of two in 256..2^26, got ${String(avg)}`);
  const min = o.min ?? avg / 4;
  const max = o.max ?? avg * 4;
  const nc = o.normalization ?? 2;
  if (!Number.isInteger(min) || min < 64 || min > avg) bad(`min must be an integer in 64..avg, got ${String(min)}`);
  if (!Number.isInteger(max) || max < avg || max >= 2 ** 31) bad(`max must be an integer in avg..2^31-1, got ${String(max)}`);
  if (!Number.isInteger(nc) || nc < 0 || nc > 3) bad(`normalization must be 0..3, got ${String(nc)}`);
  if (o.key !== undefined && !(o.key instanceof Uint8Array)) bad('key must be a Uint8Array');
  const bits = Math.log2(avg);
  return { avg, min, max, normalization: nc, maskS: mask(bits + nc), maskL: mask(bits - nc) };
}

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
