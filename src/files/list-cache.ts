// The sorted listings List pages are cut from, kept between pages. A List names a directory and
// a cookie (the index of the first entry in name order): cut from a fresh read of the whole
// directory each time, one listing cost O(N log N) per page — O(N² log N) for a client asking
// one entry a page, work on the server's one thread that every other client waited behind. Here
// a directory's sorted names are read once and reused by every page (and every client) while
// the directory is unchanged, so a page costs its own entries.
//
// A snapshot is the directory's (device, inode) with its mtime and ctime at the read, and is
// dropped as soon as either differs. Timestamps are coarse (a kernel tick; a second on some
// file systems): a change in the same tick as the read may leave them equal. So a snapshot read
// within `racyMs` of the directory's ctime is "racy": it serves the later pages of its listing
// (cookie > 0: a consistent snapshot, as good as re-reading) but a new listing (cookie 0) reads
// the directory again. Bounded in directories and in (estimated) bytes, least recently used
// dropped first; an idle snapshot is dropped after idleMs; every drop is counted.
//
// Idle snapshots are dropped by a timer, not only at the next List: a server listed once and then
// only read or written would hold them (up to maxBytes) for as long as it ran. One timer at most,
// armed while anything is kept, for when the least recently used snapshot turns idle; it drops
// what is idle and re-arms for what is left. Unref'd: it never keeps a process alive.
import { promises as fsp } from 'node:fs';

export interface ListCacheLimits {
  /** Directories whose listing is kept. */
  maxDirs: number;
  /** Estimated bytes of names kept, all directories (a listing above it is not kept). */
  maxBytes: number;
  /** A listing unused this long is dropped (ms). */
  idleMs: number;
  /** A listing read within this long after its directory's ctime serves only later pages (ms). */
  racyMs: number;
}

export const DEFAULT_LIST_CACHE: ListCacheLimits = { maxDirs: 64, maxBytes: 32 << 20, idleMs: 60_000, racyMs: 2000 };

export interface ListCacheCounters {
  /** List pages cut from a kept listing. */
  listCacheHits: number;
  /** Directory reads for a List (no listing kept, or it was stale or racy). */
  listCacheMisses: number;
  /** Listings dropped for room (maxDirs, maxBytes) or idle. */
  listCacheEvicted: number;
  /** Directories whose listing is kept now, and its estimated bytes. */
  listCacheDirs: number;
  listCacheBytes: number;
}

/** What identifies a directory's contents at one moment (fs.Stats with bigint: true). */
export interface DirStamp {
  dev: bigint;
  ino: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

interface Snapshot {
  names: readonly string[];
  mtimeNs: bigint;
  ctimeNs: bigint;
  bytes: number;
  racy: boolean;
  used: number;
}

/** Runs `fn` once after `ms` (a timer the caller may clear); injectable so tests drive time. */
export type Schedule = (fn: () => void, ms: number) => { clear(): void };

const unrefTimer: Schedule = (fn, ms) => {
  const t = setTimeout(fn, ms);
  t.unref();
  return { clear: () => clearTimeout(t) };
};

/** Estimated heap bytes of a name held as a string (one byte a character, and the string's header). */
const nameBytes = (n: string): number => n.length + 32;

export class ListingCache {
  readonly limits: ListCacheLimits;
  readonly #now: () => number;
  readonly #schedule: Schedule;
  /** The idle timer, while anything is kept. */
  #timer: { clear(): void } | undefined;
  /** In order of use, least recent first (an entry is re-inserted when used). */
  readonly #byDir = new Map<string, Snapshot>();
  /**
   * Reads under way, by directory and stamp: pages asked for meanwhile wait for the same read
   * rather than start their own. As many at most as List requests in flight (rwDepth each).
   */
  readonly #reading = new Map<string, { racy: boolean; names: Promise<string[] | undefined> }>();
  #bytes = 0;
  #hits = 0;
  #misses = 0;
  #evicted = 0;

  /** `now`: the wall clock in ms (file timestamps are wall-clock times); `schedule`: the idle timer. */
  constructor(limits: Partial<ListCacheLimits> = {}, now: () => number = Date.now, schedule: Schedule = unrefTimer) {
    this.limits = { ...DEFAULT_LIST_CACHE, ...limits };
    this.#now = now;
    this.#schedule = schedule;
  }

  /** Drop every snapshot and the timer (the server closes). */
  close(): void {
    this.#timer?.clear();
    this.#timer = undefined;
    this.#byDir.clear();
    this.#bytes = 0;
  }

  /** Arm the idle timer for the least recently used snapshot, unless armed or nothing is kept. */
  #arm(): void {
    if (this.#timer || this.#byDir.size === 0) return;
    const oldest = this.#byDir.values().next().value!;
    // At least 1 ms: a timer that fires a little early re-arms instead of spinning.
    const ms = Math.max(1, oldest.used + this.limits.idleMs - this.#now());
    this.#timer = this.#schedule(() => {
      this.#timer = undefined;
      this.#expire(this.#now());
      this.#arm();
    }, ms);
  }

  counters(): ListCacheCounters {
    return { listCacheHits: this.#hits, listCacheMisses: this.#misses, listCacheEvicted: this.#evicted, listCacheDirs: this.#byDir.size, listCacheBytes: this.#bytes };
  }

  /**
   * The sorted names of the directory `st` describes (stat taken before this call) for a page
   * starting at `cookie`: the kept listing while current, else `read()`'s (kept for the pages
   * after). Undefined when `read` gives undefined (too many names); rejects as `read` does.
   */
  async load(st: DirStamp, cookie: number, read: () => Promise<string[] | undefined>): Promise<readonly string[] | undefined> {
    const now = this.#now();
    this.#expire(now);
    const dir = `${st.dev}:${st.ino}`;
    const s = this.#byDir.get(dir);
    if (s && (s.mtimeNs !== st.mtimeNs || s.ctimeNs !== st.ctimeNs)) this.#drop(dir, s, false);
    else if (s && (cookie > 0 || !s.racy)) {
      this.#hits++;
      s.used = now;
      this.#byDir.delete(dir);
      this.#byDir.set(dir, s);
      return s.names;
    }
    const key = `${dir}:${st.mtimeNs}:${st.ctimeNs}`;
    const pending = this.#reading.get(key);
    if (pending && (cookie > 0 || !pending.racy)) {
      this.#hits++;
      return pending.names;
    }
    this.#misses++;
    // Racy: read so soon after the directory's last change that a change in the same clock tick
    // may come after the read and leave the stamp as it is.
    const r = { racy: now - Number(st.ctimeNs / 1_000_000n) < this.limits.racyMs, names: read() };
    this.#reading.set(key, r);
    try {
      const names = await r.names;
      if (names) this.#put(dir, st, names, r.racy, this.#now());
      return names;
    } finally {
      if (this.#reading.get(key) === r) this.#reading.delete(key);
    }
  }

  #put(dir: string, st: DirStamp, names: readonly string[], racy: boolean, now: number): void {
    const old = this.#byDir.get(dir);
    if (old) this.#drop(dir, old, false);
    let bytes = 0;
    for (const n of names) bytes += nameBytes(n);
    if (bytes > this.limits.maxBytes || this.limits.maxDirs < 1) return;
    while (this.#byDir.size > 0 && (this.#byDir.size >= this.limits.maxDirs || this.#bytes + bytes > this.limits.maxBytes)) {
      const [k, v] = this.#byDir.entries().next().value!;
      this.#drop(k, v, true);
    }
    this.#byDir.set(dir, { names, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs, bytes, racy, used: now });
    this.#bytes += bytes;
    this.#arm();
  }

  #expire(now: number): void {
    // Least recently used first: stop at the first one still in use.
    for (const [k, v] of this.#byDir) {
      if (now - v.used < this.limits.idleMs) return;
      this.#drop(k, v, true);
    }
    // Nothing left: the timer has nothing to wait for.
    this.#timer?.clear();
    this.#timer = undefined;
  }

  #drop(key: string, s: Snapshot, counted: boolean): void {
    this.#byDir.delete(key);
    this.#bytes -= s.bytes;
    if (counted) this.#evicted++;
  }
}

/**
 * The names in directory `path`, sorted (UTF-16 code unit order, as Array.prototype.sort), those
 * matching `hidden` left out; undefined when there are more than `max` (the read stops there,
 * never holding more than `max` names).
 */
export async function readSortedNames(path: string, hidden: RegExp, max: number): Promise<string[] | undefined> {
  const names: string[] = [];
  // Closed by the loop on its end, a return or a throw.
  for await (const e of await fsp.opendir(path, { bufferSize: 128 })) {
    if (hidden.test(e.name)) continue;
    if (names.length >= max) return undefined;
    names.push(e.name);
  }
  return names.sort();
}
