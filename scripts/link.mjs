// Links compiled JavaScript (tsc's output in dist/) into one file with rolldown: the NIC
// thread's script (./bundle-nic.mjs) and the `sabre` command (./bundle-cli.mjs). The bundle is
// the same code the tests ran, only linked ahead of time; loading one file instead of a few
// hundred small ES modules is most of what starting a NIC thread or the command costs. Each
// bundle is CommonJS, run by src/core/linked.ts's runLinked with the V8 code cache written
// beside it here (`<bundle>.cache`): compiling a megabyte of JavaScript was the largest part of
// what was left (CommonJS because a Script takes a code cache on Node 20 and a module does not
// without a flag).
//
// rolldown (the bundler vite, and so vitest, is built on) does the linking: a well-kept bundler,
// already in the tree through vitest, pinned as a devDependency.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';
import { linkedCache } from '../dist/core/linked.js';

/**
 * Each module keeps its own import.meta.url. Code that finds a file beside it (the NIC thread's
 * script, the data-plane workers, the stress worker, build/sabre.wasm, package.json) names it
 * relative to its own module, and in a bundle every module would otherwise share the bundle's
 * URL: dist/cli/stress/index.js would look for ./worker.js in dist/cli/. The module's URL is
 * rebuilt from the bundle's own at run time (the relative path between them is fixed by the
 * package's layout), so the bundle works wherever the package is installed.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

const BUNDLE_URL = '__sabreBundleUrl';
// The bundle's own URL, from its path (runLinked passes __filename, as Node's module wrapper
// does). A banner: the bundler renames the modules' own `require`s, never this line.
const BUNDLE_URL_BANNER = `const ${BUNDLE_URL} = require('node:url').pathToFileURL(__filename).href;`;

function ownImportMetaUrl(outDir) {
  return {
    name: 'sabre-own-import-meta-url',
    transform(code, id) {
      if (!code.includes('import.meta.url')) return null;
      const rel = relative(outDir, id).split(sep).join('/');
      return { code: code.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, ${BUNDLE_URL}).href`), map: null };
    },
  };
}

/**
 * Link `input` and the relative imports it reaches into `file` (CommonJS); node: builtins and
 * packages stay requires. Then V8's code cache for it, in `file`.cache.
 */
export async function link(input, file) {
  rmSync(file, { force: true });
  rmSync(`${file}.cache`, { force: true });
  await build({
    input,
    platform: 'node',
    logLevel: 'warn',
    // Relative imports are linked in; node: builtins and packages stay imports (the application
    // and the bundle share one copy of each package).
    external: (id) => !id.startsWith('.') && !id.startsWith('/') && !id.startsWith('\0'),
    plugins: [ownImportMetaUrl(dirname(file))],
    // A dynamic import (the CLI's metrics server, loaded only for --metrics-port) stays lazy
    // inside the one file: its module runs when it is imported, as in the module graph.
    output: { file, format: 'cjs', banner: BUNDLE_URL_BANNER, sourcemap: false, codeSplitting: false },
  });
  // Stack traces of a run from the cache name the bundle by its path in the package (V8 keeps the
  // name a cache was made under): `sabre/dist/cli/sabre.bundle.cjs`.
  writeFileSync(`${file}.cache`, linkedCache(file, `${PKG.name}/${relative(ROOT, file).split(sep).join('/')}`));
}
