// XXH3-128 (xxHash 0.8 `XXH3_128bits_withSeed`), one-shot and resumable streaming.
//
// Mechanism M4 updates a chunk's hash packet by packet, possibly on different worker threads,
// so the streaming state is a fixed-size record in shared memory, not anything held by an
// instance: every byte the next update or the digest needs is in the record, and any instance
// of this module over the same memory can pick it up. Globals below are per-instance scratch
// only (they never outlive one exported call).
//
// State record (XXH128_STATE_SIZE = 640 bytes, caller-given address, 64-byte aligned, LE):
//   +0    acc[8]        u64 × 8   the eight lane accumulators
//   +64   secret[192]   kSecret with the seed folded in (XXH3_initCustomSecret); kSecret
//                                  itself for seed 0. Only used once the input exceeds 240 bytes.
//   +256  prev[64]      the 64 input bytes just before buffer[0] once any stripe has been
//                                  consumed; it sits right before `buffer` so that the final
//                                  (possibly overlapping) stripe is always the 64 contiguous bytes
//                                  ending at buffer + bufferedSize
//   +320  buffer[256]   unconsumed input (the reference's internal buffer: 4 stripes)
//   +576  totalLen      u64
//   +584  seed          u64
//   +592  bufferedSize  u32       bytes in buffer (1..256 once totalLen > 0)
//   +596  stripesSoFar  u32       stripes consumed in the current block (0..15)
//   +600  magic         u32       XXH128_STATE_MAGIC, written by reset (lets TypeScript
//                                  recognise a record; the kernel does not check it)
//   +604  reserved up to 640 (records can be packed at 640-byte strides and stay 64-aligned)
//
// Stream invariant (as in the reference): whole stripes are consumed only while at least one
// more input byte is known to follow, so the last stripe always takes the special secret
// offset, and digest never has to undo anything: it reads the record and writes 16 bytes.

// @ts-ignore: decorator
@inline const PRIME32_1: u64 = 0x9E3779B1;
// @ts-ignore: decorator
@inline const PRIME32_2: u64 = 0x85EBCA77;
// @ts-ignore: decorator
@inline const PRIME32_3: u64 = 0xC2B2AE3D;
// @ts-ignore: decorator
@inline const PRIME64_1: u64 = 0x9E3779B185EBCA87;
// @ts-ignore: decorator
@inline const PRIME64_2: u64 = 0xC2B2AE3D27D4EB4F;
// @ts-ignore: decorator
@inline const PRIME64_3: u64 = 0x165667B19E3779F9;
// @ts-ignore: decorator
@inline const PRIME64_4: u64 = 0x85EBCA77C2B2AE63;
// @ts-ignore: decorator
@inline const PRIME64_5: u64 = 0x27D4EB2F165667C5;
// @ts-ignore: decorator
@inline const PRIME_MX1: u64 = 0x165667919E3779F9;
// @ts-ignore: decorator
@inline const PRIME_MX2: u64 = 0x9FB21C651E98DF25;

// @ts-ignore: decorator
@inline const SECRET_SIZE: usize = 192;
// @ts-ignore: decorator
@inline const SECRET_SIZE_MIN: usize = 136;
// @ts-ignore: decorator
@inline const STRIPE_LEN: usize = 64;
// @ts-ignore: decorator
@inline const STRIPES_PER_BLOCK: u32 = 16; // (SECRET_SIZE - STRIPE_LEN) / 8
// @ts-ignore: decorator
@inline const SECRET_LIMIT: usize = 128; // SECRET_SIZE - STRIPE_LEN: scramble key offset
// @ts-ignore: decorator
@inline const SECRET_LASTACC: usize = 121; // SECRET_LIMIT - 7
// @ts-ignore: decorator
@inline const MERGE_LO: usize = 11;
// @ts-ignore: decorator
@inline const MERGE_HI: usize = 117; // SECRET_SIZE - 64 - 11
// @ts-ignore: decorator
@inline const BUFFER_SIZE: usize = 256;

// Record layout (see the header comment).
// @ts-ignore: decorator
@inline const ST_ACC: usize = 0;
// @ts-ignore: decorator
@inline const ST_SECRET: usize = 64;
// @ts-ignore: decorator
@inline const ST_PREV: usize = 256;
// @ts-ignore: decorator
@inline const ST_BUFFER: usize = 320;
// @ts-ignore: decorator
@inline const ST_TOTAL: usize = 576;
// @ts-ignore: decorator
@inline const ST_SEED: usize = 584;
// @ts-ignore: decorator
@inline const ST_BUFFERED: usize = 592;
// @ts-ignore: decorator
@inline const ST_SOFAR: usize = 596;
// @ts-ignore: decorator
@inline const ST_MAGIC: usize = 600;
// @ts-ignore: decorator
@inline const STATE_SIZE: u32 = 640;
/** "XH3" + layout version 1. */
// @ts-ignore: decorator
@inline const STATE_MAGIC: u32 = 0x01334858;

/** The default secret (XXH3_kSecret, from FARSH). Constant static data: safe to re-initialise. */
const KSECRET: usize = memory.data<u8>([
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
], 64);

// Per-instance scratch: the 128-bit result / product of the last helper call (AssemblyScript
// has no multi-value returns), and the accumulators while a long input is being consumed.
let hLo: u64 = 0;
let hHi: u64 = 0;
let A0: v128 = i64x2(0, 0);
let A1: v128 = i64x2(0, 0);
let A2: v128 = i64x2(0, 0);
let A3: v128 = i64x2(0, 0);

// ---------------------------------------------------------------- scalar helpers

/** 64×64→128 multiply into (hLo, hHi). WASM has no mulhi, so the high half is schoolbook. */
// @ts-ignore: decorator
@inline function mult128(a: u64, b: u64): void {
  const aL = a & 0xFFFFFFFF, aH = a >> 32;
  const bL = b & 0xFFFFFFFF, bH = b >> 32;
  const ll = aL * bL;
  const hl = aH * bL;
  const lh = aL * bH;
  const hh = aH * bH;
  const cross = (ll >> 32) + (hl & 0xFFFFFFFF) + lh;
  hHi = (hl >> 32) + (cross >> 32) + hh;
  hLo = a * b;
}

/** Low 64 bits of the 128-bit product XOR its high 64 bits. */
function mulFold64(a: u64, b: u64): u64 {
  mult128(a, b);
  return hLo ^ hHi;
}

// @ts-ignore: decorator
@inline function avalanche3(h: u64): u64 {
  h ^= h >> 37;
  h *= PRIME_MX1;
  return h ^ (h >> 32);
}

// @ts-ignore: decorator
@inline function avalanche64(h: u64): u64 {
  h ^= h >> 33;
  h *= PRIME64_2;
  h ^= h >> 29;
  h *= PRIME64_3;
  return h ^ (h >> 32);
}

// @ts-ignore: decorator
@inline function mix16B(p: usize, s: usize, seed: u64): u64 {
  return mulFold64(load<u64>(p) ^ (load<u64>(s) + seed), load<u64>(p, 8) ^ (load<u64>(s, 8) - seed));
}

// mix32B over the (hLo, hHi) accumulator pair.
// @ts-ignore: decorator
@inline function mix32B(p1: usize, p2: usize, s: usize, seed: u64): void {
  let lo = hLo, hi = hHi;
  lo += mix16B(p1, s, seed);
  lo ^= load<u64>(p2) + load<u64>(p2, 8);
  hi += mix16B(p2, s + 16, seed);
  hi ^= load<u64>(p1) + load<u64>(p1, 8);
  hLo = lo;
  hHi = hi;
}

// ---------------------------------------------------------------- short inputs (≤ 240 bytes)
// These take the seed directly and always read the default secret, as the reference does for
// XXH3_128bits_withSeed below XXH3_MIDSIZE_MAX.

function len1to3(p: usize, len: usize, seed: u64): void {
  const s = KSECRET;
  const c1 = <u32>load<u8>(p);
  const c2 = <u32>load<u8>(p + (len >> 1));
  const c3 = <u32>load<u8>(p + len - 1);
  const combinedl: u32 = (c1 << 16) | (c2 << 24) | c3 | (<u32>len << 8);
  const combinedh: u32 = rotl<u32>(bswap<u32>(combinedl), 13);
  const bitflipl = <u64>(load<u32>(s) ^ load<u32>(s, 4)) + seed;
  const bitfliph = <u64>(load<u32>(s, 8) ^ load<u32>(s, 12)) - seed;
  hLo = avalanche64(<u64>combinedl ^ bitflipl);
  hHi = avalanche64(<u64>combinedh ^ bitfliph);
}

function len4to8(p: usize, len: usize, seed: u64): void {
  const s = KSECRET;
  seed ^= <u64>bswap<u32>(<u32>seed) << 32;
  const inLo = <u64>load<u32>(p);
  const inHi = <u64>load<u32>(p + len - 4);
  const in64 = inLo + (inHi << 32);
  const bitflip = (load<u64>(s, 16) ^ load<u64>(s, 24)) + seed;
  const keyed = in64 ^ bitflip;
  mult128(keyed, PRIME64_1 + (<u64>len << 2));
  let lo = hLo, hi = hHi;
  hi += lo << 1;
  lo ^= hi >> 3;
  lo ^= lo >> 35;
  lo *= PRIME_MX2;
  lo ^= lo >> 28;
  hLo = lo;
  hHi = avalanche3(hi);
}

function len9to16(p: usize, len: usize, seed: u64): void {
  const s = KSECRET;
  const bitflipl = (load<u64>(s, 32) ^ load<u64>(s, 40)) - seed;
  const bitfliph = (load<u64>(s, 48) ^ load<u64>(s, 56)) + seed;
  const inLo = load<u64>(p);
  let inHi = load<u64>(p + len - 8);
  mult128(inLo ^ inHi ^ bitflipl, PRIME64_1);
  let mLo = hLo, mHi = hHi;
  mLo += <u64>(len - 1) << 54;
  inHi ^= bitfliph;
  mHi += inHi + (inHi & 0xFFFFFFFF) * (PRIME32_2 - 1);
  mLo ^= bswap<u64>(mHi);
  mult128(mLo, PRIME64_2);
  const lo = hLo;
  const hi = hHi + mHi * PRIME64_2;
  hLo = avalanche3(lo);
  hHi = avalanche3(hi);
}

function len0(seed: u64): void {
  const s = KSECRET;
  hLo = avalanche64(seed ^ (load<u64>(s, 64) ^ load<u64>(s, 72)));
  hHi = avalanche64(seed ^ (load<u64>(s, 80) ^ load<u64>(s, 88)));
}

// @ts-ignore: decorator
@inline function finishMid(len: usize, seed: u64): void {
  const aLo = hLo, aHi = hHi;
  const lo = aLo + aHi;
  const hi = aLo * PRIME64_1 + aHi * PRIME64_4 + (<u64>len - seed) * PRIME64_2;
  hLo = avalanche3(lo);
  hHi = 0 - avalanche3(hi);
}

function len17to128(p: usize, len: usize, seed: u64): void {
  const s = KSECRET;
  hLo = <u64>len * PRIME64_1;
  hHi = 0;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) mix32B(p + 48, p + len - 64, s + 96, seed);
      mix32B(p + 32, p + len - 48, s + 64, seed);
    }
    mix32B(p + 16, p + len - 32, s + 32, seed);
  }
  mix32B(p, p + len - 16, s, seed);
  finishMid(len, seed);
}

function len129to240(p: usize, len: usize, seed: u64): void {
  const s = KSECRET;
  const rounds = len >> 5;
  hLo = <u64>len * PRIME64_1;
  hHi = 0;
  for (let i: usize = 0; i < 4; i++) {
    mix32B(p + 32 * i, p + 32 * i + 16, s + 32 * i, seed);
  }
  hLo = avalanche3(hLo);
  hHi = avalanche3(hHi);
  for (let i: usize = 4; i < rounds; i++) {
    mix32B(p + 32 * i, p + 32 * i + 16, s + 3 + 32 * (i - 4), seed);
  }
  mix32B(p + len - 16, p + len - 32, s + SECRET_SIZE_MIN - 17 - 16, 0 - seed);
  finishMid(len, seed);
}

/** XXH3_128bits_withSeed for len ≤ 240, into (hLo, hHi). */
function hashShort(p: usize, len: usize, seed: u64): void {
  if (len <= 16) {
    if (len > 8) len9to16(p, len, seed);
    else if (len >= 4) len4to8(p, len, seed);
    else if (len) len1to3(p, len, seed);
    else len0(seed);
  } else if (len <= 128) {
    len17to128(p, len, seed);
  } else {
    len129to240(p, len, seed);
  }
}

// ---------------------------------------------------------------- long inputs (> 240 bytes)

/**
 * One 16-byte lane pair of XXH3_accumulate_512: acc += swap64(d) + lo32(d^k) * hi32(d^k).
 * WASM has no "multiply even u32 lanes" (pmuludq); extmul_low multiplies u32 lanes 0,1, so
 * the lo and hi halves of the two 64-bit lanes are first gathered into lanes 0,1.
 */
// @ts-ignore: decorator
@inline function accLane(acc: v128, d: v128, k: v128): v128 {
  const dk = v128.xor(d, k);
  const lo = v128.shuffle<u32>(dk, dk, 0, 2, 0, 2);
  const hi = v128.shuffle<u32>(dk, dk, 1, 3, 1, 3);
  const prod = i64x2.extmul_low_i32x4_u(lo, hi);
  const sw = v128.shuffle<u64>(d, d, 1, 0);
  return i64x2.add(acc, i64x2.add(prod, sw));
}

/** XXH3_scrambleAcc lane pair: acc = (acc ^ (acc >> 47) ^ k) * PRIME32_1. */
// @ts-ignore: decorator
@inline function scrambleLane(acc: v128, k: v128): v128 {
  const x = v128.xor(v128.xor(acc, i64x2.shr_u(acc, 47)), k);
  return i64x2.mul(x, i64x2.splat(PRIME32_1));
}

/**
 * Consume `n` whole stripes at `p` into the accumulators (globals A0..A3), continuing a block
 * that already has `soFar` stripes; scramble each time a block fills. Returns the new soFar.
 *
 * Seeded (S = u64): the secret is kSecret and the seed is folded into each key on the fly
 * (even 64-bit secret words get +seed, odd ones -seed), so the one-shot seeded hash needs no
 * memory for a derived secret. Unseeded (S = u32): keys are read as they are from `secret`
 * (kSecret, or the derived secret held in a stream record).
 */
function consume<S>(p: usize, n: usize, secret: usize, seed: u64, soFar: u32): u32 {
  let a0 = A0, a1 = A1, a2 = A2, a3 = A3;
  const adjE = i64x2(<i64>seed, <i64>(0 - seed));
  const adjO = i64x2(<i64>(0 - seed), <i64>seed);
  while (n) {
    let todo = <usize>(STRIPES_PER_BLOCK - soFar);
    if (todo > n) todo = n;
    let s = secret + (<usize>soFar << 3);
    const end = p + (todo << 6);
    if (sizeof<S>() == 8) {
      let odd = (soFar & 1) != 0;
      while (p < end) {
        const adj = odd ? adjO : adjE;
        a0 = accLane(a0, v128.load(p, 0), i64x2.add(v128.load(s, 0), adj));
        a1 = accLane(a1, v128.load(p, 16), i64x2.add(v128.load(s, 16), adj));
        a2 = accLane(a2, v128.load(p, 32), i64x2.add(v128.load(s, 32), adj));
        a3 = accLane(a3, v128.load(p, 48), i64x2.add(v128.load(s, 48), adj));
        odd = !odd;
        p += 64;
        s += 8;
      }
    } else {
      while (p < end) {
        a0 = accLane(a0, v128.load(p, 0), v128.load(s, 0));
        a1 = accLane(a1, v128.load(p, 16), v128.load(s, 16));
        a2 = accLane(a2, v128.load(p, 32), v128.load(s, 32));
        a3 = accLane(a3, v128.load(p, 48), v128.load(s, 48));
        p += 64;
        s += 8;
      }
    }
    n -= todo;
    soFar += <u32>todo;
    if (soFar == STRIPES_PER_BLOCK) {
      const k = secret + SECRET_LIMIT;
      if (sizeof<S>() == 8) {
        // word 16 is even: +seed, -seed, ...
        a0 = scrambleLane(a0, i64x2.add(v128.load(k, 0), adjE));
        a1 = scrambleLane(a1, i64x2.add(v128.load(k, 16), adjE));
        a2 = scrambleLane(a2, i64x2.add(v128.load(k, 32), adjE));
        a3 = scrambleLane(a3, i64x2.add(v128.load(k, 48), adjE));
      } else {
        a0 = scrambleLane(a0, v128.load(k, 0));
        a1 = scrambleLane(a1, v128.load(k, 16));
        a2 = scrambleLane(a2, v128.load(k, 32));
        a3 = scrambleLane(a3, v128.load(k, 48));
      }
      soFar = 0;
    }
  }
  A0 = a0;
  A1 = a1;
  A2 = a2;
  A3 = a3;
  return soFar;
}

/**
 * The 64-bit secret word at byte offset `off`: read as is when seed is 0 (kSecret or a derived
 * secret in memory), otherwise derived from kSecret on the fly — the merge and last-stripe
 * offsets (11, 117, 121) are not 8-aligned, so such a word straddles two derived words.
 */
function secretWord(secret: usize, off: usize, seed: u64): u64 {
  if (seed == 0) return load<u64>(secret + off);
  const w = off >> 3;
  const r = <u64>(off & 7) << 3;
  const w0 = load<u64>(secret + (w << 3)) + ((w & 1) ? 0 - seed : seed);
  if (r == 0) return w0;
  const w1 = load<u64>(secret + (w << 3) + 8) + ((w & 1) ? seed : 0 - seed);
  return (w0 >> r) | (w1 << (64 - r));
}

// @ts-ignore: decorator
@inline function keyPair(secret: usize, off: usize, seed: u64): v128 {
  return i64x2(<i64>secretWord(secret, off, seed), <i64>secretWord(secret, off + 8, seed));
}

/** The final (possibly overlapping) stripe ending at the last input byte. */
function lastStripe(p: usize, secret: usize, seed: u64): void {
  const o = SECRET_LASTACC;
  A0 = accLane(A0, v128.load(p, 0), keyPair(secret, o, seed));
  A1 = accLane(A1, v128.load(p, 16), keyPair(secret, o + 16, seed));
  A2 = accLane(A2, v128.load(p, 32), keyPair(secret, o + 32, seed));
  A3 = accLane(A3, v128.load(p, 48), keyPair(secret, o + 48, seed));
}

// @ts-ignore: decorator
@inline function mix2Accs(acc: v128, secret: usize, off: usize, seed: u64): u64 {
  return mulFold64(
    <u64>i64x2.extract_lane(acc, 0) ^ secretWord(secret, off, seed),
    <u64>i64x2.extract_lane(acc, 1) ^ secretWord(secret, off + 8, seed),
  );
}

function mergeAccs(secret: usize, off: usize, seed: u64, start: u64): u64 {
  let r = start;
  r += mix2Accs(A0, secret, off, seed);
  r += mix2Accs(A1, secret, off + 16, seed);
  r += mix2Accs(A2, secret, off + 32, seed);
  r += mix2Accs(A3, secret, off + 48, seed);
  return avalanche3(r);
}

// @ts-ignore: decorator
@inline function initAcc(): void {
  A0 = i64x2(<i64>PRIME32_3, <i64>PRIME64_1);
  A1 = i64x2(<i64>PRIME64_2, <i64>PRIME64_3);
  A2 = i64x2(<i64>PRIME64_4, <i64>PRIME32_2);
  A3 = i64x2(<i64>PRIME64_5, <i64>PRIME32_1);
}

/** Final 128-bit value from the accumulators (globals), into (hLo, hHi). */
function finishLong(secret: usize, seed: u64, totalLen: u64): void {
  const lo = mergeAccs(secret, MERGE_LO, seed, totalLen * PRIME64_1);
  const hi = mergeAccs(secret, MERGE_HI, seed, ~(totalLen * PRIME64_2));
  hLo = lo;
  hHi = hi;
}

// ---------------------------------------------------------------- one-shot

/** XXH3_128bits_withSeed(ptr, len, seed): writes low64 then high64 (LE) at outPtr. */
export function xxh128(ptr: usize, len: usize, seed: u64, outPtr: usize): void {
  if (len <= 240) {
    hashShort(ptr, len, seed);
  } else {
    initAcc();
    const n = (len - 1) >> 6;
    if (seed == 0) consume<u32>(ptr, n, KSECRET, 0, 0);
    else consume<u64>(ptr, n, KSECRET, seed, 0);
    lastStripe(ptr + len - STRIPE_LEN, KSECRET, seed);
    finishLong(KSECRET, seed, <u64>len);
  }
  store<u64>(outPtr, hLo);
  store<u64>(outPtr, hHi, 8);
}

// ---------------------------------------------------------------- streaming over a state record

/** Bytes a state record takes (records must start 64-byte aligned). */
export function xxh128StateSize(): u32 {
  return STATE_SIZE;
}

/** XXH3_128bits_reset_withSeed: start a new stream in the record at statePtr. */
export function xxh128Reset(statePtr: usize, seed: u64): void {
  const st = statePtr;
  store<u64>(st + ST_ACC, PRIME32_3, 0);
  store<u64>(st + ST_ACC, PRIME64_1, 8);
  store<u64>(st + ST_ACC, PRIME64_2, 16);
  store<u64>(st + ST_ACC, PRIME64_3, 24);
  store<u64>(st + ST_ACC, PRIME64_4, 32);
  store<u64>(st + ST_ACC, PRIME32_2, 40);
  store<u64>(st + ST_ACC, PRIME64_5, 48);
  store<u64>(st + ST_ACC, PRIME32_1, 56);
  // XXH3_initCustomSecret: 16-byte rounds of (+seed, -seed); kSecret itself when seed is 0.
  const adj = i64x2(<i64>seed, <i64>(0 - seed));
  for (let i: usize = 0; i < SECRET_SIZE; i += 16) {
    v128.store(st + ST_SECRET + i, i64x2.add(v128.load(KSECRET + i), adj));
  }
  store<u64>(st + ST_TOTAL, 0);
  store<u64>(st + ST_SEED, seed);
  store<u32>(st + ST_BUFFERED, 0);
  store<u32>(st + ST_SOFAR, 0);
  store<u32>(st + ST_MAGIC, STATE_MAGIC);
}

/** XXH3_128bits_update: append len bytes at ptr to the stream in the record at statePtr. */
export function xxh128Update(statePtr: usize, ptr: usize, len: usize): void {
  const st = statePtr;
  const buffer = st + ST_BUFFER;
  let buffered = <usize>load<u32>(st + ST_BUFFERED);
  store<u64>(st + ST_TOTAL, load<u64>(st + ST_TOTAL) + <u64>len);

  if (len <= BUFFER_SIZE - buffered) { // (not buffered + len: that could wrap near 4 GiB)
    memory.copy(buffer + buffered, ptr, len);
    store<u32>(st + ST_BUFFERED, <u32>(buffered + len));
    return;
  }

  // More than a buffer's worth in total: whole stripes get consumed, always keeping 1..64
  // bytes back for the last stripe (which takes a different secret offset).
  const secret = st + ST_SECRET;
  let soFar = load<u32>(st + ST_SOFAR);
  A0 = v128.load(st + ST_ACC, 0);
  A1 = v128.load(st + ST_ACC, 16);
  A2 = v128.load(st + ST_ACC, 32);
  A3 = v128.load(st + ST_ACC, 48);
  const end = ptr + len;
  if (buffered) {
    const fill = BUFFER_SIZE - buffered;
    memory.copy(buffer + buffered, ptr, fill);
    ptr += fill;
    soFar = consume<u32>(buffer, BUFFER_SIZE / STRIPE_LEN, secret, 0, soFar);
    memory.copy(st + ST_PREV, buffer + BUFFER_SIZE - STRIPE_LEN, STRIPE_LEN);
  }
  // ptr < end here: buffered + len > BUFFER_SIZE.
  const n = (end - ptr - 1) >> 6;
  if (n) {
    soFar = consume<u32>(ptr, n, secret, 0, soFar);
    ptr += n << 6;
    memory.copy(st + ST_PREV, ptr - STRIPE_LEN, STRIPE_LEN);
  }
  buffered = end - ptr;
  memory.copy(buffer, ptr, buffered);
  store<u32>(st + ST_BUFFERED, <u32>buffered);
  store<u32>(st + ST_SOFAR, soFar);
  v128.store(st + ST_ACC, A0, 0);
  v128.store(st + ST_ACC, A1, 16);
  v128.store(st + ST_ACC, A2, 32);
  v128.store(st + ST_ACC, A3, 48);
}

/**
 * XXH3_128bits_digest: the hash of everything appended so far, written as low64 then high64
 * (LE) at outPtr. Reads the record only, so more updates may follow.
 */
export function xxh128Digest(statePtr: usize, outPtr: usize): void {
  const st = statePtr;
  const total = load<u64>(st + ST_TOTAL);
  const seed = load<u64>(st + ST_SEED);
  const buffer = st + ST_BUFFER;
  if (total <= 240) {
    hashShort(buffer, <usize>total, seed);
  } else {
    const secret = st + ST_SECRET;
    const buffered = <usize>load<u32>(st + ST_BUFFERED);
    A0 = v128.load(st + ST_ACC, 0);
    A1 = v128.load(st + ST_ACC, 16);
    A2 = v128.load(st + ST_ACC, 32);
    A3 = v128.load(st + ST_ACC, 48);
    if (buffered > STRIPE_LEN) {
      consume<u32>(buffer, (buffered - 1) >> 6, secret, 0, load<u32>(st + ST_SOFAR));
    }
    // prev sits right before buffer, so this also covers buffered < 64.
    lastStripe(buffer + buffered - STRIPE_LEN, secret, 0);
    finishLong(secret, 0, total);
  }
  store<u64>(outPtr, hLo);
  store<u64>(outPtr, hHi, 8);
}

// ================================================================ XXH3-64
// XXH3_64bits_withSeed, one-shot, and the 64-bit digest of the same stream record (the
// accumulate step and the record are XXH3's, shared with the 128-bit variant: only the short
// paths and the final merge differ). The UDP transport's integrity trailer (docs/integrity.md)
// is this hash of the datagram: one-shot in place on receive, streamed over the gather list on
// send.

// @ts-ignore: decorator
@inline function rrmxmx(h: u64, len: u64): u64 {
  h ^= rotl<u64>(h, 49) ^ rotl<u64>(h, 24);
  h *= PRIME_MX2;
  h ^= (h >> 35) + len;
  h *= PRIME_MX2;
  return h ^ (h >> 28);
}

/** XXH3_64bits_withSeed for len ≤ 240 (default secret, seed applied directly). */
function hashShort64(p: usize, len: usize, seed: u64): u64 {
  const s = KSECRET;
  if (len <= 16) {
    if (len > 8) {
      const bitflip1 = (load<u64>(s, 24) ^ load<u64>(s, 32)) + seed;
      const bitflip2 = (load<u64>(s, 40) ^ load<u64>(s, 48)) - seed;
      const lo = load<u64>(p) ^ bitflip1;
      const hi = load<u64>(p + len - 8) ^ bitflip2;
      const acc = <u64>len + bswap<u64>(lo) + hi + mulFold64(lo, hi);
      return avalanche3(acc);
    }
    if (len >= 4) {
      const sd = seed ^ (<u64>bswap<u32>(<u32>seed) << 32);
      const in1 = <u64>load<u32>(p);
      const in2 = <u64>load<u32>(p + len - 4);
      const bitflip = (load<u64>(s, 8) ^ load<u64>(s, 16)) - sd;
      const in64 = in2 + (in1 << 32);
      return rrmxmx(in64 ^ bitflip, <u64>len);
    }
    if (len) {
      const c1 = <u32>load<u8>(p);
      const c2 = <u32>load<u8>(p + (len >> 1));
      const c3 = <u32>load<u8>(p + len - 1);
      const combined: u32 = (c1 << 16) | (c2 << 24) | c3 | (<u32>len << 8);
      const bitflip = <u64>(load<u32>(s) ^ load<u32>(s, 4)) + seed;
      return avalanche64(<u64>combined ^ bitflip);
    }
    return avalanche64(seed ^ (load<u64>(s, 56) ^ load<u64>(s, 64)));
  }
  let acc = <u64>len * PRIME64_1;
  if (len <= 128) {
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          acc += mix16B(p + 48, s + 96, seed);
          acc += mix16B(p + len - 64, s + 112, seed);
        }
        acc += mix16B(p + 32, s + 64, seed);
        acc += mix16B(p + len - 48, s + 80, seed);
      }
      acc += mix16B(p + 16, s + 32, seed);
      acc += mix16B(p + len - 32, s + 48, seed);
    }
    acc += mix16B(p, s, seed);
    acc += mix16B(p + len - 16, s + 16, seed);
    return avalanche3(acc);
  }
  // 129..240
  const rounds = len >> 4;
  for (let i: usize = 0; i < 8; i++) acc += mix16B(p + 16 * i, s + 16 * i, seed);
  acc = avalanche3(acc);
  for (let i: usize = 8; i < rounds; i++) acc += mix16B(p + 16 * i, s + 16 * (i - 8) + 3, seed);
  acc += mix16B(p + len - 16, s + SECRET_SIZE_MIN - 17, seed);
  return avalanche3(acc);
}

/** XXH3_64bits_withSeed(ptr, len, seed): writes the hash (LE u64) at outPtr. */
export function xxh3_64(ptr: usize, len: usize, seed: u64, outPtr: usize): void {
  let h: u64;
  if (len <= 240) {
    h = hashShort64(ptr, len, seed);
  } else {
    initAcc();
    const n = (len - 1) >> 6;
    if (seed == 0) consume<u32>(ptr, n, KSECRET, 0, 0);
    else consume<u64>(ptr, n, KSECRET, seed, 0);
    lastStripe(ptr + len - STRIPE_LEN, KSECRET, seed);
    h = mergeAccs(KSECRET, MERGE_LO, seed, <u64>len * PRIME64_1);
  }
  store<u64>(outPtr, h);
}

/**
 * XXH3_64bits_digest of the stream in the record at statePtr (started with xxh128Reset, fed
 * with xxh128Update: the record is the same): writes the hash (LE u64) at outPtr.
 */
export function xxh3_64Digest(statePtr: usize, outPtr: usize): void {
  const st = statePtr;
  const total = load<u64>(st + ST_TOTAL);
  const seed = load<u64>(st + ST_SEED);
  const buffer = st + ST_BUFFER;
  let h: u64;
  if (total <= 240) {
    h = hashShort64(buffer, <usize>total, seed);
  } else {
    const secret = st + ST_SECRET;
    const buffered = <usize>load<u32>(st + ST_BUFFERED);
    A0 = v128.load(st + ST_ACC, 0);
    A1 = v128.load(st + ST_ACC, 16);
    A2 = v128.load(st + ST_ACC, 32);
    A3 = v128.load(st + ST_ACC, 48);
    if (buffered > STRIPE_LEN) {
      consume<u32>(buffer, (buffered - 1) >> 6, secret, 0, load<u32>(st + ST_SOFAR));
    }
    lastStripe(buffer + buffered - STRIPE_LEN, secret, 0);
    h = mergeAccs(secret, MERGE_LO, 0, total * PRIME64_1);
  }
  store<u64>(outPtr, h);
}
