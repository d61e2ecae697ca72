// `npm run docs` (typedoc over the public entry points) must be clean: every type the public API
// refers to is exported (or listed in typedoc.json as intentionally internal), so the reference
// documents it and a consumer can name it. Runs the docs script's own command with warnings
// as errors, emitting nothing (source links off: they need a git remote this clone may lack).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');

describe('npm run docs', () => {
  it('typedoc finds no referenced-but-unexported type and no other warning', () => {
    const script = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.docs!;
    const [cmd, ...args] = script.split(/\s+/);
    expect(cmd).toBe('typedoc');
    // The script's arguments minus its output directory.
    const out = args.indexOf('--out');
    if (out >= 0) args.splice(out, 2);
    let output = '';
    let code = 0;
    try {
      output = execFileSync(join(root, 'node_modules/.bin/typedoc'), [...args, '--emit', 'none', '--disableSources', '--treatWarningsAsErrors'], {
        cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000,
      });
    } catch (e) {
      const x = e as { status: number; stdout: string; stderr: string };
      code = x.status;
      output = `${x.stdout}${x.stderr}`;
    }
    expect(output).not.toMatch(/not included in the documentation/);
    expect(code, output).toBe(0);
  }, 150_000);
});
