// The fuzzer's randomness: one mulberry32 stream per input, derived from (campaign seed, input
// index), so input i's generator choices are the same in every run with that seed whatever
// happened before it (the values it learns by observing the live run — context ids, PSNs,
// STags, captured frames — are the only other ingredient; docs/fuzzing.md).

export type Rand = () => number;

export function mulberry32(seed: number): Rand {
  let s = seed >>> 0 || 1;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The stream for input `index` of campaign `seed` (a 32-bit mix of both). */
export function inputRand(seed: number, index: number): Rand {
  let h = Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(index >>> 0, 0x85ebca77) ^ Math.imul(Math.floor(index / 0x1_0000_0000), 0xc2b2ae3d);
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d);
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b);
  return mulberry32((h ^ (h >>> 16)) >>> 0);
}

/** Helpers over one stream. */
export class Gen {
  constructor(readonly r: Rand) {}
  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.r() * n);
  }
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }
  chance(p: number): boolean {
    return this.r() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  u32(): number {
    return (this.int(0x10000) * 0x10000 + this.int(0x10000)) >>> 0;
  }
  bytes(n: number): Uint8Array {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
  /** A 32-bit value near the interesting edges of `base` (0, 1, 2^31, 2^32-1, base±small, base±window). */
  edge32(base: number, window = 1024): number {
    switch (this.int(10)) {
      case 0: return 0;
      case 1: return 0xffffffff;
      case 2: return 0x80000000 + this.range(-2, 2) >>> 0;
      case 3: return (base + this.range(-3, 3)) >>> 0;
      case 4: return (base + window + this.range(-2, 2)) >>> 0;
      case 5: return (base - window + this.range(-2, 2)) >>> 0;
      case 6: return (base + 0x80000000 + this.range(-1, 1)) >>> 0;
      case 7: return (base + this.int(window)) >>> 0;
      case 8: return base >>> 0;
      default: return this.u32();
    }
  }
}
