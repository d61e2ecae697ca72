// The device secret of the UDP transport and what it signs: address-validation cookies (as
// QUIC's Retry token, RFC 9000 §8.1, and SCTP's state cookie, RFC 9260 §5.1.3) and reset
// tokens (as QUIC's stateless reset token, RFC 9000 §10.3.1). Both are HMAC-SHA256 (RFC 2104)
// truncated to 8 bytes, over fixed-layout inputs that start with a distinct label, so a
// cookie is never a token and neither can be made without the secret.
//
// A cookie binds the initiator's address, port and context id and the time it was minted:
// the receiver keeps no state for a first contact and recomputes the MAC when the cookie
// comes back. A token binds one of our context ids: a device that lost the context (idle
// reclaim) recomputes it, a device that restarted (new secret) cannot.
//
// HMAC is built from two one-shot crypto.hash() calls on preallocated buffers: createHmac()
// costs several times more a call, and cookies are on the flood path.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { UdpCookie } from '../../wire/udp.js';

/** Bytes kept of each MAC (64 bits: an off-path guess succeeds with probability 2^-64). */
export const MAC_LEN = 8;
const BLOCK = 64;
/** Longest host text bound as is; longer ones (scoped IPv6 with a long zone) are hashed first. */
const HOST_MAX = 64;
const LABEL_COOKIE = 0x43; // 'C'
const LABEL_TOKEN = 0x52; // 'R'
/** label, time, ctx, port, host length, host bytes (zero-padded). */
const COOKIE_MSG = 1 + 4 + 4 + 2 + 1 + HOST_MAX;
const TOKEN_MSG = 1 + 4;

export class DeviceSecret {
  private readonly inner: Buffer;
  private readonly outer: Buffer;

  /** `secret`: 32 random bytes by default; tests pass a fixed one. */
  constructor(secret: Uint8Array = randomBytes(32)) {
    if (secret.length < 16) throw new RangeError('the device secret needs at least 16 bytes');
    let key = Buffer.from(secret);
    if (key.length > BLOCK) key = hash('sha256', key, 'buffer');
    this.inner = Buffer.alloc(BLOCK + COOKIE_MSG);
    this.outer = Buffer.alloc(BLOCK + 32);
    for (let i = 0; i < BLOCK; i++) {
      const k = key[i] ?? 0;
      this.inner[i] = k ^ 0x36;
      this.outer[i] = k ^ 0x5c;
    }
  }

  /** A cookie for the initiator context `ctx` at `host`:`port`, minted at `nowMs`. */
  cookie(host: string, port: number, ctx: number, nowMs: number): UdpCookie {
    const time = Math.floor(nowMs) >>> 0 || 1;
    return { time, mac: this.cookieMac(host, port, ctx, time) };
  }

  /**
   * Whether `c` is a cookie we minted for exactly this address and context, at most
   * `lifetimeMs` ago. 'none': the all-zero block a first contact carries.
   */
  checkCookie(c: UdpCookie, host: string, port: number, ctx: number, nowMs: number, lifetimeMs: number): 'ok' | 'none' | 'expired' | 'bad' {
    if (c.time === 0) return 'none';
    // Signed age: a cookie from ahead of now is refused too (but for the 1 ms that minting at
    // time 0 rounds up, since 0 means "no cookie").
    const age = (Math.floor(nowMs) - c.time) | 0;
    if (age < -1 || age > lifetimeMs) return 'expired';
    return sameMac(c.mac, this.cookieMac(host, port, ctx, c.time)) ? 'ok' : 'bad';
  }

  /** The reset token of our context `ctx`. */
  token(ctx: number): Uint8Array {
    const m = this.inner;
    m[BLOCK] = LABEL_TOKEN;
    m.writeUInt32BE(ctx >>> 0, BLOCK + 1);
    return this.finish(TOKEN_MSG);
  }

  private cookieMac(host: string, port: number, ctx: number, time: number): Uint8Array {
    const m = this.inner;
    let o = BLOCK;
    m[o++] = LABEL_COOKIE;
    m.writeUInt32BE(time >>> 0, o);
    o += 4;
    m.writeUInt32BE(ctx >>> 0, o);
    o += 4;
    m.writeUInt16BE(port & 0xffff, o);
    o += 2;
    m.fill(0, o, o + 1 + HOST_MAX);
    if (Buffer.byteLength(host) > HOST_MAX) {
      // Its SHA-256 instead; the length byte 0xff says so (no plain text is that long here).
      hash('sha256', host, 'buffer').copy(m, o + 1);
      m[o] = 0xff;
    } else {
      m[o] = m.write(host, o + 1, HOST_MAX, 'utf8');
    }
    return this.finish(COOKIE_MSG);
  }

  private finish(msgLen: number): Uint8Array {
    const innerHash = hash('sha256', this.inner.subarray(0, BLOCK + msgLen), 'buffer');
    innerHash.copy(this.outer, BLOCK);
    return new Uint8Array(hash('sha256', this.outer, 'buffer').subarray(0, MAC_LEN));
  }
}

/** Constant-time comparison of two MACs (never leaks how many leading bytes matched). */
export function sameMac(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

export const ZERO_COOKIE: UdpCookie = Object.freeze({ time: 0, mac: new Uint8Array(MAC_LEN) }) as UdpCookie;
