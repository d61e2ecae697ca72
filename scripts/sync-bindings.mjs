// Adds `instantiateSync` to the raw bindings asc writes (build/sabre.js, build/sabre.d.ts).
// Why: asc's `instantiate` awaits WebAssembly.instantiate, so a module that needs kernels at
// load time would need top-level await — and an ESM graph with top-level await cannot be
// require()d (ERR_REQUIRE_ASYNC_MODULE). The sync twin is the same adapter over
// `new WebAssembly.Instance`. Idempotent; fails loudly if asc's output changes shape.
import { readFileSync, writeFileSync } from 'node:fs';

const js = 'build/sabre.js';
const dts = 'build/sabre.d.ts';
const head = 'export async function instantiate(module, imports = {}) {\n  const { exports } = await WebAssembly.instantiate(module, imports);\n';
const syncHead = 'export function instantiateSync(module, imports = {}) {\n  const { exports } = new WebAssembly.Instance(module, imports);\n';

let src = readFileSync(js, 'utf8');
if (!src.includes(syncHead)) {
  const at = src.indexOf(head);
  if (at < 0) throw new Error(`${js}: asc's instantiate() no longer starts as expected; update scripts/sync-bindings.mjs`);
  const body = src.slice(at + head.length);
  src = `${src.trimEnd()}\n${syncHead}${body}`;
  writeFileSync(js, src);
}
let d = readFileSync(dts, 'utf8');
const decl = 'export declare function instantiateSync(module: WebAssembly.Module, imports: {\n}): typeof __AdaptedExports;\n';
if (!d.includes('instantiateSync')) {
  if (!d.includes('export declare function instantiate(')) throw new Error(`${dts}: no instantiate declaration`);
  writeFileSync(dts, `${d.trimEnd()}\n${decl}`);
}
