// Object-sized buffers kept for the next transfer (src/dedup/buffers.ts): a buffer given back is
// taken again for an object that fits, at most two are kept, and a receiver assembling into a
// kept buffer full of another transfer's bytes still delivers its own object exactly.
import { randomBytes } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { giveBack, keptBytes, takeBuffer } from '../../src/dedup/buffers.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { harness, same } from './cores.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 32 << 20, maximumBytes: 128 << 20, workerSlots: 0 });
});

/** Empty the pool: take until nothing kept is left. */
function drain(): void {
  while (keptBytes() > 0) takeBuffer(1);
}
afterEach(() => {
  vi.useRealTimers();
  drain();
});

describe('kept object buffers', () => {
  it('a buffer given back serves the next take that fits (the smallest that does), and only once', () => {
    drain();
    const a = takeBuffer(1 << 20);
    const b = takeBuffer(4 << 20);
    giveBack(a);
    giveBack(b);
    expect(keptBytes()).toBe(5 << 20);
    const c = takeBuffer(3 << 20);
    expect(c.buffer).toBe(b.buffer); // the smallest that holds 3 MiB
    expect(c.length).toBe(3 << 20);
    const d = takeBuffer(2 << 20); // nothing kept fits: fresh
    expect(d.buffer).not.toBe(a.buffer);
    expect(takeBuffer(1000).buffer).toBe(a.buffer);
    expect(keptBytes()).toBe(0);
  });

  it('keeps at most two (the larger ones); not a second give-back, shared memory, or part of a buffer it did not hand out', () => {
    drain();
    const [x, y, z] = [takeBuffer(1 << 20), takeBuffer(2 << 20), takeBuffer(3 << 20)];
    giveBack(x);
    giveBack(y);
    giveBack(y);
    giveBack(z);
    expect(keptBytes()).toBe(5 << 20);
    giveBack(new Uint8Array(new SharedArrayBuffer(1 << 20)));
    expect(keptBytes()).toBe(5 << 20);
    drain();
    // A view of part of a buffer it did not hand out (a pooled Buffer's slab): not taken.
    giveBack(new Uint8Array(new ArrayBuffer(8 << 20), 4096, 1 << 20));
    expect(keptBytes()).toBe(0);
    giveBack(new Uint8Array(new ArrayBuffer(8 << 20)));
    expect(keptBytes()).toBe(8 << 20);
  });

  it('drops what it keeps after a few idle seconds', () => {
    drain();
    vi.useFakeTimers();
    giveBack(takeBuffer(1 << 20));
    expect(keptBytes()).toBe(1 << 20);
    vi.advanceTimersByTime(10_000);
    expect(keptBytes()).toBe(0);
  });

  it('a receiver assembling into a kept buffer full of other bytes delivers exactly its own object', () => {
    drain();
    const stale = takeBuffer(600_000);
    stale.fill(0xee);
    giveBack(stale);
    const h = harness(dm, new ChunkStore(dm));
    const b = new Uint8Array(randomBytes(500_000));
    const r = h.send(b);
    expect(r.got?.buffer).toBe(stale.buffer); // it did take the kept one
    expect(same(r.got, b)).toBe(true);
  });
});
