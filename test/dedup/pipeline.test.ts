// The transfer's pipelining hooks: an ordered write path (each ROUND right behind its writes,
// completions late, so GRANTs come first: a slot is reused only once both are in, in grant
// order); the receiver's progress (the object's verified prefix, final when reported); and the
// file service's PrefixWriter that writes that prefix out while the rest arrives.
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DedupKind } from '../../src/wire/dedup-spec.js';
import { PrefixWriter } from '../../src/files/dedup-writer.js';
import { harness, KEY, same } from './cores.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 64 << 20, maximumBytes: 256 << 20, workerSlots: 0 });
});

/** The writes cover [0, length) contiguously, no byte twice (a tail's pieces may complete in any order). */
function expectContiguous(writes: Array<[number, number]>, length: number): void {
  let at = 0;
  for (const [o, l] of [...writes].sort((x, y) => x[0] - y[0])) {
    expect(o).toBe(at);
    at += l;
  }
  expect(at).toBe(length);
}

describe('dedup transfer pipelining', () => {
  it('ordered writes: ROUNDs right behind their writes, completions after the GRANTs; exact, transfer after transfer', () => {
    const store = new ChunkStore(dm);
    const h = harness(dm, store);
    const a = new Uint8Array(randomBytes(1_500_000));
    const r1 = h.send(a, { ordered: true });
    expect(r1.error).toBeUndefined();
    expect(same(r1.got, a)).toBe(true);
    expect(r1.result!.rounds).toBeGreaterThan(3); // more runs than slots: slots were reused
    // Half new: the slots carry over from the last transfer (some freed only by late completions).
    const b = new Uint8Array(a);
    b.set(randomBytes(700_000), 400_000);
    const r2 = h.send(b, { ordered: true });
    expect(same(r2.got, b)).toBe(true);
    expect(r2.result!.bytesSent).toBeLessThan(700_000 + 100_000);
    // And a plain (unordered) one after it: both ends still agree on the slot order.
    const c = new Uint8Array(randomBytes(900_000));
    const r3 = h.send(c);
    expect(same(r3.got, c)).toBe(true);
    expect(r3.msgs.filter((k) => k === DedupKind.Round).length).toBe(r3.result!.rounds);
  });

  it('progress: the reported prefix only grows, is exact when reported, and ends at the whole object', () => {
    const store = new ChunkStore(dm);
    const h = harness(dm, store, { scope: 'p', key: KEY, progress: true });
    const a = new Uint8Array(randomBytes(1_200_000));
    h.send(a);
    const b = new Uint8Array(a);
    b.set(randomBytes(300_000), 200_000); // a change in the middle: the prefix waits for its chunks
    const r = h.send(b, { ordered: true });
    expect(same(r.got, b)).toBe(true);
    expect(r.progress.length).toBeGreaterThan(1);
    for (let i = 1; i < r.progress.length; i++) expect(r.progress[i]!.done).toBeGreaterThan(r.progress[i - 1]!.done);
    expect(r.progress.every((p) => p.exact)).toBe(true);
    expect(r.progress.at(-1)!.done).toBe(b.length);
  });
});

describe('PrefixWriter', () => {
  const sink = () => {
    const file = new Uint8Array(10 << 20);
    const writes: Array<[number, number]> = [];
    let active = 0;
    let overlapped = false;
    const write = async (from: Uint8Array, at: number) => {
      if (active++) overlapped = true;
      await new Promise((r) => setImmediate(r));
      file.set(from, at);
      writes.push([at, from.length]);
      active--;
    };
    return { file, writes, write, overlapped: () => overlapped };
  };

  it('writes the prefix in pieces as it grows, one write at a time, and the rest at finish', async () => {
    const s = sink();
    const w = new PrefixWriter(s.write);
    const obj = new Uint8Array(randomBytes(5 << 20));
    w.progress(obj, 100); // under a piece: not yet
    expect(s.writes).toHaveLength(0);
    w.progress(obj, (1 << 20) + 5);
    w.progress(obj, 3 << 20);
    // The pieces go one write at a time, each after the last finished: wait for them (bounded).
    await vi.waitFor(() => expect(s.writes.reduce((n, [, l]) => n + l, 0)).toBe(3 << 20), { timeout: 5000, interval: 5 });
    expect(s.writes.length).toBeGreaterThan(1);
    expect(s.overlapped()).toBe(false);
    await w.finish(obj);
    expect(Buffer.compare(s.file.subarray(0, obj.length), obj)).toBe(0);
    expectContiguous(s.writes, obj.length);
  });

  it('finish writes the tail in several writes at once (at most four), each byte once', async () => {
    const s = sink();
    let most = 0;
    let active = 0;
    const w = new PrefixWriter(async (from, at) => {
      most = Math.max(most, ++active);
      await s.write(from, at);
      active--;
    });
    const obj = new Uint8Array(randomBytes(9 << 20));
    w.progress(obj, 1 << 20);
    await vi.waitFor(() => expect(s.writes.length).toBe(1), { timeout: 5000, interval: 5 });
    await w.finish(obj);
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(4);
    expect(Buffer.compare(s.file.subarray(0, obj.length), obj)).toBe(0);
    expectContiguous(s.writes, obj.length);
  });

  it('stop: nothing more is written, and it resolves only once the write in flight is done', async () => {
    const s = sink();
    const w = new PrefixWriter(s.write);
    const obj = new Uint8Array(randomBytes(4 << 20));
    w.progress(obj, 2 << 20);
    await w.stop();
    const n = s.writes.length;
    w.progress(obj, 4 << 20);
    await new Promise((r) => setTimeout(r, 10));
    expect(s.writes.length).toBe(n);
  });

  it('a failed write fails finish with its error', async () => {
    const w = new PrefixWriter(async () => {
      throw new Error('disk full');
    });
    const obj = new Uint8Array(3 << 20);
    w.progress(obj, 2 << 20);
    await expect(w.finish(obj)).rejects.toThrow('disk full');
  });
});
