// The senders' staging pool (src/dedup/stage-pool.ts): a block given back serves the next take
// that fits (the smallest such), at most two are kept (the larger ones), and the rest is freed.
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { returnStage, stageKeptBytes, takeStage } from '../../src/dedup/stage-pool.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 16 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
});

describe('dedup stage pool', () => {
  it('reuses a given-back block, keeps at most two (the larger), frees the rest', () => {
    const a = takeStage(dm, 1 << 20);
    const b = takeStage(dm, 2 << 20);
    const c = takeStage(dm, 3 << 20);
    expect(dm.sizeOf(a.addr)).toBeGreaterThanOrEqual(1 << 20);
    returnStage(dm, a);
    returnStage(dm, b);
    returnStage(dm, c); // a (the smallest) goes
    expect(stageKeptBytes(dm)).toBe(5 << 20);
    expect(dm.sizeOf(a.addr)).toBeUndefined();
    const again = takeStage(dm, 1 << 20); // the smallest that fits: b
    expect(again.addr).toBe(b.addr);
    expect(stageKeptBytes(dm)).toBe(3 << 20);
    const fresh = takeStage(dm, 4 << 20); // none fits: allocated
    expect(fresh.addr).not.toBe(c.addr);
    for (const x of [again, fresh, takeStage(dm, 3 << 20)]) returnStage(dm, x);
    expect(stageKeptBytes(dm)).toBe(7 << 20);
  });

  it('a small take does not get a far larger kept block (a fresh one instead), so a large send beside it does not double what is kept', async () => {
    const mem = await DeviceMemory.create({ initialBytes: 16 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
    const big = takeStage(mem, 16 << 20);
    returnStage(mem, big);
    const small = takeStage(mem, 4096);
    expect(small.addr).not.toBe(big.addr);
    expect(stageKeptBytes(mem)).toBe(16 << 20);
    const large = takeStage(mem, 12 << 20); // fits the kept one, not far larger: taken
    expect(large.addr).toBe(big.addr);
    for (const x of [small, large]) returnStage(mem, x);
  });
});
