// A DedupSource is chunked through the sender's two-step window (src/dedup/source-window.ts) and
// the runs the receiver asks for are read from it again: these check that the object still
// arrives byte-exact when chunks straddle the window's steps and the needed runs are scattered,
// that the sender's device memory stays bounded by the window and one zone's staging whatever the
// object's size, and that a source whose bytes change between its two reads fails the transfer
// at the receiver's hash check instead of delivering a mix.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { connectChannel, listenChannels, openDevice, type Channel, type Device } from '../../src/index.js';

const devs: Device[] = [];
const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of closers.splice(0).reverse()) await f();
  for (const d of devs.splice(0)) await d.close();
});

async function pair(): Promise<{ a: Device; c: Channel; s: Channel }> {
  const a = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
  const b = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
  devs.push(a, b);
  const l = listenChannels(b, { service: 9 });
  closers.push(() => l.close());
  const [c, s] = await Promise.all([connectChannel(a, b.address, { service: 9 }), l.accept(10_000)]);
  return { a, c, s };
}

/** A source over `x` whose reads return at most `piece` bytes (short reads, as a file may give). */
const sourceOf = (x: Uint8Array, piece = 1 << 30, reads: Array<[number, number]> = []) => ({
  length: x.length,
  read: async (into: Uint8Array, at: number): Promise<number> => {
    const n = Math.min(into.length, piece, x.length - at);
    reads.push([at, n]);
    into.set(x.subarray(at, at + n));
    return n;
  },
});

const same = (a: unknown, b: Uint8Array): boolean => a instanceof Uint8Array && Buffer.compare(a, b) === 0;

describe('dedup sends of a source through the sender\'s window', () => {
  it('a second version with scattered changes arrives byte-exact; only what the receiver lacks is read again; the sender\'s memory stays bounded', async () => {
    const { a, c, s } = await pair();
    const v1 = new Uint8Array(randomBytes(12 << 20));
    const v2 = new Uint8Array(v1);
    for (let k = 0; k < 12; k += 3) v2.set(randomBytes(100_000), (k << 20) + 12345); // changes straddle no particular boundary
    const used = a.dataPlane.stats().used;
    const r1 = await Promise.all([s.next(), c.sendDedupFrom(sourceOf(v1, 700_001))]);
    expect(same(r1[0].value, v1)).toBe(true);
    // The sender's device memory: the window and a zone's staging, not an object-sized stage.
    expect(a.dataPlane.stats().used - used).toBeLessThan(12 << 20);
    const reads: Array<[number, number]> = [];
    const [got] = await Promise.all([s.next(), c.sendDedupFrom(sourceOf(v2, 700_001, reads))]);
    expect(same(got.value, v2)).toBe(true);
    // Read once whole (the window), then again only the runs the receiver asked for: the four
    // changed places, each within a chunk or two of 16 KiB on either side.
    const again = reads.reduce((t, [, n]) => t + n, 0) - v2.length;
    expect(again).toBeGreaterThanOrEqual(4 * 100_000);
    expect(again).toBeLessThan(v2.length / 8);
  });

  it('a source whose bytes change between the chunking and the writes fails the transfer; nothing mixed is delivered, and the channel goes on', async () => {
    const { c, s } = await pair();
    // Larger than the window and a zone's staging (~8.3 MiB with the default 4 MiB zone): a smaller
    // object is staged whole, read once (src/dedup/endpoint.ts #send).
    const x = new Uint8Array(randomBytes(12 << 20));
    const changing = {
      length: x.length,
      seen: 0,
      read: async (into: Uint8Array, at: number): Promise<number> => {
        const n = Math.min(into.length, x.length - at);
        into.set(x.subarray(at, at + n));
        changing.seen += n;
        if (changing.seen > x.length) into[0] = (into[0]! + 1) & 0xff; // a read again: changed since
        return n;
      },
    };
    const rx = s.next().then((r) => r, (e: unknown) => e);
    const bad = await c.sendDedupFrom(changing).then(() => undefined, (e: unknown) => e);
    expect((bad as Error).message).toMatch(/did not match its hash/);
    expect(String(((await rx) as Error).message)).toMatch(/did not match its hash/);
    const y = new Uint8Array(randomBytes(1 << 20));
    const [after] = await Promise.all([s.next(), c.sendDedupFrom(sourceOf(y))]);
    expect(same(after.value, y)).toBe(true);
  });
});
