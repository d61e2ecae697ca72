// Which of two forms of the same compiled code to load: a one-file bundle linked ahead of time
// (scripts/link.mjs: the NIC thread's script, the `sabre` command) or the module graph it was
// linked from. Loading a few hundred small ES modules one by one is most of a start on a small
// machine (resolving, reading and compiling each); one file starts in a fraction of it.
import { statSync } from 'node:fs';

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
