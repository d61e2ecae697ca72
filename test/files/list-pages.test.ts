// List pages are cut from one sorted read of the directory (src/files/list-cache.ts), kept while
// the directory is unchanged. Before, every page re-read, filtered and sorted the whole
// directory on the server's one thread: a client asking one entry a page made a listing cost
// O(N² log N), and (audit) one such connection slowed another client's 5-byte reads 35×.
// Here: the pages are exactly what they were (order, cookies, temporaries hidden, changes seen
// by a new listing), a listing of one entry a page reads the directory about once, the cache is
// bounded in directories, bytes and idle time, and the read stops past its entry limit.
import fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileClient } from '../../src/index.js';
import { decodeDirEntries, direntSize } from '../../src/files/dirents.js';
import { type DirStamp, ListingCache, readSortedNames } from '../../src/files/list-cache.js';
import { FILE_DIR_ENTRY, FileOp, FileStatus } from '../../src/wire/files-spec.js';
import { boundRaw } from './raw.js';
import { servedDir, tempDir } from './helpers.js';

const TOKEN = 'list-pages-token-0123456789';
const stamp = (ino: number, t: bigint): DirStamp => ({ dev: 1n, ino: BigInt(ino), mtimeNs: t, ctimeNs: t });
const MS = 1_000_000n;

/** Wait until `dir` has been unchanged longer than the cache's racy window (a snapshot of it is then reusable by a new listing). */
async function settle(dir: string, racyMs = 2000): Promise<void> {
  const ctime = fs.statSync(dir).ctimeMs;
  const wait = ctime + racyMs + 100 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, Math.min(wait, 5000)));
}

describe('ListingCache (no I/O)', () => {
  /** A cache on a clock the test moves, and a read that counts its calls. */
  function setup(limits: ConstructorParameters<typeof ListingCache>[0] = {}) {
    const t = { now: 100_000 };
    const c = new ListingCache(limits, () => t.now);
    let reads = 0;
    const read = (names: string[]) => async (): Promise<string[]> => (reads++, names);
    return { t, c, read, reads: () => reads };
  }

  it('serves a listing while the stamp is unchanged; a changed mtime or ctime reads again', async () => {
    const { c, read, reads } = setup({ racyMs: 0 });
    expect(await c.load(stamp(1, 10n * MS), 0, read(['a', 'b']))).toEqual(['a', 'b']);
    expect(await c.load(stamp(1, 10n * MS), 0, read(['x']))).toEqual(['a', 'b']);
    expect(await c.load({ ...stamp(1, 10n * MS), ctimeNs: 11n * MS }, 0, read(['a', 'b', 'c']))).toEqual(['a', 'b', 'c']);
    expect(await c.load({ ...stamp(1, 10n * MS), mtimeNs: 12n * MS }, 1, read(['d']))).toEqual(['d']);
    expect(reads()).toBe(3);
    // Stale ones are replaced, not counted as evictions.
    expect(c.counters()).toMatchObject({ listCacheHits: 1, listCacheMisses: 3, listCacheEvicted: 0, listCacheDirs: 1, listCacheBytes: 33 });
  });

  it('pages asked for while the directory is read wait for that read', async () => {
    const { c, read, reads } = setup({ racyMs: 0 });
    const all = await Promise.all([0, 1, 2, 3].map((k) => c.load(stamp(1, 5n * MS), k, read(['a', 'b', 'c', 'd']))));
    expect(all.every((x) => x?.length === 4)).toBe(true);
    expect(reads()).toBe(1);
    expect(c.counters()).toMatchObject({ listCacheHits: 3, listCacheMisses: 1 });
  });

  it('a listing read within racyMs of the directory\'s ctime serves later pages only', async () => {
    const { t, c, read, reads } = setup({ racyMs: 2000 });
    // Read 1 s after the ctime: a change in the same tick could be missing from it.
    t.now = 11_000;
    await c.load(stamp(1, 10_000n * MS), 0, read(['a', 'b', 'c']));
    expect(await c.load(stamp(1, 10_000n * MS), 2, read(['x']))).toEqual(['a', 'b', 'c']);
    expect(await c.load(stamp(1, 10_000n * MS), 0, read(['a', 'b', 'c', 'late']))).toEqual(['a', 'b', 'c', 'late']);
    expect(reads()).toBe(2);
    // Read 3 s after: reusable by a new listing too.
    t.now = 13_000;
    await c.load(stamp(1, 10_000n * MS), 0, read(['a', 'b', 'c', 'late']));
    expect(await c.load(stamp(1, 10_000n * MS), 0, read(['x']))).toEqual(['a', 'b', 'c', 'late']);
    expect(reads()).toBe(3);
  });

  it('bounded in directories and bytes (least recently used dropped first) and in idle time, each drop counted', async () => {
    const { t, c, read, reads } = setup({ maxDirs: 3, maxBytes: 1000, idleMs: 100, racyMs: 0 });
    for (let i = 1; i <= 3; i++) await c.load(stamp(i, 1n), 0, read([`n${i}`]));
    await c.load(stamp(1, 1n), 0, read(['x'])); // 1 is now the most recently used
    await c.load(stamp(4, 1n), 0, read(['n4']));
    expect(c.counters()).toMatchObject({ listCacheDirs: 3, listCacheEvicted: 1 });
    expect(await c.load(stamp(1, 1n), 0, read(['x']))).toEqual(['n1']);
    expect(reads()).toBe(4);
    // One name of 600 characters (632 estimated bytes): the others make room for it.
    await c.load(stamp(5, 1n), 0, read(['x'.repeat(600)]));
    expect(c.counters().listCacheBytes).toBeLessThanOrEqual(1000);
    // A listing larger than maxBytes is served but not kept.
    await c.load(stamp(6, 1n), 0, read(['y'.repeat(2000)]));
    await c.load(stamp(6, 1n), 1, read(['y'.repeat(2000)]));
    expect(reads()).toBe(7);
    // Idle past idleMs: gone at the next use of the cache.
    t.now += 500;
    await c.load(stamp(9, 1n), 0, read([]));
    expect(c.counters()).toMatchObject({ listCacheDirs: 1, listCacheBytes: 0 });
  });

  it('readSortedNames stops past its limit and hides what it is told to', async () => {
    const dir = tempDir('sorted-names');
    try {
      for (const n of ['b', 'a', 'c', '.sabre-0123456789abcdef.part']) fs.writeFileSync(join(dir, n), '');
      expect(await readSortedNames(dir, /^\.sabre-/, 3)).toEqual(['a', 'b', 'c']);
      expect(await readSortedNames(dir, /^\.sabre-/, 2)).toBeUndefined();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('List over a real server: pages from one read of the directory', () => {
  const s = servedDir('list-pages', { port: 0, token: TOKEN, transports: ['tcp'] });

  /** Every page of `path` with room for `room` bytes of entries: the names in order, and the cookies. */
  async function pages(ask: Awaited<ReturnType<typeof boundRaw>>['ask'], sink: { addr: number; rkey: number; buffer: Uint8Array }, path: string, room: number) {
    const names: string[] = [];
    const cookies: number[] = [];
    let cookie = 0;
    for (let i = 0; i < 10_000; i++) {
      const d = await ask(FileOp.List, { op: FileOp.List, cookie, sinkLength: room, sinkAddr: sink.addr, sinkRkey: sink.rkey, path });
      expect(d.status).toBe(FileStatus.Success);
      const page = decodeDirEntries(sink.buffer.subarray(0, d.value));
      if (typeof page === 'string') throw new Error(page);
      names.push(...page.map((e) => e.name));
      cookies.push(d.aux);
      if (d.aux === 0) break;
      cookie = d.aux;
    }
    return { names, cookies };
  }

  it('pages of one entry give the sorted names, temporaries hidden, cookies counting up; a new listing sees changes', async () => {
    const sub = join(s.dir, 'small');
    fs.mkdirSync(sub);
    const made = Array.from({ length: 60 }, (_, i) => `f-${String((i * 37) % 60).padStart(3, '0')}-${'é'.repeat(i % 3)}`);
    for (const n of made) fs.writeFileSync(join(sub, n), n);
    fs.writeFileSync(join(sub, '.sabre-00112233445566aa.part'), 'temporary');
    const { r, ask } = await boundRaw(s.srv.address.port, TOKEN);
    try {
      const one = FILE_DIR_ENTRY.size + 24;
      const a = await pages(ask, r.sink, 'small', one);
      expect(a.names).toEqual([...made].sort());
      expect(a.cookies).toEqual([...Array.from({ length: 59 }, (_, i) => i + 1), 0]);
      // A cookie past the end is refused as before.
      expect((await ask(FileOp.List, { op: FileOp.List, cookie: 61, sinkLength: one, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey, path: 'small' })).status).toBe(FileStatus.InvalidParameter);
      // Changes right after a listing (same clock tick, perhaps): a new listing sees them.
      fs.writeFileSync(join(sub, 'added'), '');
      fs.rmSync(join(sub, made[0]!));
      const b = await pages(ask, r.sink, 'small', 4096);
      expect(b.names).toEqual([...made.slice(1), 'added'].sort());
      const c = await FileClient.connect(`127.0.0.1:${s.srv.address.port}`, { token: TOKEN, transport: 'tcp' });
      try {
        expect((await c.list('small')).map((e) => e.name)).toEqual(b.names);
      } finally {
        await c.end();
      }
    } finally {
      await r.close();
    }
  }, 60_000);

  it('one entry a page through a directory of 20 000 long names reads it about once, and another client\'s reads stay fast', async () => {
    const N = 20_000;
    const sub = join(s.dir, 'big');
    fs.mkdirSync(sub);
    const stem = 'x'.repeat(200);
    for (let i = 0; i < N; i++) fs.closeSync(fs.openSync(join(sub, `${stem}${String(i).padStart(5, '0')}`), 'w'));
    await settle(sub);
    const victim = await FileClient.connect(`127.0.0.1:${s.srv.address.port}`, { token: TOKEN, transport: 'tcp' });
    const { r, ask } = await boundRaw(s.srv.address.port, TOKEN, 30_000);
    const before = s.srv.stats();
    let stop = false;
    try {
      const f = await victim.open('hello.txt');
      const one = direntSize(205);
      // The hostile pattern: four Lists in flight, one entry each, walking the cookies (and
      // asking cookie 0 again at every tenth: a new listing of an unchanged directory). 400
      // pages (30 s at most): before, each re-read and sorted the 20 000 names (~40 ms apiece).
      const PAGES = 400;
      let pagesDone = 0;
      let walking = 4;
      const walker = async (lane: number): Promise<void> => {
        let cookie = lane;
        const end = Date.now() + 30_000;
        while (!stop && Date.now() < end && pagesDone < PAGES) {
          pagesDone++;
          const d = await ask(FileOp.List, { op: FileOp.List, cookie: pagesDone % 10 === 0 ? 0 : cookie, sinkLength: one, sinkAddr: r.sink.addr, sinkRkey: r.sink.rkey, path: 'big' });
          expect(d.status).toBe(FileStatus.Success);
          cookie = (cookie + 4) % N;
        }
        walking--;
      };
      const lat: number[] = [];
      const reads = (async () => {
        while (walking > 0 && lat.length < 100_000) {
          const t0 = performance.now();
          await victim.read(f, 0, 5);
          lat.push(performance.now() - t0);
        }
      })();
      await Promise.all([walker(0), walker(1), walker(2), walker(3), reads]);
      const after = s.srv.stats();
      const misses = after.listCacheMisses - before.listCacheMisses;
      const hits = after.listCacheHits - before.listCacheHits;
      lat.sort((a, b) => a - b);
      const seen = { pagesDone, misses, hits, reads: lat.length, medianMs: lat[Math.floor(lat.length / 2)] };
      expect(pagesDone, JSON.stringify(seen)).toBe(PAGES);
      // Read once (twice if a read raced a clock tick), every other page cut from it.
      expect(misses, JSON.stringify(seen)).toBeLessThanOrEqual(3);
      expect(hits, JSON.stringify(seen)).toBeGreaterThanOrEqual(pagesDone - 3);
      // A 5-byte read does not wait behind the directory (it did: ~35× its time alone). Generous.
      expect(seen.medianMs, JSON.stringify(seen)).toBeLessThan(50);
      expect(after.listCacheDirs).toBeGreaterThanOrEqual(1);
      expect(after.listCacheBytes).toBeGreaterThan(N * 200);
    } finally {
      stop = true;
      await r.close();
      await victim.end();
    }
  }, 120_000);
});
