// A put writes `.sabre-<16 hex>.part` beside its name and renames it into place at its Close; a
// server killed before then left the temporary for good (hidden from List, never opened by name,
// never removed: disk filled by each crash). Now serveFiles sweeps, before it serves, the
// temporaries of that exact name pattern under the root that are regular files and older than
// partSweepAgeMs (default an hour; 0: all) — never following a link, never anything else, and
// bounded in entries, depth and time (src/files/sweep.ts). Counted in stats (partsSwept,
// partsKept, partSweepIncomplete). Real files, a real killed server.
import fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { TEMP } from '../../src/files/jail.js';
import { sweepTemps } from '../../src/files/sweep.js';
import { killAndWait, spawnServer, tempDirsRemovedAfter } from './helpers.js';

const TOKEN = 'part-sweep-token-0123456789abcdef';
const HOUR = 3_600_000;
const dir = tempDirsRemovedAfter();

const part = (i: number): string => `.sabre-${i.toString(16).padStart(16, '0')}.part`;

/** Write `p` and date its mtime `agoMs` back. */
function file(p: string, agoMs: number, body = 'x'): string {
  fs.mkdirSync(join(p, '..'), { recursive: true });
  fs.writeFileSync(p, body);
  const t = new Date(Date.now() - agoMs);
  fs.utimesSync(p, t, t);
  return p;
}

const exists = (p: string): boolean => {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
};

describe('serveFiles sweeps stale part files at start', () => {
  it('only old regular files of our pattern, at any depth; young ones, other names, directories, links and what links lead to are kept', async () => {
    const root = dir('sweep-root');
    const outside = dir('sweep-outside');
    const oldTop = file(join(root, part(1)), 2 * HOUR);
    const oldDeep = file(join(root, 'a', 'b', 'c', part(2)), 2 * HOUR);
    const young = file(join(root, 'a', part(3)), 60_000);
    const others = [
      file(join(root, '.sabre-xyz.part'), 2 * HOUR),
      file(join(root, `x${part(4)}`), 2 * HOUR),
      file(join(root, `${part(5)}.bak`), 2 * HOUR),
      file(join(root, 'keep.txt'), 2 * HOUR),
    ];
    // A directory with our name (and an old part file inside it: swept, the directory kept).
    fs.mkdirSync(join(root, part(6)));
    const inDirNamedPart = file(join(root, part(6), part(7)), 2 * HOUR);
    // An old part file outside, reached through a link to its directory and a link named as ours.
    const outsidePart = file(join(outside, part(8)), 2 * HOUR);
    fs.symlinkSync(outside, join(root, 'linked-dir'));
    fs.symlinkSync(outsidePart, join(root, part(9)));
    const t = new Date(Date.now() - 2 * HOUR);
    fs.lutimesSync(join(root, part(9)), t, t);

    const srv = await serveFiles(root, { token: TOKEN, transports: ['inproc'] });
    try {
      expect(exists(oldTop)).toBe(false);
      expect(exists(oldDeep)).toBe(false);
      expect(exists(inDirNamedPart)).toBe(false);
      expect(exists(young)).toBe(true);
      for (const p of others) expect(exists(p), p).toBe(true);
      expect(fs.statSync(join(root, part(6))).isDirectory()).toBe(true);
      expect(exists(outsidePart)).toBe(true);
      expect(fs.lstatSync(join(root, part(9))).isSymbolicLink()).toBe(true);
      expect(srv.stats()).toMatchObject({ partsSwept: 3, partsKept: 1, partSweepIncomplete: 0 });
    } finally {
      await srv.close();
    }
    // partSweepAgeMs 0: every part file of ours goes, the young one too.
    const again = await serveFiles(root, { token: TOKEN, transports: ['inproc'], partSweepAgeMs: 0 });
    try {
      expect(exists(young)).toBe(false);
      expect(again.stats()).toMatchObject({ partsSwept: 1, partsKept: 0 });
      expect(exists(outsidePart)).toBe(true);
    } finally {
      await again.close();
    }
  });

  it('a server killed mid-put leaves its part file; the next server on the directory removes it (partSweepAgeMs 0); a live put of another server is younger than the default age and kept', async () => {
    const root = dir('sweep-killed');
    const child = await spawnServer(root, ['--token', TOKEN, '--transport', 'tcp']);
    let c: FileClient | undefined;
    try {
      c = await FileClient.connect(`127.0.0.1:${child.port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 10_000 });
      const f = await c.open('big.bin', { flags: 'replace' });
      await c.write(f, 0, new Uint8Array(100_000).fill(1));
      await killAndWait(child.child);
    } finally {
      await c?.end().catch(() => {});
      await killAndWait(child.child);
    }
    const left = fs.readdirSync(root).filter((n) => /^\.sabre-[0-9a-f]{16}\.part$/.test(n));
    expect(left).toHaveLength(1);
    expect(fs.statSync(join(root, left[0]!)).size).toBe(100_000);

    // Another server with the default age leaves it (it could be a live put of a server still
    // serving this directory) …
    const first = await serveFiles(root, { token: TOKEN, transports: ['inproc'] });
    expect(first.stats()).toMatchObject({ partsSwept: 0, partsKept: 1 });
    expect(exists(join(root, left[0]!))).toBe(true);
    await first.close();
    // … one told that none is (0: sweep all) removes it.
    const next = await serveFiles(root, { token: TOKEN, transports: ['inproc'], partSweepAgeMs: 0 });
    try {
      expect(next.stats()).toMatchObject({ partsSwept: 1 });
      expect(exists(join(root, left[0]!))).toBe(false);
      expect(fs.readdirSync(root)).toEqual([]);
    } finally {
      await next.close();
    }
  }, 60_000);
});

describe('sweepTemps is bounded (real files)', () => {
  const rootFd = (d: string): number => fs.openSync(d, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);

  it('stops after maxEntries entries, counted as incomplete; a later sweep takes the rest', async () => {
    const root = dir('sweep-entries');
    for (let i = 0; i < 20; i++) file(join(root, part(100 + i)), 2 * HOUR);
    const first = await sweepTemps(rootFd(root), TEMP, { maxEntries: 5 });
    expect(first).toEqual({ partsSwept: 5, partsKept: 0, partSweepIncomplete: 1 });
    expect(fs.readdirSync(root)).toHaveLength(15);
    const rest = await sweepTemps(rootFd(root), TEMP, {});
    expect(rest).toEqual({ partsSwept: 15, partsKept: 0, partSweepIncomplete: 0 });
  });

  it('walks at most maxDepth directories down; stops at maxMs (a clock that jumps)', async () => {
    const root = dir('sweep-depth');
    const shallow = file(join(root, 'a', part(1)), 2 * HOUR);
    const deep = file(join(root, 'a', 'b', 'c', part(2)), 2 * HOUR);
    expect(await sweepTemps(rootFd(root), TEMP, { maxDepth: 1 })).toEqual({ partsSwept: 1, partsKept: 0, partSweepIncomplete: 1 });
    expect(exists(shallow)).toBe(false);
    expect(exists(deep)).toBe(true);

    for (let i = 0; i < 5; i++) file(join(root, part(10 + i)), 2 * HOUR);
    let t = Date.now();
    // Each look at the clock is a second later: past maxMs (2.5 s) after the first few entries.
    const jumpy = (): number => (t += 1000);
    const r = await sweepTemps(rootFd(root), TEMP, { maxMs: 2500 }, jumpy);
    expect(r.partSweepIncomplete).toBe(1);
    expect(r.partsSwept).toBeLessThan(6);
  });
});
