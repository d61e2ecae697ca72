// CommonJS entry points for the ESM package: dist/cjs/ holds, for each public entry, a wrapper
// that require()s the ESM build (Node >= 20.19 loads an ESM graph without top-level await that
// way, so both module systems share one instance) and a copy of the declarations the entry
// reaches. The copies sit under a {"type": "commonjs"} package.json, so TypeScript reads them as
// CommonJS and a `module: node16` CommonJS project can require('sabre') without TS1479.
//
// Files are written only when their content changes: test/global-setup.ts compares the newest
// dist/*.js against src/ to decide whether to rebuild, and a rewrite here must not hide a stale
// build.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, posix, relative, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const dist = join(root, 'dist');
const out = join(dist, 'cjs');
const ENTRIES = ['index', 'kernels/index', 'metrics/index'];

function put(file, text) {
  if (existsSync(file) && readFileSync(file, 'utf8') === text) return;
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

// Every declaration file an entry reaches through relative imports, re-exports and import() types.
const reached = new Set();
const queue = ENTRIES.map((e) => `${e}.d.ts`);
while (queue.length > 0) {
  const rel = queue.pop();
  if (reached.has(rel)) continue;
  const file = join(dist, rel);
  if (!existsSync(file)) throw new Error(`cjs-types: ${rel} is missing; run tsc -p tsconfig.build.json first`);
  reached.add(rel);
  const text = readFileSync(file, 'utf8');
  for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g)) {
    queue.push(posix.normalize(posix.join(posix.dirname(rel), m[1].replace(/\.js$/, '.d.ts'))));
  }
}

const wanted = new Set(['package.json']);
put(join(out, 'package.json'), '{\n  "type": "commonjs"\n}\n');
// Declarations outside dist/ (build/sabre.d.ts, the generated WASM bindings) are ESM where they
// are, so they are copied too, under outside/, and the paths to them rewritten.
const copyPath = (rel) => (rel.startsWith('../') ? `outside/${rel.slice(3)}` : rel);
for (const rel of reached) {
  let text = readFileSync(join(dist, rel), 'utf8');
  text = text.replace(/((?:from\s+|import\s*\(\s*)['"])(\.{1,2}\/[^'"]+)(['"])/g, (all, head, spec, tail) => {
    const target = posix.normalize(posix.join(posix.dirname(rel), spec));
    if (!target.startsWith('..')) return all;
    let to = posix.relative(posix.dirname(copyPath(rel)), copyPath(target));
    if (!to.startsWith('.')) to = `./${to}`;
    return `${head}${to}${tail}`;
  });
  put(join(out, copyPath(rel)), text);
  wanted.add(copyPath(rel));
}
for (const e of ENTRIES) {
  const wrapper = `${e}.js`;
  const target = relative(dirname(join(out, wrapper)), join(dist, wrapper)).split('\\').join('/');
  put(join(out, wrapper), `'use strict';\n// CommonJS entry: the ESM build, loaded by require(esm) (see scripts/cjs-types.mjs).\nmodule.exports = require('${target}');\n`);
  wanted.add(wrapper);
}

// Files left from an earlier build whose source is gone.
function prune(dir) {
  for (const d of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, d.name);
    if (d.isDirectory()) {
      prune(p);
      if (readdirSync(p).length === 0) rmSync(p, { recursive: true });
    } else if (!wanted.has(relative(out, p).split('\\').join('/'))) rmSync(p);
  }
}
prune(out);
