// A basis filled while the transfer starts (store.fill): the receiver holds the peer's messages
// until the scope's basis is in (so no chunk the basis holds is asked for), at most MAX_HELD of
// them (past that they are handled at once, in order: the transfer stays exact); dropScope stops
// a fill in progress. The shells run over an in-process pipe and a write path that copies into
// the landing zone, with no device.
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupReceiver, DedupSender, type MessagePipe } from '../../src/dedup/endpoint.js';
import { decode } from '../../src/dedup/messages.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DeviceChunker } from '../../src/dedup/chunker.js';
import { DedupKind } from '../../src/wire/spec.js';
import { copyWriter, same } from './cores.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 32 << 20, maximumBytes: 256 << 20, workerSlots: 0 });
});

const KEY = new Uint8Array(32).fill(7);
const AVG = 8192;
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** The chunks of `bytes` as one whole stream, and whether the store holds every one of them in scope 'p'. */
function wholeStream(store: ChunkStore, bytes: Uint8Array): { found: boolean; lens: number[]; recs: Uint8Array } {
  const at = dm.alloc(bytes.length);
  dm.u8().set(bytes, at);
  const chunker = new DeviceChunker(dm, { key: KEY, avg: AVG });
  const lens = chunker.chunkAll(at, bytes.length);
  const recs = store.hasher.hashRun(at, lens);
  chunker.free();
  dm.free(at);
  return { found: lens.every((_, i) => store.has('p', recs, i * 32)), lens, recs };
}

/** Two pipe ends delivering on a later microtask, in order; `toTx` records what the receiver says. */
function pipes() {
  let onRx: (b: Uint8Array) => void = () => undefined;
  let onTx: (b: Uint8Array) => void = () => undefined;
  const toTx: number[] = [];
  const tx: MessagePipe = { send: (b) => void queueMicrotask(() => onRx(b)), onMessage: (h) => void (onTx = h) };
  const rx: MessagePipe = { send: (b) => (toTx.push(decode(b).kind), void queueMicrotask(() => onTx(b))), onMessage: (h) => void (onRx = h) };
  return { tx, rx, toTx };
}

function ends(store: ChunkStore, o: { maxEntries?: number; window?: number } = {}) {
  const p = pipes();
  const zone = { addr: dm.alloc(4 << 20), rkey: 0x4321, length: 4 << 20 };
  const rx = new DedupReceiver({ pipe: p.rx, mem: dm, store, scope: 'p', zone, slots: 4, key: KEY, avg: AVG, keepReceived: false, ...(o.maxEntries ? { maxEntries: o.maxEntries } : {}) });
  const w = copyWriter(dm); // the zone is not hooked: each slot is hashed at its ROUND
  const tx = new DedupSender({ pipe: p.tx, rdma: w, mem: dm, step: 256 << 10, ...(o.window ? { window: o.window } : {}) });
  return { rx, tx, toTx: p.toTx, close: () => (rx.close(), tx.close(), w.free(), dm.free(zone.addr)) };
}

function versions(n: number): { v1: Uint8Array; v2: Uint8Array } {
  const v1 = new Uint8Array(randomBytes(n));
  const v2 = v1.slice();
  for (let at = 0; at < n; at += 2 << 20) v2.set(randomBytes(Math.min(1 << 20, n - at)), at);
  return { v1, v2 };
}

describe('a basis filled while the transfer starts', () => {
  it('the receiver answers no OFFER until the basis is in, then asks only for what it lacks', async () => {
    const store = new ChunkStore(dm);
    const { v1, v2 } = versions(6 << 20);
    let give!: (b: Uint8Array) => void;
    const filled = store.fill('p', new Promise<Uint8Array>((r) => (give = r)), { key: KEY, avg: AVG }, { reference: true });
    const e = ends(store);
    const got = e.rx.next();
    const sent = e.tx.send(v2);
    for (let i = 0; i < 20; i++) await tick();
    expect(e.rx.held).toBeGreaterThan(0); // OFFER pages wait for the basis
    expect(e.toTx).toEqual([DedupKind.Hello]); // no NEED went out meanwhile
    give(v1); // the read finished: ingested a step at a time, then the held pages are answered
    const [r, { bytes, stats }] = await Promise.all([sent, got, filled]);
    expect(same(bytes, v2)).toBe(true);
    expect(e.rx.held).toBe(0);
    expect(store.filling('p')).toBeUndefined();
    // Only about the new half moved (the seams' chunks are new too).
    expect(r.bytesSent).toBeLessThan(v2.length * 0.56);
    expect(stats.bytesFromStore).toBeGreaterThan(v2.length * 0.44);
    e.close();
    store.close();
  });

  it('once the basis is all read, a page the fill has chunked past is answered while the rest is chunked, and the object is assembled in the basis', async () => {
    const store = new ChunkStore(dm);
    const { v1, v2 } = versions(24 << 20); // 24 steps of the fill, a turn of the event loop each
    const basis = v1.slice();
    const filled = store.fill('p', basis, { key: KEY, avg: AVG }, { reference: true, inPlace: true });
    const e = ends(store);
    let needWhileFilling = false;
    let needs = 0;
    const watch = setInterval(() => {
      if (e.toTx.length > needs) {
        needs = e.toTx.length;
        if (e.toTx.includes(DedupKind.Need) && store.filling('p')) needWhileFilling = true;
      }
    }, 0);
    const [r, { bytes, stats }] = await Promise.all([e.tx.send(v2), e.rx.next(), filled]);
    clearInterval(watch);
    expect(needWhileFilling).toBe(true); // the transfer ran alongside the fill
    expect(same(bytes, v2)).toBe(true);
    expect(bytes.buffer).toBe(basis.buffer); // in place: no object-sized buffer
    expect(r.bytesSent).toBeLessThan(v2.length * 0.56); // the pages answered early found what they share
    expect(stats.bytesFromStore).toBeGreaterThan(v2.length * 0.44);
    e.close();
    store.close();
  });

  it('while a read of the basis may still land, no page is answered before the fill settles (in place or not)', async () => {
    const store = new ChunkStore(dm);
    const { v1, v2 } = versions(8 << 20);
    const into = new Uint8Array(v1.length);
    let finish!: () => void;
    const last = new Promise<void>((r) => (finish = r));
    let readDone = false;
    async function* progress(): AsyncGenerator<number> {
      into.set(v1.subarray(0, 7 << 20));
      yield 7 << 20; // most of it, chunked while the last piece is still being read
      await last;
      into.set(v1.subarray(7 << 20), 7 << 20);
      readDone = true;
      yield v1.length;
    }
    const filled = store.fill('p', { bytes: into, progress: progress(), readDone: () => readDone }, { key: KEY, avg: AVG }, { reference: true, inPlace: true });
    const e = ends(store);
    const got = e.rx.next();
    const sent = e.tx.send(v2);
    for (let i = 0; i < 40; i++) await tick();
    expect(store.filling('p')).toBeDefined();
    expect(e.rx.held).toBeGreaterThan(0);
    expect(e.toTx).toEqual([DedupKind.Hello]);
    finish();
    const [, { bytes }] = await Promise.all([sent, got, filled]);
    expect(same(bytes, v2)).toBe(true);
    e.close();
    store.close();
  });

  it('a DedupSource over a write path without reserve: read whole into a buffer, staged, exact; a short one fails the send', async () => {
    const store = new ChunkStore(dm);
    const { v1, v2 } = versions(3 << 20);
    await store.fill('p', v1, { key: KEY, avg: AVG }, { reference: true });
    const e = ends(store);
    const source = (upTo: number) => ({
      length: v2.length,
      read: async (into: Uint8Array, at: number) => {
        await tick();
        const n = Math.max(0, Math.min(into.length, upTo - at));
        into.set(v2.subarray(at, at + n));
        return n;
      },
    });
    const [r, { bytes }] = await Promise.all([e.tx.send(source(v2.length)), e.rx.next()]);
    expect(same(bytes, v2)).toBe(true);
    expect(r.bytesSent).toBeLessThan(v2.length * 0.75); // two of its three MiB are new
    await expect(e.tx.send(source(1 << 20))).rejects.toThrow(/source ended at/);
    e.close();
    store.close();
  });

  it('holds at most 16 messages: past that they are handled at once, in order, and the transfer stays exact', async () => {
    const store = new ChunkStore(dm);
    const { v2 } = versions(2 << 20);
    void store.fill('p', new Promise<Uint8Array>(() => undefined), { key: KEY, avg: AVG }); // a read that never ends
    // Pages of 8 entries and a sender that keeps 64 out: far more messages than the receiver holds.
    const e = ends(store, { maxEntries: 8, window: 64 });
    const [r, { bytes, stats }] = await Promise.all([e.tx.send(v2), e.rx.next()]);
    expect(same(bytes, v2)).toBe(true);
    expect(r.pages).toBeGreaterThan(16);
    expect(stats.bytesFromStore).toBe(0); // nothing was in the basis yet: every chunk asked for
    expect(e.rx.held).toBeLessThanOrEqual(16);
    e.close();
    store.close();
  });

  it('dropScope stops a fill in progress: nothing of it stays in the store', async () => {
    const store = new ChunkStore(dm);
    const bytes = new Uint8Array(randomBytes(13 << 20)); // four steps
    const filled = store.fill('p', bytes, { key: KEY, avg: AVG }, { reference: true });
    await tick();
    await tick();
    expect(store.stats().entries).toBeGreaterThan(0);
    expect(store.filling('p')).toBeDefined();
    store.dropScope('p');
    const held = await filled;
    expect(held).toBeLessThan(bytes.length / AVG);
    expect(store.stats()).toMatchObject({ entries: 0, referenced: 0 });
    expect(store.filling('p')).toBeUndefined();
    store.close();
  });

  it('a basis read in pieces is ingested as it is read: the same entries as ingesting it whole, the reader closed at the end', async () => {
    const bytes = new Uint8Array(randomBytes(7 << 20));
    const whole = new ChunkStore(dm);
    whole.ingest('p', bytes, { key: KEY, avg: AVG });
    const store = new ChunkStore(dm);
    const into = new Uint8Array(bytes.length);
    const cuts = [1, 4096, 333_333, 3 << 20, 3 << 20, 5 << 20, bytes.length]; // uneven, one repeated
    let closed = false;
    let ingestedBeforeEnd = 0;
    async function* progress(): AsyncGenerator<number> {
      try {
        for (const c of cuts) {
          into.set(bytes.subarray(0, c), 0);
          yield c;
          for (let i = 0; i < 6; i++) await tick();
          if (c < bytes.length) ingestedBeforeEnd = store.stats().entries;
        }
      } finally {
        closed = true;
      }
    }
    const held = await store.fill('p', { bytes: into, progress: progress() }, { key: KEY, avg: AVG }, { reference: true });
    expect(ingestedBeforeEnd).toBeGreaterThan(0); // steps ran while the read went on
    expect(held).toBe(whole.stats().entries);
    expect(store.stats().entries).toBe(whole.stats().entries);
    // The boundaries are those of the whole stream: every chunk of it is found.
    expect(wholeStream(store, bytes).found).toBe(true);
    expect(store.stats().referencedBytes).toBe(bytes.length);
    expect(closed).toBe(true);
    expect(store.filling('p')).toBeUndefined();
    whole.close();
    store.close();
  });

  it.each([true, false])('a basis read into device memory is chunked in place (reference %s): the same entries as ingesting it whole, each chunk found', async (reference) => {
    const bytes = new Uint8Array(randomBytes(6 << 20));
    const whole = new ChunkStore(dm);
    whole.ingest('p', bytes, { key: KEY, avg: AVG });
    const store = new ChunkStore(dm);
    const addr = dm.alloc(bytes.length);
    const into = dm.u8().subarray(addr, addr + bytes.length);
    const cuts = [1, 4096, 333_333, 2 << 20, 2 << 20, 5 << 20, bytes.length];
    async function* progress(): AsyncGenerator<number> {
      for (const c of cuts) {
        into.set(bytes.subarray(0, c), 0);
        yield c;
        await tick();
      }
    }
    const held = await store.fill('p', { bytes: into, progress: progress(), addr }, { key: KEY, avg: AVG }, { reference });
    expect(held).toBe(whole.stats().entries);
    expect(store.stats().entries).toBe(whole.stats().entries);
    const { found, lens, recs } = wholeStream(store, bytes);
    expect(found).toBe(true);
    // Each entry's bytes are the chunk's (by reference: views of the basis where it lies).
    let off = 0;
    for (let i = 0; i < lens.length; i += 97) {
      const ref = store.get('p', recs, i * 32);
      const o = lens.slice(0, i).reduce((a, b) => a + b, 0);
      const got = ref!.view ?? dm.u8().subarray(ref!.addr, ref!.addr + ref!.len);
      expect(Buffer.compare(got, bytes.subarray(o, o + lens[i]!))).toBe(0);
      off = o;
    }
    expect(off).toBeGreaterThan(0);
    store.close();
    whole.close();
    dm.free(addr);
  });

  it('a basis that shrinks while it is read: what was read is the basis', async () => {
    const bytes = new Uint8Array(randomBytes(3 << 20));
    const whole = new ChunkStore(dm);
    whole.ingest('p', bytes.subarray(0, 2 << 20), { key: KEY, avg: AVG });
    const store = new ChunkStore(dm);
    const into = new Uint8Array(bytes.length);
    async function* progress(): AsyncGenerator<number> {
      into.set(bytes.subarray(0, 2 << 20));
      yield 1 << 20;
      yield 2 << 20; // then the read finds the end
    }
    const held = await store.fill('p', { bytes: into, progress: progress() }, { key: KEY, avg: AVG }, { reference: true });
    expect(held).toBe(whole.stats().entries);
    whole.close();
    store.close();
  });

  it('dropScope stops a fill whose read is still going: the reader is told to stop', async () => {
    const store = new ChunkStore(dm);
    const into = new Uint8Array(randomBytes(8 << 20));
    let closed = false;
    let more!: () => void;
    async function* progress(): AsyncGenerator<number> {
      try {
        yield 2 << 20;
        await new Promise<void>((r) => (more = r));
        yield 4 << 20;
      } finally {
        closed = true;
      }
    }
    const filled = store.fill('p', { bytes: into, progress: progress() }, { key: KEY, avg: AVG }, { reference: true });
    for (let i = 0; i < 10; i++) await tick();
    expect(store.stats().entries).toBeGreaterThan(0);
    store.dropScope('p');
    more();
    await filled;
    expect(closed).toBe(true);
    expect(store.stats()).toMatchObject({ entries: 0, referenced: 0 });
    store.close();
  });
});
