// Token buckets for the datagrams the UDP transport sends to addresses it keeps no state for
// (RESETs): one per device and one per destination host, so the device cannot be turned into
// a reflector (unlimited, one flood was answered with a RESET per datagram) and one host's flood does not use
// up what other hosts' genuine RESETs need. Bounded: at most `maxHosts` host buckets, the
// oldest forgotten first (a forgotten host starts again with a full bucket, which the device
// bucket still caps).

export class TokenBucket {
  private tokens: number;
  private at = -Infinity;

  /** `rate` tokens a second, at most `burst` saved up. */
  constructor(private readonly rate: number, private readonly burst: number) {
    this.tokens = burst;
  }

  take(nowMs: number): boolean {
    this.refill(nowMs);
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Give back a token taken for a reply that was not sent after all. */
  refund(): void {
    this.tokens = Math.min(this.burst, this.tokens + 1);
  }

  private refill(nowMs: number): void {
    if (nowMs > this.at) {
      if (this.at !== -Infinity) this.tokens = Math.min(this.burst, this.tokens + ((nowMs - this.at) * this.rate) / 1000);
      this.at = nowMs;
    }
  }
}

export class HostBuckets {
  private readonly buckets = new Map<string, TokenBucket>();

  constructor(private readonly rate: number, private readonly burst: number, private readonly maxHosts: number) {}

  get size(): number {
    return this.buckets.size;
  }

  take(host: string, nowMs: number): boolean {
    let b = this.buckets.get(host);
    if (b === undefined) {
      if (this.buckets.size >= this.maxHosts) {
        // Insertion order: the first key is the host tracked longest.
        const first = this.buckets.keys().next().value as string;
        this.buckets.delete(first);
      }
      b = new TokenBucket(this.rate, this.burst);
      this.buckets.set(host, b);
    }
    return b.take(nowMs);
  }
}
