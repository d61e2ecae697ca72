// Links compiled JavaScript (tsc's output in dist/) into one file with rolldown: the NIC
// thread's script (./bundle-nic.mjs) and the `sabre` command (./bundle-cli.mjs). The bundle is
// the same code the tests ran, only linked ahead of time; loading one file instead of a few
// hundred small ES modules is most of what starting a NIC thread or the command costs.
//
// rolldown (the bundler vite, and so vitest, is built on) does the linking: a well-kept bundler,
// already in the tree through vitest, pinned as a devDependency.
import { rmSync } from 'node:fs';
import { dirname, relative, sep } from 'node:path';
import { build } from 'rolldown';

/**
 * Each module keeps its own import.meta.url. Code that finds a file beside it (the NIC thread's
 * script, the data-plane workers, the stress worker, build/sabre.wasm, package.json) names it
 * relative to its own module, and in a bundle every module would otherwise share the bundle's
 * URL: dist/cli/stress/index.js would look for ./worker.js in dist/cli/. The module's URL is
 * rebuilt from the bundle's own at run time (the relative path between them is fixed by the
 * package's layout), so the bundle works wherever the package is installed.
 */
function ownImportMetaUrl(outDir) {
  return {
    name: 'sabre-own-import-meta-url',
    transform(code, id) {
      if (!code.includes('import.meta.url')) return null;
      const rel = relative(outDir, id).split(sep).join('/');
      return { code: code.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, import.meta.url).href`), map: null };
    },
  };
}

/** Link `input` and the relative imports it reaches into `file`; node: builtins and packages stay imports. */
export async function link(input, file) {
  rmSync(file, { force: true });
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
    output: { file, format: 'esm', sourcemap: false, codeSplitting: false },
  });
}
