// assembly/crc32c.ts is generated (its unrolled SIMD code and tables are too regular to keep
// by hand); a stale or hand-edited copy fails here.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';

it('assembly/crc32c.ts is what scripts/crc32c/gen.mjs generates', () => {
  const out = join(mkdtempSync(join(tmpdir(), 'sabre-crc-')), 'crc32c.ts');
  execFileSync(process.execPath, ['scripts/crc32c/gen.mjs', out]);
  expect(readFileSync(out, 'utf8')).toBe(readFileSync('assembly/crc32c.ts', 'utf8'));
});
