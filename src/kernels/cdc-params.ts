// The content-defined chunker's parameters and their rules, apart from the kernel (./cdc.ts):
// importing this instantiates no WebAssembly, so a sans-io core (src/dedup/send-core.ts) can
// check a peer's parameters by the rule the chunker applies.
import { ErrorCode, SabreError } from '../core/errors.js';

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

/** Bits [63-k, 62]: bit 63 stays out (assembly/cdc.ts: it makes the two-byte step exact). */
function mask(k: number): bigint {
  return ((1n << BigInt(k)) - 1n) << BigInt(63 - k);
}

const isPow2 = (n: number): boolean => Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;

/** A refused chunker option: the caller's misuse (ERR_INVALID_ARGUMENT). */
export function bad(msg: string): never {
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
 * Whether a peer's chunking parameters are ones cdcParams takes (the same rule, not a copy of
 * it): a dedup sender checks the receiver's HELLO with this, so parameters its chunker would
 * refuse are the peer's protocol error there, not the caller's invalid argument later.
 */
export function cdcParamsUsable(o: { avg: number; min: number; max: number; normalization: number }): boolean {
  try {
    cdcParams({ avg: o.avg, min: o.min, max: o.max, normalization: o.normalization });
    return true;
  } catch {
    return false;
  }
}
