// A dial's nonce (src/transport/tcp/dial-nonce.ts): a keyed hash of the address dialled. One
// device shows one listener one value (its dials there are one peer), another value to any other
// address, and two devices (two keys) differ toward the same listener.
import { describe, expect, it } from 'vitest';
import { DialNonces } from '../../../src/transport/tcp/dial-nonce.js';

describe('DialNonces', () => {
  it('one value per destination, the host written either way; other ports, hosts and devices differ', () => {
    const a = new DialNonces(new Uint8Array(32).fill(1));
    const b = new DialNonces(new Uint8Array(32).fill(2));
    const l = { host: '127.0.0.1', port: 4000 };
    expect(a.toward(l)).toBe(a.toward({ ...l }));
    expect(a.toward({ host: '::ffff:127.0.0.1', port: 4000 })).toBe(a.toward(l));
    expect(a.toward({ host: 'LocalHost', port: 1 })).toBe(a.toward({ host: 'localhost', port: 1 }));
    expect(a.toward({ host: '[::1]', port: 1 })).toBe(a.toward({ host: '::1', port: 1 }));
    const seen = new Set([a.toward(l), a.toward({ host: '127.0.0.1', port: 4001 }), a.toward({ host: '127.0.0.2', port: 4000 }), b.toward(l)]);
    expect(seen.size).toBe(4);
    for (const n of seen) expect(n >>> 0).toBe(n);
  });
});
