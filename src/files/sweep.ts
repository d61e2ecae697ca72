// The sweep of stale put temporaries at serve start. A put writes `.sabre-<16 hex>.part` beside
// its name (./jail.ts) and renames or unlinks it at its end; a server killed in between leaves it
// for good — hidden from List and never opened by name, so nothing else ever removes it.
//
// Which ones. Only names of exactly that pattern, only regular files (lstat: a link of that name
// is left, and so is what it points to), only older than `olderThanMs` by mtime. Not simply all:
// this server has no transfer live yet, but another server process may serve the same directory
// (two interfaces, a restart that overlaps the old process), and its live put's temporary must not
// go — its Close would then fail. A live put writes its temporary as it goes, so its mtime is
// recent; the default age (an hour, ServeOptions.partSweepAgeMs) leaves any put that wrote within
// it, and 0 sweeps all where the operator knows no other server serves the directory.
//
// How. The tree is walked from the root by descriptors, as the jail does (./openat.ts): each
// directory is opened with O_DIRECTORY|O_NOFOLLOW relative to its parent's descriptor and read and
// unlinked in through /proc/self/fd/N, so no link is followed and a directory swapped for a link
// mid-walk leads nowhere. Between the lstat and the unlink the name may be swapped: unlink never
// follows a link and fails on a directory, so at worst a link named as our temporary goes.
//
// Bounded: at most maxEntries directory entries looked at, maxDepth directories deep (two
// descriptors held a level), maxMs of wall time; past any of them the sweep stops where it is
// (counted in partSweepIncomplete) and the server starts — the rest waits for the next start.
import { constants as C, promises as fsp } from 'node:fs';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { at, closeSoon } from './openat.js';

const open = promisify(fs.open);
const DIR = C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW | C.O_NONBLOCK;

export interface SweepLimits {
  /** Only temporaries whose mtime is at least this old (ms; 0: all). */
  olderThanMs: number;
  /** Directory entries looked at, all directories. */
  maxEntries: number;
  /** Directories below the root walked into. */
  maxDepth: number;
  /** Wall time the sweep may take (ms). */
  maxMs: number;
}

export const DEFAULT_SWEEP: SweepLimits = { olderThanMs: 3_600_000, maxEntries: 100_000, maxDepth: 32, maxMs: 2000 };

export interface PartSweepCounters {
  /** Stale put temporaries removed at start. */
  partsSwept: number;
  /** Temporaries of our pattern left because younger than partSweepAgeMs. */
  partsKept: number;
  /** 1 when the sweep stopped at a bound (entries, depth, time) with the tree not all seen. */
  partSweepIncomplete: number;
}

export const noSweep = (): PartSweepCounters => ({ partsSwept: 0, partsKept: 0, partSweepIncomplete: 0 });

/**
 * Remove the regular files named by `pattern` under the directory `rootFd` holds (consumed:
 * closed before this returns) that are older than `olderThanMs`. `now`: the wall clock (mtimes
 * are wall-clock times).
 */
export async function sweepTemps(rootFd: number, pattern: RegExp, limits: Partial<SweepLimits> = {}, now: () => number = Date.now): Promise<PartSweepCounters> {
  const L = { ...DEFAULT_SWEEP, ...limits };
  const c = noSweep();
  const start = now();
  let entries = 0;
  const over = (): boolean => entries >= L.maxEntries || now() - start > L.maxMs;

  const visit = async (fd: number, depth: number): Promise<void> => {
    const d = await fsp.opendir(at(fd), { bufferSize: 128 });
    // Closed by the loop on its end, a return or a throw.
    for await (const e of d) {
      if (over()) {
        c.partSweepIncomplete = 1;
        return;
      }
      entries++;
      // A file system that gives no types (DT_UNKNOWN) makes every is*() false: ask lstat.
      const typeless = !e.isDirectory() && !e.isFile() && !e.isSymbolicLink() && !e.isFIFO() && !e.isSocket() && !e.isCharacterDevice() && !e.isBlockDevice();
      const isDir = e.isDirectory() || (typeless && (await fsp.lstat(at(fd, e.name)).catch(() => undefined))?.isDirectory() === true);
      if (isDir) {
        if (depth >= L.maxDepth) {
          c.partSweepIncomplete = 1;
          continue;
        }
        // O_NOFOLLOW: a link swapped in since the read is refused (ELOOP/ENOTDIR): skipped.
        const sub = await open(at(fd, e.name), DIR).catch(() => undefined);
        if (sub === undefined) continue;
        try {
          await visit(sub, depth + 1);
        } catch {
          // A directory that cannot be read (permissions, removed meanwhile): its files stay.
        } finally {
          closeSoon(sub);
        }
        if (c.partSweepIncomplete && over()) return;
      } else if (pattern.test(e.name)) {
        const st = await fsp.lstat(at(fd, e.name)).catch(() => undefined);
        if (!st?.isFile()) continue;
        if (now() - st.mtimeMs < L.olderThanMs) {
          c.partsKept++;
          continue;
        }
        await fsp.unlink(at(fd, e.name)).then(
          () => c.partsSwept++,
          () => {},
        );
      }
    }
  };

  try {
    await visit(rootFd, 0);
  } catch {
    // The root could not be read: nothing swept; the server serves anyway.
    c.partSweepIncomplete = 1;
  } finally {
    closeSoon(rootFd);
  }
  return c;
}
