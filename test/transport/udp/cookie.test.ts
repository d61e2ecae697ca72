// The device secret's MACs are HMAC-SHA256 (RFC 2104) exactly — checked against node's
// createHmac on the documented input layouts — and a cookie verifies only for the address,
// port, context and time it was minted for, within its lifetime.
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DeviceSecret } from '../../../src/transport/udp/cookie.js';

const KEY = Uint8Array.from({ length: 32 }, (_, i) => i * 7 + 1);

function refCookieMac(host: string, port: number, ctx: number, time: number): Uint8Array {
  const m = Buffer.alloc(1 + 4 + 4 + 2 + 1 + 64);
  m[0] = 0x43;
  m.writeUInt32BE(time >>> 0, 1);
  m.writeUInt32BE(ctx >>> 0, 5);
  m.writeUInt16BE(port, 9);
  const hb = Buffer.from(host);
  if (hb.length > 64) {
    // Over-long host text (a scoped IPv6 with a long zone): its SHA-256, marked by length 0xff.
    m[11] = 0xff;
    createHash('sha256').update(hb).digest().copy(m, 12);
  } else {
    m[11] = hb.length;
    hb.copy(m, 12);
  }
  return new Uint8Array(createHmac('sha256', KEY).update(m).digest().subarray(0, 8));
}

describe('DeviceSecret', () => {
  it('reset tokens and cookies are HMAC-SHA256 of the documented layouts, truncated to 8 bytes', () => {
    const s = new DeviceSecret(KEY);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffff_ffff }), (ctx) => {
        const want = createHmac('sha256', KEY).update(Buffer.from([0x52, ctx >>> 24, (ctx >>> 16) & 255, (ctx >>> 8) & 255, ctx & 255])).digest().subarray(0, 8);
        expect(Buffer.from(s.token(ctx)).equals(want)).toBe(true);
      }),
      { numRuns: 200, seed: 5 },
    );
    for (const host of ['127.0.0.1', '10.9.8.7', '::1', 'fe80::1:2:3:4%eth0', `fe80::1%${'z'.repeat(70)}`]) {
      const c = s.cookie(host, 4791, 0xabcdef01, 123456.7);
      expect(c.time).toBe(123456);
      expect(Array.from(c.mac)).toEqual(Array.from(refCookieMac(host, 4791, 0xabcdef01, 123456)));
    }
  });

  it('a cookie verifies only for its own address, port, context and within its lifetime', () => {
    const s = new DeviceSecret(KEY);
    const c = s.cookie('10.0.0.1', 1000, 42, 5000);
    expect(s.checkCookie(c, '10.0.0.1', 1000, 42, 5000, 30_000)).toBe('ok');
    expect(s.checkCookie(c, '10.0.0.1', 1000, 42, 35_000, 30_000)).toBe('ok');
    expect(s.checkCookie(c, '10.0.0.1', 1000, 42, 35_001, 30_000)).toBe('expired');
    expect(s.checkCookie(c, '10.0.0.1', 1000, 42, 4000, 30_000)).toBe('expired');
    expect(s.checkCookie(c, '10.0.0.2', 1000, 42, 5000, 30_000)).toBe('bad');
    expect(s.checkCookie(c, '10.0.0.1', 1001, 42, 5000, 30_000)).toBe('bad');
    expect(s.checkCookie(c, '10.0.0.1', 1000, 43, 5000, 30_000)).toBe('bad');
    expect(s.checkCookie({ time: c.time, mac: c.mac.map((b, i) => (i === 7 ? b ^ 1 : b)) }, '10.0.0.1', 1000, 42, 5000, 30_000)).toBe('bad');
    expect(s.checkCookie({ time: 0, mac: new Uint8Array(8) }, '10.0.0.1', 1000, 42, 5000, 30_000)).toBe('none');
    // Another device (another secret) does not accept it.
    expect(new DeviceSecret().checkCookie(c, '10.0.0.1', 1000, 42, 5000, 30_000)).toBe('bad');
    // A long host text is hashed first: two that share their first 64 bytes still differ.
    const long = 'x'.repeat(64);
    expect(Array.from(s.cookie(`${long}a`, 1, 1, 9).mac)).not.toEqual(Array.from(s.cookie(`${long}b`, 1, 1, 9).mac));
    expect(() => new DeviceSecret(new Uint8Array(8))).toThrow(RangeError);
  });
});
