// Which of two forms of the same compiled code to load: a one-file bundle linked ahead of time
// (scripts/link.mjs: the NIC thread's script, the `sabre` command) or the module graph it was
// linked from. Loading a few hundred small ES modules one by one is most of a start on a small
// machine (resolving, reading and compiling each); one file starts in a fraction of it, and
// with V8's code cache made when it was linked, without compiling it either.
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import vm from 'node:vm';

/**
 * The bundle when it exists and is at least as new as `entry`, the module it was linked from;
 * else `entry`. tsc rewrites every output on each build, so a bundle older than its entry was
 * linked from code an edit has since replaced: the module graph runs instead, never stale code.
 * (A packed package carries one mtime for every file.) `use` false asks for the module graph.
 */
export function pickLinked(entry: string, bundle: string, mtime: (path: string) => number | undefined = mtimeOf, use = true): string {
  if (!use) return entry;
  const b = mtime(bundle);
  const m = mtime(entry);
  return b !== undefined && (m === undefined || b >= m) ? bundle : entry;
}

/** A file's mtime in ms, undefined when it is not there. */
export function mtimeOf(path: string): number | undefined {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/**
 * The function a linked bundle (CommonJS, scripts/link.mjs) is compiled as: Node's own module
 * wrapper, in strict mode as the ES modules it was linked from were.
 */
export function wrapLinked(source: string): string {
  return `(function (exports, require, module, __filename, __dirname) {'use strict';${source}\n})`;
}

/** Bytes of the digest of the source that heads a code cache file. */
const DIGEST_BYTES = 32;

/**
 * V8's code cache for a linked bundle, to write beside it as `<bundle>.cache` (scripts/link.mjs,
 * at build time): the digest of the source it was made from, then V8's data. V8 checks a cache
 * against the source's length only, so the digest is what keeps a cache from running against an
 * edited bundle of the same length. `name`: what stack traces call the bundle when it runs from
 * this cache (V8 keeps the name the cache was made under, not the one it is run under), so a
 * name that holds wherever the package is installed: its path in the package.
 */
export function linkedCache(file: string, name = file): Buffer {
  const source = readFileSync(file, 'utf8');
  const data = new vm.Script(wrapLinked(source), { filename: name }).createCachedData();
  return Buffer.concat([digestOf(source), data]);
}

function digestOf(source: string): Buffer {
  return createHash('sha256').update(source).digest();
}

/**
 * Run a linked bundle as a CommonJS module at `file`. Compiling it is most of what its load
 * costs (a megabyte of JavaScript: ~70 ms of a command's ~250 ms of CPU before it does anything
 * on two cores), so the code cache made at build time is used when it was made from this very
 * source by this V8 with these flags; otherwise (another Node, another flag, no cache) V8 compiles
 * it as it would have, and nothing else changes. Returns whether the cache was taken.
 */
export function runLinked(file: string): boolean {
  const source = readFileSync(file, 'utf8');
  let cachedData: Buffer | undefined;
  try {
    const c = readFileSync(`${file}.cache`);
    if (c.length > DIGEST_BYTES && c.subarray(0, DIGEST_BYTES).equals(digestOf(source))) cachedData = c.subarray(DIGEST_BYTES);
  } catch {
    // No cache beside it: compiled from the source.
  }
  const script = new vm.Script(wrapLinked(source), { filename: file, ...(cachedData ? { cachedData } : {}) });
  const module = { exports: {} };
  (script.runInThisContext() as (...a: unknown[]) => void)(module.exports, createRequire(file), module, file, dirname(file));
  return cachedData !== undefined && !script.cachedDataRejected;
}
