// nic/region-fence.ts: when a deregistered region's memory may be handed on. Driven with a link
// whose detach answers what the test says (the system's send queue drained or not) and fake timers.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Owns } from '../../src/core/detach.js';
import type { Link } from '../../src/core/link.js';
import { RegionFence } from '../../src/nic/region-fence.js';
import type { RdmapEngine } from '../../src/rdmap/engine.js';
import type { EngineMemory, MrRecord } from '../../src/rdmap/memory.js';

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

function fence(drained: () => boolean) {
  const counters = { regionsKept: 0 };
  const asked: Owns[] = [];
  const engine = { counters, detach: (o: Owns) => void asked.push(o) } as unknown as RdmapEngine;
  const link = { detach: () => drained() } as unknown as Link;
  const memory = { view: () => new Uint8Array(16) } as unknown as EngineMemory;
  return { f: new RegionFence(engine, link, memory), counters, asked };
}

const region = (over: Partial<MrRecord> = {}): MrRecord => ({ stag: 1, addr: 4096, length: 16, pd: 1, access: 0, ...over });

describe('RegionFence', () => {
  it('a region no flushed work named is freed at once, busy or not once idle', () => {
    const { f, asked } = fence(() => false);
    const free = vi.fn();
    f.letGo(region(), free);
    expect(free).toHaveBeenCalledTimes(1);
    const busy = region({ busy: 1 });
    const free2 = vi.fn();
    f.letGo(busy, free2);
    expect(free2).not.toHaveBeenCalled();
    busy.onIdle!();
    expect(free2).toHaveBeenCalledTimes(1);
    expect(asked.length).toBe(0);
  });

  it('an unsettled region waits while the system queue holds views, and is freed once it drained', () => {
    let drained = false;
    const { f } = fence(() => drained);
    const a = vi.fn();
    const b = vi.fn();
    f.letGo(region({ unsettled: true }), a);
    f.letGo(region({ stag: 2, addr: 8192, unsettled: true }), b);
    vi.advanceTimersByTime(50);
    expect(a).not.toHaveBeenCalled();
    drained = true;
    vi.advanceTimersByTime(2);
    expect(a).toHaveBeenCalledTimes(1);
    expect(b).toHaveBeenCalledTimes(1);
    // One timer for both: nothing more is pending.
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a queue that never drains: the memory is kept for good past the retries and counted (regionsKept), never freed', () => {
    const { f, counters } = fence(() => false);
    const free = vi.fn();
    f.letGo(region({ unsettled: true }), free);
    vi.advanceTimersByTime(20_000);
    expect(free).not.toHaveBeenCalled();
    expect(counters.regionsKept).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('memory its registrant takes back: busy work gets a copy of the bytes; nothing is freed here', () => {
    const { f, asked } = fence(() => false);
    const ext = new Uint8Array(16).fill(7);
    const rec = region({ busy: 1, ext });
    f.letGo(rec, undefined);
    expect(rec.ext).not.toBe(ext);
    ext.fill(9);
    expect([...rec.ext!]).toEqual(new Array(16).fill(7));
    expect(asked.length).toBe(1);
  });
});

describe('RegionFence asks', () => {
  it('each waiting region counts its own asks: one that joins late is not kept with the first', () => {
    const { f, counters } = fence(() => false);
    const first = vi.fn();
    const late = vi.fn();
    f.letGo(region({ unsettled: true }), first);
    vi.advanceTimersByTime(9_990);
    f.letGo(region({ stag: 2, addr: 8192, unsettled: true }), late);
    vi.advanceTimersByTime(100);
    expect(counters.regionsKept).toBe(1);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(20_000);
    expect(counters.regionsKept).toBe(2);
    expect(first).not.toHaveBeenCalled();
    expect(late).not.toHaveBeenCalled();
  });
});
