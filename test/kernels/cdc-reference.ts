// FastCDC with normalized chunking one byte at a time, from the algorithm's definition
// (docs/dedup.md), with BigInt arithmetic: the kernel's multi-byte steps are checked against it,
// not assumed. Also the low-entropy generator the chunking tests share.
import { type CdcOptions, cdcParams, gearTable } from '../../src/kernels/cdc.js';

const M64 = (1n << 64n) - 1n;

/** Chunk lengths of `data` as one stream (they sum to data.length). */
export function reference(data: Uint8Array, o: CdcOptions): number[] {
  const p = cdcParams(o);
  const t = gearTable(o.key);
  const dv = new DataView(t.buffer, t.byteOffset, t.byteLength);
  const g = Array.from({ length: 256 }, (_, i) => dv.getBigUint64(i * 8, true));
  const out: number[] = [];
  let start = 0;
  while (start < data.length) {
    const left = data.length - start;
    if (left <= p.min) {
      out.push(left);
      break;
    }
    let fp = 0n;
    let len = 0;
    for (let k = p.min; k < Math.min(p.max, left); k++) {
      fp = ((fp << 1n) + g[data[start + k]!]!) & M64;
      const m = k + 1 <= p.avg ? p.maskS : p.maskL; // the chunk would end at length k+1
      if ((fp & m) === 0n) {
        len = k + 1;
        break;
      }
    }
    if (len === 0) len = Math.min(p.max, left);
    out.push(len);
    start += len;
  }
  return out;
}

/** Low-entropy data (runs and a small alphabet) finds the rarer cut paths too (max cuts, ties). */
export function mixed(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; ) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    const run = 1 + (x % 97);
    const v = (x >>> 8) & (x & 1 ? 0xff : 0x03);
    for (let j = 0; j < run && i < n; j++) out[i++] = x & 2 ? v : (v + j) & 0xff;
  }
  return out;
}
