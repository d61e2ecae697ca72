// Seeded randomness and recognisable payloads for the simulation and the tests around it: the
// same seed gives the same numbers, the same index the same bytes, so a run can be replayed and
// a misplaced or mixed-up payload is seen for what it is.

import { mulberry32 } from '../fuzz/rng.js';

/** mulberry32 (the fuzzer's generator): a float in [0, 1) per call. */
export const rng = mulberry32;

/** Seeded 32-bit ids in [1, 2^32): the endpoints' context ids and cookies, replayable. */
export function seededIds(seed: number): () => number {
  const r = rng(seed);
  return () => Math.floor(r() * 0xffffffff) + 1;
}

/** Deterministic payload bytes: the 4-byte index, then a stream keyed by it. */
export function makePayload(index: number, len: number): Uint8Array {
  const b = new Uint8Array(len);
  b[0] = index >>> 24;
  b[1] = index >>> 16;
  b[2] = index >>> 8;
  b[3] = index;
  let x = (index * 2654435761) >>> 0 || 1;
  for (let i = 4; i < len; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x;
  }
  return b;
}

export function payloadIndex(b: Uint8Array): number {
  return ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
