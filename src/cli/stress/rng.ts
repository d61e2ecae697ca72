// xoshiro128** — small, fast, seedable; the stress mix must replay exactly from --seed.
export class Rng {
  private s = new Uint32Array(4);
  constructor(seed: number) {
    // splitmix32 to spread a small seed over the state
    let x = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.s[i] = (z ^ (z >>> 16)) >>> 0;
    }
  }
  u32(): number {
    const s = this.s;
    const r = Math.imul(rotl(Math.imul(s[1]!, 5), 7), 9) >>> 0;
    const t = s[1]! << 9;
    s[2] = s[2]! ^ s[0]!;
    s[3] = s[3]! ^ s[1]!;
    s[1] = s[1]! ^ s[2]!;
    s[0] = s[0]! ^ s[3]!;
    s[2] = s[2]! ^ t;
    s[3] = rotl(s[3]!, 11);
    return r;
  }
  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor((this.u32() / 2 ** 32) * (hi - lo + 1));
  }
  u64(): bigint {
    return (BigInt(this.u32()) << 32n) | BigInt(this.u32());
  }
  fill(b: Uint8Array): void {
    let i = 0;
    for (; i + 4 <= b.length; i += 4) {
      const v = this.u32();
      b[i] = v;
      b[i + 1] = v >>> 8;
      b[i + 2] = v >>> 16;
      b[i + 3] = v >>> 24;
    }
    for (; i < b.length; i++) b[i] = this.u32();
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
