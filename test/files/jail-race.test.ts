// The jail resolves paths one component at a time without following links (./src/files/jail.ts,
// ./src/files/openat.ts), so a directory swapped for a symbolic link while a file is being
// created cannot send the file outside the served directory. The race is real: a child process
// swaps a subdirectory of the share for a link to a directory outside it, over and over, while
// the jail creates files under that subdirectory. Then the resolver itself, link by link, and the
// ordinary opens, creates, renames and listings it must still allow.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Jail, type JailFile, type Opened } from '../../src/files/jail.js';
import { decodeDirEntries } from '../../src/files/dirents.js';
import { FileAccess as A, FileStatus } from '../../src/wire/files-spec.js';
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
    while (running) {
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
    // With the swapper gone, each kind of create works (so the loop above could have succeeded).
    for (const access of kinds) {
      const name = `after-${access}`;
      expect(await file(await jail.open(['sub', name], access, 0o644, false)).close(true)).toBe(FileStatus.Success);
      made.push(name);
    }
    const escaped = tree(out);
    // Say how much the race was exercised, whichever way it goes.
    console.log(`jail race: ${swaps} swaps, ${i} creates, ${made.length} made, refused ${JSON.stringify(Object.fromEntries(refused))}, ${escaped.length} outside`);
    expect(Number(swaps)).toBeGreaterThan(0);
    expect(escaped).toEqual([]);
    // Every create reported as made is inside the share, under the name asked for.
    const inside = new Set(fs.readdirSync(join(share, 'sub')));
    expect(made.filter((n) => !inside.has(n))).toEqual([]);
  }, 30_000);
});

describe.skipIf(!PROC)('the resolver: links on the way are walked inside the root, never out', () => {
  let root: string;
  let share: string;
  let out: string;
  let jail: Jail;

  beforeAll(async () => {
    root = fs.realpathSync(tempDir('jail-resolve'));
    share = join(root, 'share');
    out = join(root, 'out');
    fs.mkdirSync(join(share, 'a', 'b'), { recursive: true });
    fs.mkdirSync(join(share, 'other'));
    fs.mkdirSync(out);
    fs.writeFileSync(join(share, 'a', 'b', 'deep.txt'), 'deep');
    fs.writeFileSync(join(share, 'other', 'o.txt'), 'other');
    fs.writeFileSync(join(out, 'secret.txt'), 'secret');
    fs.writeFileSync(join(share, 'plain.txt'), 'plain');
    fs.symlinkSync('a/b', join(share, 'rel')); // relative, inside
    fs.symlinkSync(join(share, 'a'), join(share, 'abs')); // absolute, inside
    fs.symlinkSync('../other', join(share, 'a', 'sib')); // ".." that stays inside
    fs.symlinkSync('../..', join(share, 'a', 'up2')); // ".." above the root
    fs.symlinkSync(out, join(share, 'out-abs')); // absolute, outside
    fs.symlinkSync('../out', join(share, 'out-rel')); // relative, outside
    fs.symlinkSync('rel', join(share, 'chain')); // a link to a link
    fs.symlinkSync('loop2', join(share, 'loop1'));
    fs.symlinkSync('loop1', join(share, 'loop2'));
    fs.symlinkSync('a/b/deep.txt', join(share, 'leaf-in'));
    fs.symlinkSync(join(out, 'secret.txt'), join(share, 'leaf-out'));
    fs.symlinkSync('a/missing.txt', join(share, 'dangling-in'));
    fs.symlinkSync('.sabre-0123456789abcdef.part', join(share, 'to-temp'));
    fs.writeFileSync(join(share, '.sabre-0123456789abcdef.part'), 'temp');
    fs.symlinkSync('plain.txt', join(share, 'to-file'));
    spawnSync('mkfifo', [join(share, 'fifo')]); // where mkfifo is missing, the FIFO case is left out
    jail = await Jail.open(share);
  });
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  async function read(parts: string[]): Promise<string> {
    const f = file(await jail.open(parts, A.Read, 0, false));
    const b = new Uint8Array(100);
    const n = await f.read(b, 100, 0);
    await f.close(false);
    return Buffer.from(b.subarray(0, n)).toString();
  }

  it('links inside are followed: relative, absolute, through "..", chained, at the leaf', async () => {
    expect(await read(['rel', 'deep.txt'])).toBe('deep');
    expect(await read(['abs', 'b', 'deep.txt'])).toBe('deep');
    expect(await read(['a', 'sib', 'o.txt'])).toBe('other');
    expect(await read(['chain', 'deep.txt'])).toBe('deep');
    expect(await read(['leaf-in'])).toBe('deep');
    expect(await jail.dir(['rel'])).toBe(join(share, 'a', 'b'));
    expect(await jail.dir(['a', 'sib'])).toBe(join(share, 'other'));
  });

  it('a create through a directory link inside lands in the real directory', async () => {
    const f = file(await jail.open(['rel', 'made.txt'], WRITE_CREATE, 0o640, false));
    await f.write(Buffer.from('made'), 0);
    expect(await f.close(true)).toBe(FileStatus.Success);
    expect(fs.readFileSync(join(share, 'a', 'b', 'made.txt'), 'utf8')).toBe('made');
    expect(fs.statSync(join(share, 'a', 'b', 'made.txt')).mode & 0o777).toBe(0o640);
  });

  it('links out, above the root, in a loop or dangling are PathOutside and create nothing', async () => {
    const cases: [string[], number][] = [
      [['out-abs', 'secret.txt'], A.Read],
      [['out-rel', 'secret.txt'], A.Read],
      [['out-abs', 'new.txt'], WRITE_CREATE],
      [['out-rel', 'new.txt'], WRITE_CREATE | A.Exclusive],
      [['out-abs', 'new.txt'], REPLACE],
      [['a', 'up2', 'out', 'new.txt'], WRITE_CREATE],
      [['a', 'up2', 'out', 'secret.txt'], A.Read],
      [['loop1', 'x'], WRITE_CREATE],
      [['leaf-out'], A.Read],
      [['leaf-out'], A.Write],
      [['dangling-in'], WRITE_CREATE],
    ];
    for (const [parts, access] of cases) {
      const o = await jail.open(parts, access, 0o644, false);
      expect(o.status, parts.join('/')).toBe(FileStatus.PathOutside);
    }
    expect(fs.readdirSync(out)).toEqual(['secret.txt']);
    expect(fs.readFileSync(join(out, 'secret.txt'), 'utf8')).toBe('secret');
    expect(fs.existsSync(join(share, 'a', 'missing.txt'))).toBe(false);
    for (const parts of [['out-abs'], ['out-rel'], ['a', 'up2'], ['loop1']]) {
      expect((await jail.list(parts, 0, new Uint8Array(4096))).status, parts.join('/')).toBe(FileStatus.PathOutside);
      expect(await jail.dir(parts)).toMatchObject({ status: FileStatus.PathOutside });
    }
  });

  it('the old refusals keep their statuses: missing, a file as a directory, a directory, a FIFO, a temporary', async () => {
    expect((await jail.open(['nope', 'x'], A.Read, 0, false)).status).toBe(FileStatus.NotFound);
    expect((await jail.open(['nope', 'x'], WRITE_CREATE, 0, false)).status).toBe(FileStatus.NotFound);
    expect((await jail.open(['plain.txt', 'x'], WRITE_CREATE, 0, false)).status).toBe(FileStatus.NotDirectory);
    expect((await jail.open(['to-file', 'x'], A.Read, 0, false)).status).toBe(FileStatus.NotDirectory);
    expect((await jail.open(['a'], A.Read, 0, false)).status).toBe(FileStatus.IsDirectory);
    expect((await jail.open(['a'], REPLACE, 0, false)).status).toBe(FileStatus.IsDirectory);
    expect((await jail.open(['plain.txt'], WRITE_CREATE | A.Exclusive, 0, false)).status).toBe(FileStatus.Exists);
    expect((await jail.open(['plain.txt'], REPLACE | A.Exclusive, 0, false)).status).toBe(FileStatus.Exists);
    if (fs.existsSync(join(share, 'fifo'))) {
      expect((await jail.open(['fifo'], A.Read, 0, false)).status).toBe(FileStatus.InvalidParameter);
    }
    expect((await jail.open(['to-temp'], A.Read, 0, false)).status).toBe(FileStatus.NotFound);
    expect((await jail.open(['.sabre-0123456789abcdef.part'], A.Read, 0, false)).status).toBe(FileStatus.NotFound);
  });

  it('Replace: the temporary is renamed over the name on commit, unlinked without; a link at the name is replaced, not followed', async () => {
    let f = file(await jail.open(['abs', 'b', 'put.txt'], REPLACE, 0o600, true));
    expect(f.replacing).toBe(true);
    await f.write(Buffer.from('one'), 0);
    expect(fs.existsSync(join(share, 'a', 'b', 'put.txt'))).toBe(false);
    expect(await f.close(true)).toBe(FileStatus.Success);
    expect(fs.readFileSync(join(share, 'a', 'b', 'put.txt'), 'utf8')).toBe('one');
    f = file(await jail.open(['a', 'b', 'put.txt'], REPLACE, 0, false));
    await f.write(Buffer.from('two'), 0);
    expect(await f.close(false)).toBe(FileStatus.Success);
    expect(fs.readFileSync(join(share, 'a', 'b', 'put.txt'), 'utf8')).toBe('one');
    expect(fs.readdirSync(join(share, 'a', 'b')).filter((n) => n.endsWith('.part'))).toEqual([]);
    f = file(await jail.open(['leaf-out'], REPLACE, 0, false));
    await f.write(Buffer.from('mine'), 0);
    expect(await f.close(true)).toBe(FileStatus.Success);
    expect(fs.lstatSync(join(share, 'leaf-out')).isFile()).toBe(true);
    expect(fs.readFileSync(join(out, 'secret.txt'), 'utf8')).toBe('secret');
  });

  it('in place: read, write, truncate after the checks', async () => {
    fs.writeFileSync(join(share, 'a', 'rw.txt'), 'abcdef');
    const f = file(await jail.open(['a', 'rw.txt'], A.Read | A.Write | A.Truncate, 0, false));
    expect(f.size).toBe(0);
    await f.write(Buffer.from('xy'), 0);
    await f.close(true);
    expect(fs.readFileSync(join(share, 'a', 'rw.txt'), 'utf8')).toBe('xy');
  });

  it('List works through a link inside and hides temporaries', async () => {
    const buf = new Uint8Array(4096);
    const r = await jail.list(['abs'], 0, buf);
    expect(r.status).toBe(FileStatus.Success);
    const names = (decodeDirEntries(buf.subarray(0, r.bytes)) as { name: string; type: string }[]).map((e) => `${e.name}:${e.type}`);
    expect(names).toEqual(['b:directory', 'rw.txt:file', 'sib:symlink', 'up2:symlink']);
    const top = await jail.list([], 0, buf);
    const topNames = (decodeDirEntries(buf.subarray(0, top.bytes)) as { name: string }[]).map((e) => e.name);
    expect(topNames).not.toContain('.sabre-0123456789abcdef.part');
    expect(topNames).toContain('out-abs');
  });

  it('a served directory replaced after start is refused', async () => {
    const d = join(root, 'moving');
    fs.mkdirSync(d);
    const j = await Jail.open(d);
    fs.renameSync(d, join(root, 'moved'));
    fs.symlinkSync(out, d);
    expect((await j.open(['secret.txt'], A.Read, 0, false)).status).toBe(FileStatus.PathOutside);
    fs.unlinkSync(d);
    fs.mkdirSync(d);
    expect((await j.open(['x.txt'], WRITE_CREATE, 0, false)).status).toBe(FileStatus.PathOutside);
    expect(fs.readdirSync(d)).toEqual([]);
  });

  it('without /proc/self/fd the jail does not open (nothing is served)', async () => {
    const real = fs.promises.stat;
    const spy = vi.spyOn(fs.promises, 'stat').mockImplementation(((p: fs.PathLike, o?: fs.StatOptions) =>
      String(p).startsWith('/proc/') ? Promise.reject(Object.assign(new Error('ENOENT'), { code: 'ENOENT' })) : real(p, o)) as typeof fs.promises.stat);
    try {
      await expect(Jail.open(share)).rejects.toThrow(/\/proc\/self\/fd .*is \/proc mounted/);
    } finally {
      spy.mockRestore();
    }
  });
});
