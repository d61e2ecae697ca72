// The `sabre` command as one file: dist/cli/sabre.bundle.cjs, built from the tsc output
// (dist/cli/run.js and the few hundred modules it reaches). Loading those modules one by one
// was most of a command's start (docs/benchmarks.md, "CLI start"); the bin, dist/cli/main.js,
// loads the bundle when it is at least as new as run.js (src/cli/linked.ts), so a bare `tsc`
// after an edit runs the module graph rather than stale code. ./link.mjs does the linking.
import { join, resolve } from 'node:path';
import { link } from './link.mjs';

const root = resolve(import.meta.dirname, '..');
await link(join(root, 'dist/cli/run.js'), join(root, 'dist/cli/sabre.bundle.cjs'));
