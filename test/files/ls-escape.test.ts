// `sabre ls` of names and times a hostile client or server chose (src/cli/files/listing.ts).
// Names are any UTF-8 but NUL and '/': a token holder can create one holding a newline and
// terminal escape sequences. Printed raw, the next person to list the directory got the escapes
// on their terminal (title, clearing, OSC 52 clipboard writes) and forged lines among the real
// entries; now every unprintable character is escaped (JSON output is unchanged). An mtime past
// what a Date holds (8.64e15 ms) made toISOString() throw and the whole listing fail; it prints '?'.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { lsLine, printable } from '../../src/cli/files/listing.js';
import { MAIN, servedDir } from './helpers.js';

const TOKEN = 'ls-escape-token-0123456789';
const EVIL = 'a\x1b]0;pwned\x07\x1b[2J\n- 0644              4 2020-01-01T00:00:00.000Z passwords.txt';
const run = promisify(execFile);

describe('sabre ls: what it prints of a name and a time', () => {
  it('escapes control, format and separator characters and the backslash; leaves other text alone', () => {
    expect(printable('plain name.txt')).toBe('plain name.txt');
    expect(printable('héllo wörld 日本 🙂')).toBe('héllo wörld 日本 🙂');
    expect(printable('a\nb\tc\rd\\e')).toBe('a\\nb\\tc\\rd\\\\e');
    expect(printable('\x1b[2J\x07\x00\x7f\x9b')).toBe('\\x1b[2J\\x07\\x00\\x7f\\x9b');
    // Bidirectional override and zero-width space (they reorder or hide what is shown), line separator.
    expect(printable('x\u202Etxt.exe\u200B\u2028')).toBe('x\\u{202e}txt.exe\\u{200b}\\u{2028}');
    expect(printable(EVIL)).not.toMatch(/[\x00-\x1f\x7f]/);
  });

  it('an mtime a Date cannot hold prints ? in the time column, the line keeps its columns', () => {
    const ok = lsLine({ name: 'a', type: 'file', mode: 0o644, size: 1, mtimeMs: 0 });
    const far = lsLine({ name: 'a', type: 'file', mode: 0o644, size: 1, mtimeMs: 9e15 });
    expect(ok).toBe('- 0644              1 1970-01-01T00:00:00.000Z a');
    expect(far).toBe(`- 0644              1 ${'?'.padEnd(24)} a`);
    expect(far.length).toBe(ok.length);
  });
});

describe('sabre ls of a name a client made to attack the next reader', () => {
  const s = servedDir('ls-escape', { port: 0, token: TOKEN, transports: ['tcp'] }, { 'real.txt': 'real' });

  it('text output has one line per entry and no control character; --json gives the name exactly', async () => {
    const c = await FileClient.connect(`127.0.0.1:${s.srv.address.port}`, { token: TOKEN, transport: 'tcp' });
    try {
      await c.close(await c.open(EVIL, { flags: 'w' }));
    } finally {
      await c.end();
    }
    expect(fs.readdirSync(s.dir)).toContain(EVIL);
    const args = [MAIN, 'ls', `127.0.0.1:${s.srv.address.port}`, '--token', TOKEN, '--transport', 'tcp'];
    const { stdout } = await run(process.execPath, args, { timeout: 30_000 });
    const lines = stdout.split('\n').filter((l) => l.length > 0);
    expect(stdout, JSON.stringify(stdout)).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/);
    expect(lines.length, JSON.stringify(stdout)).toBe(2);
    expect(lines.some((l) => l.endsWith(printable(EVIL)))).toBe(true);
    const json = JSON.parse((await run(process.execPath, [...args, '--json'], { timeout: 30_000 })).stdout) as { entries: { name: string }[] };
    expect(json.entries.map((e) => e.name).sort()).toEqual([EVIL, 'real.txt'].sort());
  }, 60_000);
});

// A real file with such an mtime needs a file system that keeps it (tmpfs, xfs, btrfs; not ext4).
const shm = fs.existsSync('/dev/shm') && (() => {
  try {
    const p = fs.mkdtempSync('/dev/shm/sabre-probe-');
    try {
      fs.writeFileSync(join(p, 'f'), '');
      fs.utimesSync(join(p, 'f'), 9e12, 9e12);
      return fs.statSync(join(p, 'f')).mtimeMs > 8.64e15;
    } finally {
      fs.rmSync(p, { recursive: true, force: true });
    }
  } catch {
    return false;
  }
})();

describe.skipIf(!shm)('sabre ls of an entry whose mtime is past Date\'s range (served directory in /dev/shm)', () => {
  it('lists every entry instead of failing', async () => {
    const dir = fs.mkdtempSync('/dev/shm/sabre-files-ls-');
    const srv = await serveFiles(dir, { port: 0, token: TOKEN, transports: ['tcp'] });
    try {
      fs.writeFileSync(join(dir, 'real.txt'), 'real');
      fs.writeFileSync(join(dir, 'future.txt'), 'x');
      fs.utimesSync(join(dir, 'future.txt'), 9e12, 9e12);
      const r = await run(process.execPath, [MAIN, 'ls', `127.0.0.1:${srv.address.port}`, '--token', TOKEN, '--transport', 'tcp'], { timeout: 30_000 })
        .then((x) => ({ code: 0, stdout: x.stdout, stderr: x.stderr }), (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }));
      expect(r, JSON.stringify(r)).toMatchObject({ code: 0 });
      expect(r.stdout).toContain('real.txt');
      expect(r.stdout).toMatch(/ \? +future\.txt/);
    } finally {
      await srv.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
