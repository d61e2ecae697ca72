// A linked bundle runs with the V8 code cache written beside it only when that cache was made
// from this very source (src/core/linked.ts): V8 itself checks a cache against the source's
// length only, so an edited bundle of the same length would otherwise run a stale cache.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { linkedCache, runLinked } from '../../src/core/linked.js';
import { CLI_BUNDLE } from '../../src/cli/linked.js';
import { THREAD_BUNDLE } from '../../src/nic/thread-start.js';

const dir = mkdtempSync(join(tmpdir(), 'sabre-linked-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const g = globalThis as { __linkedProbe?: string };

/** A CommonJS bundle that records what it ran as. */
function bundle(name: string, word: string): string {
  const file = join(dir, name);
  writeFileSync(file, `const path = require('node:path');\nglobalThis.__linkedProbe = '${word}:' + path.basename(__filename) + ':' + (function () { return this === undefined; })();\n`);
  return file;
}

describe('runLinked', () => {
  it('runs a bundle with its cache, as a strict CommonJS module that has require and __filename', () => {
    const f = bundle('a.cjs', 'alpha');
    writeFileSync(`${f}.cache`, linkedCache(f));
    expect(runLinked(f)).toBe(true);
    expect(g.__linkedProbe).toBe('alpha:a.cjs:true');
  });

  it('compiles from the source when the cache was made from other bytes of the same length, or is missing or short', () => {
    const f = bundle('b.cjs', 'bravo');
    writeFileSync(`${f}.cache`, linkedCache(f));
    const stale = readFileSync(`${f}.cache`);
    bundle('b.cjs', 'brava'); // same length, other bytes
    expect(runLinked(f)).toBe(false);
    expect(g.__linkedProbe).toBe('brava:b.cjs:true');
    writeFileSync(`${f}.cache`, stale.subarray(0, 32));
    expect(runLinked(f)).toBe(false);
    rmSync(`${f}.cache`);
    expect(runLinked(f)).toBe(false);
    expect(g.__linkedProbe).toBe('brava:b.cjs:true');
  });

  it('the build wrote, for both bundles, a cache that a plain node process takes', () => {
    // A child: this test process may run with flags of its own, and V8 refuses a cache made under other flags.
    const check = `import vm from 'node:vm'; import { readFileSync } from 'node:fs';
      const { wrapLinked } = await import(${JSON.stringify(new URL('../../dist/core/linked.js', import.meta.url).href)});
      for (const f of process.argv.slice(1)) {
        const s = new vm.Script(wrapLinked(readFileSync(f, 'utf8')), { filename: f, cachedData: readFileSync(f + '.cache').subarray(32) });
        console.log(f, s.cachedDataRejected ? 'rejected' : 'taken');
      }`;
    const files = [join('dist', 'cli', CLI_BUNDLE), join('dist', 'nic', THREAD_BUNDLE)];
    for (const f of files) expect(readFileSync(`${f}.cache`).subarray(0, 32)).toEqual(linkedCache(f).subarray(0, 32));
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', check, ...files], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
    expect(out.trim().split('\n')).toEqual(files.map((f) => `${f} taken`));
  });
});
