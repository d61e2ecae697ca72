// A receiver whose basis is still being filled (store.fill: a file service reading and chunking
// the old version of a file) holds the sender's OFFERs until the fill is in, so as not to ask for
// chunks the basis holds. Both ends' dedupIdleMs deadlines count silence in a transfer: a fill
// slower than that (a slow disk, a large file) failed the transfer on both sides with
// ERR_TIMEOUT although neither peer was stalled — and a fill that never ends (a read that hangs)
// held the transfer, and with it the file server's transfer slot, until then. The receiver now
// holds for its fill at most half its dedupIdleMs, then answers from what the basis has so far:
// the object still arrives byte-exact, at the cost of more bytes on the wire.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { dedupStoreOf } from '../../src/dedup/memory.js';
import { connectChannel, listenChannels, openDevice, type Channel, type Device } from '../../src/index.js';

const devs: Device[] = [];
const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of closers.splice(0).reverse()) await f();
  for (const d of devs.splice(0)) await d.close();
});

const IDLE_MS = 300;

async function pair(): Promise<{ c: Channel; s: Channel }> {
  const a = await openDevice({ transport: 'inproc' });
  const b = await openDevice({ transport: 'inproc' });
  devs.push(a, b);
  const l = listenChannels(b, { service: 9, dedupIdleMs: IDLE_MS });
  closers.push(() => l.close());
  const [c, s] = await Promise.all([connectChannel(a, b.address, { service: 9, dedupIdleMs: IDLE_MS }), l.accept(10_000)]);
  return { c, s };
}

describe('dedup receive into a basis still being filled', () => {
  it.each([
    ['slower than dedupIdleMs', 4 * IDLE_MS],
    ['that never ends', undefined],
  ] as const)('a fill %s: the object arrives byte-exact, neither side times out', async (_what, fillMs) => {
    const { c, s } = await pair();
    const x = new Uint8Array(randomBytes(256 << 10));
    const scope = 'slow-basis';
    const key = new Uint8Array(randomBytes(32));
    const store = dedupStoreOf(s.pd);
    // The basis (the first half of the object) arrives only after fillMs, or never.
    let timer: NodeJS.Timeout | undefined;
    const source = new Promise<Uint8Array | undefined>((resolve) => {
      if (fillMs !== undefined) timer = setTimeout(() => resolve(x.slice(0, 128 << 10)), fillMs);
    });
    closers.push(() => {
      clearTimeout(timer);
      store.dropScope(scope);
    });
    const filled = store.fill(scope, source, { key, avg: 4096 }, { reference: true });
    s.dedupBasis(scope, key, 4096);
    const sent = c.send(x, { dedup: true });
    sent.catch(() => undefined); // awaited below, after the receive
    const got = await s.next();
    await expect(sent).resolves.toBeUndefined();
    expect(got.done).toBe(false);
    expect(Buffer.compare(got.value as Uint8Array, x)).toBe(0);
    if (fillMs !== undefined) await filled;
    // Both channels go on.
    await c.send('after');
    expect((await s.next()).value).toBe('after');
  });
});
