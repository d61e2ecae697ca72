// The jail resolves paths one component at a time without following links (./src/files/jail.ts,
// ./src/files/openat.ts), so a directory swapped for a symbolic link while a file is being
// created cannot send the file outside the served directory. The race is real: a child process
// swaps a subdirectory of the share for a link to a directory outside it, over and over, while
// the jail creates files under that subdirectory. Then the resolver itself, link by link, and the
// ordinary opens, creates, renames and listings it must still allow.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Jail, type JailFile, type Opened } from '../../src/files/jail.js';
import { FileAccess as A, FileStatus } from '../../src/wire/spec.js';
import { tempDir } from './helpers.js';

// The defence and the race both need Linux's /proc/self/fd; elsewhere there is nothing to test.
const PROC = fs.existsSync('/proc/self/fd');
if (!PROC) console.warn('jail-race.test.ts skipped: /proc/self/fd is not available (the jail needs Linux with /proc mounted)');

const WRITE_CREATE = A.Write | A.Create;
const REPLACE = A.Write | A.Create | A.Replace;

function file(o: Opened): JailFile {
  if (o.status !== FileStatus.Success) throw new Error(`open refused: status ${o.status} (${(o as { why: string }).why})`);
  return (o as { file: JailFile }).file;
}

/** Every path under `dir` (recursively), relative to it. */
function tree(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).sort();
}

// Swaps SHARE/sub for a link to OUT and back, until `count` swaps or `ms` passed; prints the count.
// The real directory and the link wait inside the share between swaps, so the only way out of
// the share is through the link.
const SWAPPER = `
const fs = require('node:fs');
const [share, count, ms] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
const sub = share + '/sub', held = share + '/.held', link = share + '/.link';
const end = Date.now() + ms;
let i = 0;
for (; i < count && Date.now() < end; i++) {
  fs.renameSync(sub, held);
  fs.renameSync(link, sub);
  fs.renameSync(sub, link);
  fs.renameSync(held, sub);
}
process.stdout.write(String(i));
`;

describe.skipIf(!PROC)('a directory swapped for a link out during creates', () => {
  let root: string;

  beforeAll(() => {
    root = fs.realpathSync(tempDir('jail-race'));
  });
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it('no file ever appears outside the share', async () => {
    const share = join(root, 'share');
    const out = join(root, 'out');
    fs.mkdirSync(join(share, 'sub'), { recursive: true });
    fs.mkdirSync(out);
    fs.symlinkSync(out, join(share, '.link'));
    const jail = await Jail.open(share);

    const child = spawn(process.execPath, ['-e', SWAPPER, share, '200000', '3000'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let swaps = '';
    child.stdout.on('data', (d: Buffer) => (swaps += d.toString()));
    const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
    let running = true;
    void exited.then(() => (running = false));

    const made: string[] = [];
    const refused = new Map<number, number>();
    let i = 0;
    // Creates in place (O_CREAT), exclusive creates and Replace puts (temporary + rename), in turn.
    const kinds = [WRITE_CREATE, WRITE_CREATE | A.Exclusive, REPLACE];
    while (running || i < 50) {
      const name = `f${i}`;
      const o = await jail.open(['sub', name], kinds[i % 3]!, 0o644, false);
      i++;
      if (o.status !== FileStatus.Success) {
        refused.set(o.status, (refused.get(o.status) ?? 0) + 1);
        continue;
      }
      const st = await file(o).close(true);
      if (st === FileStatus.Success) made.push(name);
      else refused.set(st, (refused.get(st) ?? 0) + 1);
    }
    expect(await exited).toBe(0);
    const escaped = tree(out);
    // Say how much the race was exercised, whichever way it goes.
    console.log(`jail race: ${swaps} swaps, ${i} creates, ${made.length} made, refused ${JSON.stringify(Object.fromEntries(refused))}, ${escaped.length} outside`);
    expect(Number(swaps)).toBeGreaterThan(0);
    expect(escaped).toEqual([]);
    // Every create reported as made is inside the share, under the name asked for.
    const inside = new Set(fs.readdirSync(join(share, 'sub')));
    expect(made.filter((n) => !inside.has(n))).toEqual([]);
    expect(made.length).toBeGreaterThan(0);
  }, 30_000);
});
