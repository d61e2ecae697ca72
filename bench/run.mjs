#!/usr/bin/env node
// `npm run bench [name …]`: runs each bench/<name>.bench.mjs in its own process, one after the
// other (so they do not compete for the two cores), and prints their tables. Each script
// measures its baseline in the same run and prints the ratio; docs/benchmarks.md records them.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
if (!existsSync(join(here, '..', 'dist', 'index.js')) && !existsSync(join(here, '..', 'dist', 'kernels'))) {
  console.error('bench: dist/ is missing — run `npm install` (or `npm run build`) first');
  process.exit(2);
}
const all = readdirSync(here)
  .filter((f) => f.endsWith('.bench.mjs'))
  .map((f) => f.slice(0, -'.bench.mjs'.length))
  .sort();
const wanted = process.argv.slice(2);
const unknown = wanted.filter((w) => !all.includes(w));
if (unknown.length > 0) {
  console.error(`bench: no such benchmark: ${unknown.join(', ')} (have: ${all.join(', ')})`);
  process.exit(2);
}
let failed = 0;
for (const name of wanted.length > 0 ? wanted : all) {
  console.log(`\n=== ${name} ===`);
  const r = spawnSync(process.execPath, [join(here, `${name}.bench.mjs`)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed > 0 ? 1 : 0);
