// A receiver that assembles its object in its basis (store.fill(…, { inPlace: true }), what the
// file service does): chunks already where they belong are not copied and no object-sized
// buffer is taken; at the first chunk that moved the object leaves the basis, and a basis chunk
// whose bytes were written over meanwhile is asked for. Byte-exact whatever moved: an insertion,
// a deletion, halves swapped, a block changed and its old bytes appended at the end. Also
// WrittenRanges against a model. The shells run over an in-process pipe and a write path that
// copies into the landing zone (the fill.test.ts harness).
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupReceiver, DedupSender, type MessagePipe } from '../../src/dedup/endpoint.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { WrittenRanges } from '../../src/dedup/written.js';
import { ErrorCode, SabreError } from '../../src/core/errors.js';
import { copyWriter, same } from './cores.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 32 << 20, maximumBytes: 256 << 20, workerSlots: 0 });
});

const KEY = new Uint8Array(32).fill(9);
const AVG = 4096;
const MiB = 1 << 20;
const concat = (...parts: Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(parts));

function ends(store: ChunkStore, rxMem: DeviceMemory = dm) {
  let onRx: (b: Uint8Array) => void = () => undefined;
  let onTx: (b: Uint8Array) => void = () => undefined;
  const txPipe: MessagePipe = { send: (b) => void queueMicrotask(() => onRx(b)), onMessage: (h) => void (onTx = h) };
  const rxPipe: MessagePipe = { send: (b) => void queueMicrotask(() => onTx(b)), onMessage: (h) => void (onRx = h) };
  const w = copyWriter(dm);
  const zone = { addr: dm.alloc(4 * MiB), rkey: 0x4321, length: 4 * MiB };
  const progress: Array<{ bytes: Uint8Array; done: number; moved?: boolean }> = [];
  const rx = new DedupReceiver({
    pipe: rxPipe, mem: rxMem, store, scope: 'p', zone, slots: 4, key: KEY, avg: AVG, keepReceived: false,
    onProgress: (bytes, done, moved) => progress.push({ bytes, done, ...(moved ? { moved } : {}) }),
  });
  const tx = new DedupSender({ pipe: txPipe, rdma: w, mem: dm, step: 256 << 10 });
  return { rx, tx, progress, close: () => (rx.close(), tx.close(), w.free(), dm.free(zone.addr)) };
}

/** Send v2 against a basis that is a copy of v1, assembled in place; returns what arrived and moved. */
async function transfer(v1: Uint8Array, v2: Uint8Array) {
  const store = new ChunkStore(dm);
  const basis = v1.slice(); // given up to the transfer: it is written over
  await store.fill('p', basis, { key: KEY, avg: AVG }, { reference: true, inPlace: true });
  const e = ends(store);
  const [r, got] = await Promise.all([e.tx.send(v2), e.rx.next()]);
  const out = { bytes: got.bytes, sent: r.bytesSent, inBasis: got.bytes.buffer === basis.buffer, progress: e.progress, stats: got.stats };
  e.close();
  store.dropScope('p');
  expect(store.takeInPlaceBasis('p')).toBeUndefined();
  store.close();
  return out;
}

describe('a chunk repeated far from its first copy (keepReceived: false)', () => {
  it('is copied from the first copy even when that one landed long before (it hung: nothing filled it)', async () => {
    const r = new Uint8Array(randomBytes(MiB));
    const v2 = new Uint8Array(26 * MiB);
    v2.set(r, 0);
    v2.set(randomBytes(24 * MiB), MiB); // several OFFER pages of new chunks between the copies
    v2.set(r, 25 * MiB);
    const timeout = new Promise<'hung'>((res) => setTimeout(() => res('hung'), 20_000).unref());
    const got = await Promise.race([transfer(new Uint8Array(randomBytes(MiB)), v2), timeout]);
    expect(got).not.toBe('hung');
    if (got === 'hung') return;
    expect(same(got.bytes, v2)).toBe(true);
    expect(got.sent).toBeLessThan(v2.length - MiB / 2);
  }, 30_000);
});

describe('written ranges in the basis are bounded', () => {
  it('past 1024 ranges written apart (every few chunks changed) the object leaves the basis, byte-exact', async () => {
    const v1 = new Uint8Array(randomBytes(40 * MiB));
    const v2 = v1.slice();
    for (let at = 0; at < v2.length; at += 12 << 10) v2[at] = v2[at]! ^ 0xff; // thousands of changed chunks between unchanged ones
    const r = await transfer(v1, v2);
    expect(same(r.bytes, v2)).toBe(true);
    expect(r.inBasis).toBe(false);
    expect(r.progress.some((p) => p.moved)).toBe(true);
    expect(r.stats).toMatchObject({ leftBasis: 1, leftBasisRanges: 1 });
  }, 60_000);
});

describe('no device memory at the receiver', () => {
  it('for the chunk maps at the first ROUND: the transfer ends (TooLarge: ERR_LIMIT_EXCEEDED at both ends), nothing thrown out of the receiver', async () => {
    const store = new ChunkStore(dm);
    const v1 = new Uint8Array(randomBytes(2 * MiB));
    await store.fill('p', v1.slice(), { key: KEY, avg: AVG }, { reference: true, inPlace: true });
    const v2 = v1.slice();
    v2.set(randomBytes(MiB), MiB);
    let isFull = false; // after the receiver is made (it allocates its own small tables)
    const full = new Proxy(dm, {
      get(t, k) {
        if (k === 'alloc' && isFull) return () => { throw new SabreError(ErrorCode.NoMemory, 'device memory is full'); };
        const v = Reflect.get(t, k, t) as unknown;
        return typeof v === 'function' ? v.bind(t) : v;
      },
    });
    const e = ends(store, full);
    isFull = true;
    const [sent, got] = await Promise.allSettled([e.tx.send(v2), e.rx.next()]);
    expect(sent).toMatchObject({ status: 'rejected', reason: { code: ErrorCode.LimitExceeded } });
    expect(got.status).toBe('rejected');
    e.close();
    store.close();
  });
});

describe('a basis serves one transfer', () => {
  it('a second transfer on the scope neither assembles in the basis nor reads the old version from it (it holds the first object now)', async () => {
    const store = new ChunkStore(dm);
    const v1 = new Uint8Array(randomBytes(4 * MiB));
    const basis = v1.slice();
    await store.fill('p', basis, { key: KEY, avg: AVG }, { reference: true, inPlace: true });
    const v2 = v1.slice();
    v2.set(randomBytes(MiB), 2 * MiB);
    const v3 = v1.slice(); // the old version again: its chunks are no longer in the basis
    const e = ends(store);
    const [, first] = await Promise.all([e.tx.send(v2), e.rx.next()]);
    expect(first.bytes.buffer).toBe(basis.buffer);
    expect(same(first.bytes, v2)).toBe(true);
    const [, second] = await Promise.all([e.tx.send(v3), e.rx.next()]);
    expect(second.bytes.buffer).not.toBe(basis.buffer);
    expect(same(second.bytes, v3)).toBe(true);
    expect(same(first.bytes, v2)).toBe(true); // the delivered object was not written over
    e.close();
    store.close();
  });
});

describe('assembling the object in its basis', () => {
  it('versions that keep their chunks in place: the object is the basis, byte-exact, the new half moved', async () => {
    const v1 = new Uint8Array(randomBytes(6 * MiB));
    const v2 = v1.slice();
    for (let at = 0; at < v2.length; at += 2 * MiB) v2.set(randomBytes(MiB), at);
    const r = await transfer(v1, v2);
    expect(same(r.bytes, v2)).toBe(true);
    expect(r.inBasis).toBe(true);
    expect(r.sent).toBeLessThan(v2.length * 0.56);
    expect(r.progress.at(-1)!.done).toBe(v2.length);
    expect(r.progress.some((p) => p.moved)).toBe(false);
    expect(r.stats).toMatchObject({ leftBasis: 0, leftBasisRanges: 0 });
  });

  const cases: Array<[string, (v1: Uint8Array) => Uint8Array, number]> = [
    ['an insertion near the start', (v1) => concat(v1.subarray(0, 100_000), randomBytes(3000), v1.subarray(100_000)), 0.1],
    ['a deletion near the start', (v1) => concat(v1.subarray(0, 100_000), v1.subarray(160_000)), 0.1],
    ['the halves swapped', (v1) => concat(v1.subarray(v1.length / 2), v1.subarray(0, v1.length / 2)), 0.1],
    // The changed block's new bytes land where its old ones were before the old ones are needed
    // at the end: those are asked for (or copied, if still intact when their page came).
    ['a block changed and its old bytes appended', (v1) => concat(v1.subarray(0, MiB), randomBytes(MiB), v1.subarray(2 * MiB), v1.subarray(MiB, 2 * MiB)), 0.45],
  ];
  it.each(cases)('%s: byte-exact, and only about the new bytes move', async (_, make, most) => {
    const v1 = new Uint8Array(randomBytes(6 * MiB));
    const v2 = make(v1);
    const r = await transfer(v1, v2);
    expect(same(r.bytes, v2)).toBe(true);
    expect(r.sent).toBeLessThan(v2.length * most);
    // Whatever was told as final before the object left the basis is the same in the new one.
    for (const p of r.progress) expect(same(p.bytes.subarray(0, p.done), v2.subarray(0, p.done))).toBe(true);
  });

  it('takeInPlaceBasis: none while the fill runs or without inPlace; the filled bytes once it has settled, once', async () => {
    const store = new ChunkStore(dm);
    const bytes = new Uint8Array(randomBytes(2 * MiB));
    const f = store.fill('p', bytes, { key: KEY, avg: AVG }, { reference: true, inPlace: true });
    expect(store.takeInPlaceBasis('p')).toBeUndefined();
    await f;
    expect(store.takeInPlaceBasis('p')).toBe(bytes);
    expect(store.takeInPlaceBasis('p')).toBeUndefined();
    await store.fill('q', bytes, { key: KEY, avg: AVG }, { reference: true });
    expect(store.takeInPlaceBasis('q')).toBeUndefined();
    store.close();
  });
});

describe('WrittenRanges', () => {
  it('answers as a byte map does, for writes in any order', () => {
    for (let round = 0; round < 20; round++) {
      const n = 4000;
      const model = new Uint8Array(n);
      const w = new WrittenRanges();
      for (let k = 0; k < 200; k++) {
        const at = Math.floor(Math.random() * n);
        const len = Math.floor(Math.random() * 60);
        const ordered = round % 2 === 0;
        const a = ordered ? Math.min(n - 1, k * 19) : at;
        w.add(a, Math.min(len, n - a));
        model.fill(1, a, Math.min(n, a + len));
        const qa = Math.floor(Math.random() * n);
        const ql = 1 + Math.floor(Math.random() * 50);
        expect(w.touches(qa, ql)).toBe(model.subarray(qa, Math.min(n, qa + ql)).includes(1));
      }
      expect(w.size).toBeLessThanOrEqual(200);
    }
  });
});
