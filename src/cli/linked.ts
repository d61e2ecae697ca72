// Which form of the `sabre` command the bin (./main.ts) loads: the one-file bundle that
// scripts/bundle-cli.mjs links from ./run.js and the few hundred modules it reaches, or that
// module graph itself. Loading the modules one by one was most of a command's start (~0.25 s
// of CPU on two cores before it did anything: docs/benchmarks.md, "CLI start"), and the tests
// alone start the command hundreds of times.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mtimeOf, pickLinked } from '../core/linked.js';

/** scripts/bundle-cli.mjs writes it next to run.js. */
export const CLI_BUNDLE = 'sabre.bundle.cjs';
/** The module graph's entry: what the bundle is linked from. */
export const CLI_ENTRY = 'run.js';

/**
 * The script the bin loads from `dir` (dist/cli/): the bundle when it is at least as new as
 * run.js (a bare `tsc` after an edit rewrites run.js, and the graph runs rather than stale
 * code; core/linked.ts), else run.js. SABRE_CLI_BUNDLE=0 asks for the module graph (not public
 * API: stack traces then name dist/ files, whose source maps lead to src/).
 */
export function cliScript(dir = fileURLToPath(new URL('./', import.meta.url)), mtime: (path: string) => number | undefined = mtimeOf, bundle = process.env['SABRE_CLI_BUNDLE'] !== '0'): string {
  return pickLinked(join(dir, CLI_ENTRY), join(dir, CLI_BUNDLE), mtime, bundle);
}
