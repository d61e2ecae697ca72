// A chunk store shared between peers (`shared: true`) is no oracle: what a peer learns from the
// receiver (NEED bitmaps, GRANTs, END) depends only on what that peer itself sent or named as its
// basis, never on what another peer stored; the bytes are still kept once in device memory, and
// each peer chunks with its own key. Driven with the transfer cores (./cores.ts) and, end to end,
// with two channels into one listener.
import { randomBytes } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { decode, type Hello } from '../../src/dedup/messages.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { pollAll } from '../../src/core/sans-io.js';
import { DedupRecvCore } from '../../src/dedup/transfer.js';
import type { DedupDeviceStats } from '../../src/dedup/stats.js';
import { chunkLengths } from '../../src/kernels/cdc.js';
import { connectChannel, listenChannels, openDevice, type Channel, type Device } from '../../src/index.js';
import { harness, same } from './cores.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 64 << 20, maximumBytes: 256 << 20, workerSlots: 0 });
});

const shared = (): ChunkStore => new ChunkStore(dm, { shared: true, hash: 'sha256' });
const key = (b: number): Uint8Array => new Uint8Array(32).fill(b);

describe('a shared chunk store answers each peer only about its own chunks', () => {
  it('peer B probing for a chunk only peer A sent is asked for it like any missing chunk; the bytes stay stored once', () => {
    // A small secret (below the minimum chunk of 2 KiB at avg 8 KiB: one chunk whatever the
    // key), e.g. a PIN file: A stores it, B guesses it.
    const pin = new Uint8Array(randomBytes(2000));
    const other = new Uint8Array(randomBytes(2000));
    const runs = [pin, other].map((aliceHas) => {
      const store = shared();
      const alice = harness(dm, store, { scope: 'alice', key: key(1) });
      expect(same(alice.send(aliceHas).got, aliceHas)).toBe(true);
      const before = store.stats();
      const bob = harness(dm, store, { scope: 'bob', key: key(2) });
      const probe = bob.send(pin);
      const after = store.stats();
      const again = bob.send(pin);
      store.close();
      return { probe, again, before, after };
    });
    const [hit, control] = runs as [(typeof runs)[0], (typeof runs)[0]];
    // All B ever learns is the receiver's messages: the same whether or not A holds the chunk.
    expect(hit.probe.answers.map((b) => Buffer.from(b).toString('hex'))).toEqual(control.probe.answers.map((b) => Buffer.from(b).toString('hex')));
    expect(hit.probe.result!.bytesSent).toBe(pin.length);
    expect(hit.probe.stats!.chunksFromStore).toBe(0);
    expect(same(hit.probe.got, pin)).toBe(true);
    // Stored once: B's verified copy joined A's bytes (one more entry for B, no more device memory).
    expect(hit.after.storedBytes - hit.before.storedBytes).toBe(0);
    expect(hit.after.entries - hit.before.entries).toBe(1);
    expect(control.after.storedBytes - control.before.storedBytes).toBe(pin.length);
    // Now B has sent it itself: B's own chunk, held.
    expect(hit.again.result!.bytesSent).toBe(0);
  });

  it('a peer naming another peer\'s exact chunks (their boundaries) is still asked for every byte', () => {
    const store = shared();
    const alice = harness(dm, store, { scope: 'alice', key: key(1) });
    const x = new Uint8Array(randomBytes(600_000));
    alice.send(x);
    const held = store.stats().storedBytes;
    const bob = harness(dm, store, { scope: 'bob', key: key(2) });
    // The worst case for the receiver: B offers exactly A's chunks (it would need A's key).
    const lens = chunkLengths(x, { avg: 8192, key: key(1) });
    const r = bob.send(x, { lens });
    expect(r.result!.bytesSent).toBe(x.length);
    expect(same(r.got, x)).toBe(true);
    expect(store.stats().storedBytes).toBe(held); // every chunk was already stored: kept once
    expect(store.stats().sharedInserts).toBe(lens.length);
    store.close();
  });

  it('each scope chunks with its own key, derived from a secret of the store', () => {
    const store = shared();
    const a = store.chunkKey('alice');
    expect(a).toHaveLength(32);
    expect(store.chunkKey('alice')).toEqual(a); // a trust domain keeps its key (its chunks match again)
    expect(store.chunkKey('bob')).not.toEqual(a);
    expect(shared().chunkKey('alice')).not.toEqual(a); // another store, another secret
    // A receiver told no key sends its scope's in HELLO.
    const zone = { addr: dm.alloc(64 << 10), rkey: 0x1234, length: 64 << 10 };
    const rx = new DedupRecvCore({ mem: dm, store, scope: 'carol', zone, slots: 1, avg: 8192 });
    rx.start();
    const [hello] = pollAll(rx);
    expect((decode((hello as { bytes: Uint8Array }).bytes) as Hello).key).toEqual(store.chunkKey('carol'));
    rx.close();
    dm.free(zone.addr);
    store.close();
  });
});

describe('a shared store between two channels', () => {
  const devs: Device[] = [];
  const closers: Array<() => unknown> = [];
  afterEach(async () => {
    for (const f of closers.splice(0).reverse()) await f();
    for (const d of devs.splice(0)) await d.close();
  });
  const dev = async (): Promise<Device> => {
    const d = await openDevice({ transport: 'inproc' });
    devs.push(d);
    return d;
  };
  const take = async (ch: Channel): Promise<unknown> => {
    for await (const m of ch) return m;
    return undefined;
  };

  it('peer B sending the small object peer A sent moves every byte of it; the device stores it once', async () => {
    const b = await dev();
    const l = listenChannels(b, { service: 9, dedupStore: { hash: 'sha256', shared: true } });
    closers.push(() => l.close());
    const [p1, p2] = [await dev(), await dev()];
    const [c1, s1] = await Promise.all([connectChannel(p1, b.address, { service: 9 }), l.accept(10_000)]);
    const [c2, s2] = await Promise.all([connectChannel(p2, b.address, { service: 9 }), l.accept(10_000)]);
    const pin = new Uint8Array(randomBytes(3000)); // one chunk whatever the key (min 4 KiB)
    const [got1] = await Promise.all([take(s1), c1.send(pin, { dedup: true })]);
    const [got2] = await Promise.all([take(s2), c2.send(pin, { dedup: true })]);
    expect(same(got1 as Uint8Array, pin) && same(got2 as Uint8Array, pin)).toBe(true);
    const sent = [p1, p2].map((p) => (p.stats().dedup as DedupDeviceStats).sent.bytesSent);
    expect(sent).toEqual([pin.length, pin.length]); // B learned nothing of what A stored
    const st = (b.stats().dedup as DedupDeviceStats).store;
    expect(st.storedBytes).toBe(pin.length);
    expect(st.bytes).toBe(2 * pin.length);
  });
});
