// Dedup sends over channels (src/channel/dedup.ts): `ch.send(bytes, { dedup: true })` arrives
// byte-exact as an ordinary message, in order with the channel's other messages, on inproc, udp
// and tcp; a repeat moves only the manifest (over udp counted at the socket by test/relay.ts);
// a chunk whose bytes do not match their hash ends that send with an error on both sides and
// delivers nothing wrong, and the channel goes on; a receiver with dedup: false refuses.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { ChannelDedup } from '../../src/channel/dedup.js';
import { channelOnQp } from '../../src/channel/listen.js';
import type { ChannelOptions } from '../../src/channel/options.js';
import type { DedupDeviceStats } from '../../src/dedup/stats.js';
import { dedupMemoryOf, dedupStoreOf } from '../../src/dedup/memory.js';
import { stageKeptBytes } from '../../src/dedup/stage-pool.js';
import { connectChannel, listenChannels, openDevice, type Channel, type Device } from '../../src/index.js';
import { startUdpRelay, type UdpRelay } from '../relay.js';

const devs: Device[] = [];
const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of closers.splice(0).reverse()) await f();
  for (const d of devs.splice(0)) await d.close();
});

async function dev(transport: 'inproc' | 'udp' | 'tcp'): Promise<Device> {
  const d = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
  devs.push(d);
  return d;
}

async function pairOf(transport: 'inproc' | 'udp' | 'tcp', o: ChannelOptions = {}, so: ChannelOptions = o): Promise<{ a: Device; b: Device; c: Channel; s: Channel }> {
  const a = await dev(transport);
  const b = await dev(transport);
  const l = listenChannels(b, { ...so, service: 9 });
  closers.push(() => l.close());
  const [c, s] = await Promise.all([connectChannel(a, b.address, { ...o, service: 9 }), l.accept(10_000)]);
  return { a, b, c, s };
}

/** Channels over udp through a counting relay (connected by hand, as test/channel/relay.test.ts). */
async function throughRelay(): Promise<{ a: Device; b: Device; c: Channel; s: Channel; r: UdpRelay }> {
  const a = await dev('udp');
  const b = await dev('udp');
  const r = await startUdpRelay({ target: { host: '127.0.0.1', port: b.address.port as number } });
  closers.push(() => r.close());
  const ca = channelOnQp(a);
  const cb = channelOnQp(b);
  const aSeenByB = await r.clientAddress({ host: '127.0.0.1', port: a.address.port as number });
  const [c, s] = await Promise.all([ca.connect({ address: r.address, qpn: cb.qpn }), cb.connect({ address: aSeenByB, qpn: ca.qpn })]);
  return { a, b, c, s, r };
}

async function take(ch: Channel, n: number): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const m of ch) {
    out.push(m);
    if (out.length === n) break;
  }
  return out;
}

const same = (got: unknown, want: Uint8Array): boolean => got instanceof Uint8Array && Buffer.compare(got, want) === 0;

describe.each(['inproc', 'udp', 'tcp'] as const)('dedup sends over %s channels', (transport) => {
  it('byte-exact, in order with ordinary messages both ways, and a repeat sends no chunk', async () => {
    const { a, b, c, s } = await pairOf(transport);
    const x = new Uint8Array(randomBytes(3 << 20));
    const y = new Uint8Array(randomBytes(100_000));
    const [got] = await Promise.all([
      take(s, 6),
      c.send({ before: 1 }),
      c.send(x, { dedup: true }),
      c.send(new Uint8Array([7])), // waits for the dedup send: must not overtake it
      c.send(x, { dedup: true }), // the repeat
      c.send(y, { dedup: true }),
      c.send('after'),
    ]);
    expect(got[0]).toEqual({ before: 1 });
    expect(same(got[1], x)).toBe(true);
    expect(same(got[2], new Uint8Array([7]))).toBe(true);
    expect(same(got[3], x)).toBe(true);
    expect(same(got[4], y)).toBe(true);
    expect(got[5]).toBe('after');
    const sent = (a.stats().dedup as DedupDeviceStats).sent;
    expect(sent.transfers).toBe(3);
    expect(sent.bytesSent).toBe(x.length + y.length); // the repeat of x moved no chunk
    // Every chunk that crossed was hashed as its segments were placed (its chunk map was final
    // when its ROUND came), or hashed again at ROUND only because a retransmit rewrote hashed
    // bytes (udp) — never left to a plain second pass.
    const rcvd = (b.stats().dedup as DedupDeviceStats).received;
    expect(rcvd.chunksReceived).toBeGreaterThan(0);
    if (rcvd.rehashedRounds === 0) expect(rcvd.hashedInBand).toBe(rcvd.chunksReceived);
    else expect(rcvd.hashedInBand).toBeGreaterThan(0);
    if (transport !== 'udp') expect(rcvd.rehashedRounds).toBe(0);
    // The other direction over the same channel, at the same time as this one.
    const z = new Uint8Array(randomBytes(1 << 20));
    const [back, fwd] = await Promise.all([take(c, 1), take(s, 1), s.send(z, { dedup: true }), c.send(z, { dedup: true })]);
    expect(same(back[0], z)).toBe(true);
    expect(same(fwd[0], z)).toBe(true);
    await c.close();
  });

  it('a chunk that does not match its hash: an error on both sides, nothing wrong delivered, the channel goes on', async () => {
    const { a, c, s } = await pairOf(transport);
    const x = new Uint8Array(randomBytes(1 << 20));
    const { bad, rxErr } = await sendCorrupted(a, c, s, x);
    expect(bad.status).toBe('rejected');
    expect(((bad as PromiseRejectedResult).reason as Error).message).toMatch(/did not match its hash/);
    expect((rxErr as { code?: string }).code).toBe('ERR_MALFORMED');
    const [got] = await Promise.all([take(s, 2), c.send(x, { dedup: true }), c.send('next')]);
    expect(same(got[0], x)).toBe(true);
    expect(got[1]).toBe('next');
  });

  it('a source read piece by piece into the stage arrives byte-exact; one that ends early aborts on both sides and the channel goes on', async () => {
    const { c, s } = await pairOf(transport);
    const x = new Uint8Array(randomBytes(5 << 20));
    const reads: number[] = [];
    const source = (upTo: number) => ({
      length: x.length,
      read: async (into: Uint8Array, at: number): Promise<number> => {
        reads.push(at);
        await new Promise((r) => setImmediate(r));
        const n = Math.max(0, Math.min(into.length, upTo - at));
        into.set(x.subarray(at, at + n));
        return n;
      },
    });
    const [got] = await Promise.all([take(s, 1), c.sendDedupFrom(source(x.length))]);
    expect(same(got[0], x)).toBe(true);
    expect(reads.length).toBeGreaterThan(1); // in pieces, not one read of the whole
    // The source ends at 3 MiB of its 5: the send fails, the receiver gets the abort, nothing else.
    const rx = s.next().then((r) => r, (e: unknown) => e);
    const bad = await c.sendDedupFrom(source(3 << 20)).then(() => undefined, (e: unknown) => e);
    expect((bad as Error).message).toMatch(/source ended at/);
    expect(String(((await rx) as Error).message)).toMatch(/aborted/);
    const y = new Uint8Array(randomBytes(1 << 20));
    const [after] = await Promise.all([take(s, 2), c.send(y, { dedup: true }), c.send('next')]);
    expect(same(after[0], y)).toBe(true);
    expect(after[1]).toBe('next');
  });
});

describe('dedup sends over channels: the sender\'s staging', () => {
  it('each send\'s staging region is deregistered once its writes are done, also when a larger send follows at once', async () => {
    const { c, s } = await pairOf('tcp');
    const x = new Uint8Array(randomBytes(1 << 20));
    const y = new Uint8Array(randomBytes(3 << 20));
    // A first send sets up what the channel keeps (its larger receive phase's staging).
    await Promise.all([take(s, 1), c.send(new Uint8Array(randomBytes(1 << 20)), { dedup: true })]);
    await new Promise((r) => setTimeout(r, 50));
    const before = c.pd.mrs.size;
    const [got] = await Promise.all([take(s, 3), c.send(x, { dedup: true }), c.send(y, { dedup: true }), c.send(x, { dedup: true })]);
    expect(same(got[0], x) && same(got[1], y) && same(got[2], x)).toBe(true);
    for (let i = 0; i < 100 && c.pd.mrs.size !== before; i++) await new Promise((r) => setTimeout(r, 10));
    expect(c.pd.mrs.size).toBe(before);
    await c.close();
  });
});

describe('dedup sends over channels: a close while the source is still reading', () => {
  it('the memory a read is in flight into stays allocated until the read has ended', async () => {
    const { c } = await pairOf('inproc');
    const mem = c.pd.device.dataPlane;
    let into: Uint8Array | undefined;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const sent = c.sendDedupFrom({
      // Larger than the window and a zone's staging: a smaller source is read into object-sized staging instead.
      length: 12 << 20,
      read: async (buf: Uint8Array): Promise<number> => {
        into ??= buf;
        await gate; // a file read the kernel is still doing: it writes into buf when it ends
        buf.fill(0xab);
        return buf.length;
      },
    }).then(() => undefined, (e: unknown) => e);
    for (let i = 0; i < 100 && !into; i++) await new Promise((r) => setTimeout(r, 10));
    expect(into).toBeDefined();
    const addr = into!.byteOffset;
    // The read goes into the sender's window (./source-window.ts): part of some allocation.
    const free = (): boolean => mem.freeBlocks().some(([a, n]) => a < addr + into!.length && addr < a + n);
    expect(free()).toBe(false);
    c.abort('gone while reading');
    await new Promise((r) => setTimeout(r, 20));
    // Freed now, the read would land in memory a later allocation owns.
    expect(free()).toBe(false);
    expect(stageKeptBytes(mem)).toBe(0); // nor is the staging kept for another send yet
    release();
    expect(await sent).toBeInstanceOf(Error);
    // Once the read has ended the window is freed and the staging serves a later send (kept, and counted in dev.stats()).
    expect(free()).toBe(true);
    expect(stageKeptBytes(mem)).toBeGreaterThan(0);
    expect((c.pd.device.stats().dedup as DedupDeviceStats).stageKeptBytes).toBe(stageKeptBytes(mem));
  });
});

describe('dedup sends over channels: a send and an abort in the same tick', () => {
  it('the send rejects ERR_CLOSED and takes no staging memory', async () => {
    const { c } = await pairOf('inproc');
    const mem = c.pd.device.dataPlane;
    const kept = stageKeptBytes(mem);
    const used = mem.stats().used;
    const sent = c.sendDedupFrom({ length: 4 << 20, read: async (buf: Uint8Array) => buf.fill(1).length }).then(() => undefined, (e: unknown) => e);
    c.abort('gone at once');
    const settled = await Promise.race([sent, new Promise((r) => setTimeout(() => r('pending'), 5000))]);
    expect(settled).toMatchObject({ code: 'ERR_CLOSED' });
    expect(stageKeptBytes(mem)).toBe(kept);
    expect(mem.stats().used).toBeLessThanOrEqual(used);
  });
});

describe('dedup sends over channels: the wire and the option', () => {
  it('udp: a repeat moves a small fraction of the first send, counted at the relay socket', async () => {
    const { c, s, r } = await throughRelay();
    const x = new Uint8Array(randomBytes(4 << 20));
    const wire = async (f: () => Promise<unknown>): Promise<number> => {
      await new Promise((res) => setTimeout(res, 20));
      const b0 = r.stats.bytesFromClient + r.stats.bytesFromServer;
      await f();
      await new Promise((res) => setTimeout(res, 20));
      return r.stats.bytesFromClient + r.stats.bytesFromServer - b0;
    };
    const first = await wire(async () => {
      const [got] = await Promise.all([take(s, 1), c.send(x, { dedup: true })]);
      expect(same(got[0], x)).toBe(true);
    });
    const again = await wire(async () => {
      const [got] = await Promise.all([take(s, 1), c.send(x, { dedup: true })]);
      expect(same(got[0], x)).toBe(true);
    });
    console.log(`channel dedup over udp: first send ${first} B on the wire, repeat ${again} B (${(again / first).toFixed(4)}x)`);
    expect(first).toBeGreaterThan(x.length);
    expect(again).toBeLessThan(first * 0.05);
  });

  it('a receiver with dedup: false refuses; ordinary sends go on', async () => {
    const { b, c, s } = await pairOf('inproc', {}, { dedup: false });
    await expect(c.send(new Uint8Array(1000), { dedup: true })).rejects.toMatchObject({ code: 'ERR_NOT_SUPPORTED' });
    expect((b.stats() as unknown as { dedup: DedupDeviceStats }).dedup.received.refused).toBe(1);
    const [got] = await Promise.all([take(s, 1), c.send('still here')]);
    expect(got[0]).toBe('still here');
    await expect(c.send({ not: 'bytes' }, { dedup: true })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });

  it('a receiver without device memory for the landing zone refuses (counted), frees what it took, and the channel goes on', async () => {
    // The receiving device has 16 MiB of device memory at most; its channels ask for a 64 MiB zone.
    const a = await dev('udp');
    const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, memoryBytes: 4 << 20, maximumMemoryBytes: 16 << 20 });
    devs.push(b);
    const l = listenChannels(b, { service: 9, dedupZoneBytes: 64 << 20 });
    closers.push(() => l.close());
    const [c, s] = await Promise.all([connectChannel(a, b.address, { service: 9 }), l.accept(10_000)]);
    const used0 = b.stats().memory.used;
    const x = new Uint8Array(randomBytes(300_000));
    for (let i = 0; i < 2; i++) await expect(c.send(x, { dedup: true })).rejects.toMatchObject({ code: 'ERR_NOT_SUPPORTED' });
    const [got] = await Promise.all([take(s, 2), c.send('still here'), c.send(x)]);
    expect(got[0]).toBe('still here');
    expect(same(got[1], x)).toBe(true);
    const st = (b.stats() as unknown as { dedup: DedupDeviceStats }).dedup;
    expect(st.received.refused).toBeGreaterThanOrEqual(1);
    expect(st.received.transfers).toBe(0);
    // The failed zone left nothing registered behind (the ordinary 300 kB message came and went).
    expect(b.stats().memory.used).toBeLessThanOrEqual(used0 + (64 << 10));
  });
});

describe('dedup sends into a SHA-256 chunk store (channel option dedupStore)', () => {
  const sha: ChannelOptions = { dedupStore: { hash: 'sha256' } };
  const rx = (d: Device): DedupDeviceStats['received'] => (d.stats().dedup as DedupDeviceStats).received;
  const tx = (d: Device): DedupDeviceStats['sent'] => (d.stats().dedup as DedupDeviceStats).sent;

  it('udp: byte-exact into the SHA-256 store (not the default one), a repeat sends no chunk, verified at ROUND', async () => {
    const { a, b, c, s } = await pairOf('udp', {}, sha);
    const x = new Uint8Array(randomBytes(2 << 20));
    const [got] = await Promise.all([take(s, 3), c.send(x, { dedup: true }), c.send('between'), c.send(x, { dedup: true })]);
    expect(same(got[0], x)).toBe(true);
    expect(got[1]).toBe('between');
    expect(same(got[2], x)).toBe(true);
    expect(tx(a).bytesSent).toBe(x.length); // the repeat resolved every chunk from the store
    const pd = b.allocPd();
    const store = dedupStoreOf(pd, { hash: 'sha256' });
    expect(store.hash).toBe('sha256');
    expect(store.stats().inserts).toBe(rx(b).chunksReceived);
    expect(store.stats().hits).toBeGreaterThanOrEqual(rx(b).chunksReceived);
    expect(dedupStoreOf(pd).stats().inserts).toBe(0); // the default XXH3 store was not used
    // SHA-256 has no resumable kernel state: every chunk is hashed once, when its ROUND arrives.
    expect(rx(b).hashedInBand).toBe(0);
  });

  it('a chunk whose bytes changed after hashing is rejected on both sides; the channel goes on', async () => {
    const { a, c, s } = await pairOf('udp', {}, sha);
    const x = new Uint8Array(randomBytes(1 << 20));
    const { bad, rxErr } = await sendCorrupted(a, c, s, x);
    expect(bad.status).toBe('rejected');
    expect(((bad as PromiseRejectedResult).reason as Error).message).toMatch(/did not match its hash/);
    expect((rxErr as { code?: string }).code).toBe('ERR_MALFORMED');
    const [got] = await Promise.all([take(s, 1), c.send(x, { dedup: true })]);
    expect(same(got[0], x)).toBe(true);
  });

  it.each([false, true])('two peers, shared %s: neither peer resolves to chunks the other sent', async (shared) => {
    const b = await dev('udp');
    const l = listenChannels(b, { service: 9, dedupStore: { hash: 'sha256', shared } });
    closers.push(() => l.close());
    const p1 = await dev('udp');
    const p2 = await dev('udp');
    const [c1, s1] = await Promise.all([connectChannel(p1, b.address, { service: 9 }), l.accept(10_000)]);
    const [c2, s2] = await Promise.all([connectChannel(p2, b.address, { service: 9 }), l.accept(10_000)]);
    const x = new Uint8Array(randomBytes(1 << 20));
    const [got1] = await Promise.all([take(s1, 1), c1.send(x, { dedup: true })]);
    const [got2] = await Promise.all([take(s2, 1), c2.send(x, { dedup: true })]);
    expect(same(got1[0], x)).toBe(true);
    expect(same(got2[0], x)).toBe(true);
    expect(tx(p1).bytesSent).toBe(x.length);
    // Per-peer answers: peer 2 sends every byte although the device holds them from peer 1.
    expect(tx(p2).bytesSent).toBe(x.length);
    expect(rx(b).chunksFromStore).toBe(0);
  });

  it('bad dedupStore options are refused with ERR_INVALID_ARGUMENT before anything is made', async () => {
    const d = await dev('inproc');
    for (const dedupStore of [
      { shared: true }, // xxh3-128 across peers
      { hash: 'xxh3-128', shared: true },
      { hash: 'md5' },
      { budgetBytes: -1 },
      { budgetBytes: 1.5 },
      { maxEntries: 0 },
      { shared: 'yes' },
      { seed: 1 },
      null,
      'sha256',
    ]) {
      expect(() => listenChannels(d, { service: 9, dedupStore } as never), JSON.stringify(dedupStore)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }));
      await expect(connectChannel(d, d.address, { service: 9, dedupStore } as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    }
  });
});

/**
 * Send `x` by dedup from `c` while the sender's staged bytes change after they were hashed (a
 * hostile or broken sender): the send's outcome and the receiver's error.
 */
async function sendCorrupted(a: Device, c: Channel, s: Channel, x: Uint8Array): Promise<{ bad: PromiseSettledResult<void>; rxErr: unknown }> {
  const mem = dedupMemoryOf(a.allocPd());
  const write = ChannelDedup.prototype.write;
  ChannelDedup.prototype.write = function (pieces, rkey) {
    if (pieces.length) mem.u8()[pieces[0]!.src + 10]! ^= 0xff;
    return write.call(this, pieces, rkey);
  };
  try {
    const [bad, rxErr] = await Promise.all([
      Promise.allSettled([c.send(x, { dedup: true })]).then((r) => r[0]!),
      s.next().then(() => undefined, (e: unknown) => e),
    ]);
    return { bad, rxErr };
  } finally {
    ChannelDedup.prototype.write = write;
  }
}
