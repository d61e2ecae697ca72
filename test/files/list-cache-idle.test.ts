// An idle List cache is released on its own (src/files/list-cache.ts). Its listings were dropped
// after idleMs only when the next List came: a server listed once (up to 32 MiB of names kept)
// and then only read or written held them for as long as it ran. Now one timer (unref'd: it
// never keeps a process alive) wakes when the least recently used listing turns idle, drops what
// is idle (counted in listCacheEvicted) and re-arms while anything is left; close() drops it all.
// Driven here with the cache's clock and timer injected, then once with real timers and files.
import fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type DirStamp, ListingCache, readSortedNames } from '../../src/files/list-cache.js';
import { until, tempDir } from './helpers.js';

const stamp = (ino: number): DirStamp => ({ dev: 1n, ino: BigInt(ino), mtimeNs: 1n, ctimeNs: 1n });

/** A clock and a one-shot timer the test fires by hand. */
function fakeTime() {
  const t = { now: 100_000, armed: [] as { fn: () => void; at: number; cleared: boolean }[] };
  const schedule = (fn: () => void, ms: number): { clear(): void } => {
    const e = { fn, at: t.now + ms, cleared: false };
    t.armed.push(e);
    return { clear: () => void (e.cleared = true) };
  };
  /** Move the clock to `to` and fire every live timer due by then (as the event loop would). */
  const advance = (to: number): void => {
    t.now = to;
    for (const e of t.armed.splice(0)) {
      if (e.cleared) continue;
      if (e.at <= to) e.fn();
      else t.armed.push(e);
    }
  };
  const live = (): number => t.armed.filter((e) => !e.cleared).length;
  return { t, schedule, advance, live };
}

describe('ListingCache idle release (clock and timer injected)', () => {
  it('a listing unused for idleMs is dropped by the timer with no List coming; one timer at most, re-armed for what is left', async () => {
    const { t, schedule, advance, live } = fakeTime();
    const c = new ListingCache({ idleMs: 1000, racyMs: 0 }, () => t.now, schedule);
    expect(live()).toBe(0);
    await c.load(stamp(1), 0, async () => ['a', 'b']);
    expect(live()).toBe(1);
    advance(100_600);
    await c.load(stamp(2), 0, async () => ['c']);
    // Still one timer, for the oldest listing's idle time.
    expect(live()).toBe(1);
    advance(100_999);
    expect(c.counters().listCacheDirs).toBe(2);
    advance(101_000);
    // The first went; the timer is re-armed for the second.
    expect(c.counters()).toMatchObject({ listCacheDirs: 1, listCacheEvicted: 1 });
    expect(live()).toBe(1);
    advance(101_600);
    expect(c.counters()).toMatchObject({ listCacheDirs: 0, listCacheBytes: 0, listCacheEvicted: 2 });
    // Empty: no timer left.
    expect(live()).toBe(0);
  });

  it('a listing in use is kept past its first idle time (the timer looks again later); close() drops everything and the timer', async () => {
    const { t, schedule, advance, live } = fakeTime();
    const c = new ListingCache({ idleMs: 1000, racyMs: 0 }, () => t.now, schedule);
    await c.load(stamp(1), 0, async () => ['a']);
    advance(100_900);
    await c.load(stamp(1), 1, async () => ['never read']);
    advance(101_000);
    expect(c.counters()).toMatchObject({ listCacheDirs: 1, listCacheHits: 1, listCacheEvicted: 0 });
    expect(live()).toBe(1);
    c.close();
    expect(c.counters()).toMatchObject({ listCacheDirs: 0, listCacheBytes: 0 });
    expect(live()).toBe(0);
  });
});

describe('ListingCache idle release (real timers, real directory)', () => {
  it('a directory listed once is released after a short idleMs without another List', async () => {
    const dir = tempDir('list-idle');
    try {
      for (let i = 0; i < 50; i++) fs.writeFileSync(join(dir, `f${i}`), '');
      const st = fs.statSync(dir, { bigint: true });
      const c = new ListingCache({ idleMs: 100, racyMs: 0 });
      const names = await c.load({ dev: st.dev, ino: st.ino, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs }, 0, () => readSortedNames(dir, /^\.sabre-/, 1000));
      expect(names).toHaveLength(50);
      expect(c.counters().listCacheDirs).toBe(1);
      await until(() => c.counters().listCacheDirs === 0, 5000, 'the idle listing to be released');
      expect(c.counters()).toMatchObject({ listCacheBytes: 0, listCacheEvicted: 1 });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
