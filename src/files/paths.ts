// Paths as the client sends them, checked by their text alone (no file system): relative to the
// served directory, "/"-separated, no NUL, no "..", not absolute. What the file system makes of
// the result (symbolic links, hard links, a directory swapped under us) is checked by
// ./jail.ts when it opens.
import { FileStatus } from '../wire/files-spec.js';

export const MAX_COMPONENT = 255;

export type PathCheck = { ok: true; parts: string[] } | { ok: false; status: number; why: string };

export function checkPath(p: string, opts: { allowRoot: boolean }): PathCheck {
  if (p.includes('\0')) return { ok: false, status: FileStatus.PathOutside, why: 'NUL in the path' };
  if (p.startsWith('/')) return { ok: false, status: FileStatus.PathOutside, why: 'absolute path' };
  const parts: string[] = [];
  for (const c of p.split('/')) {
    if (c === '' || c === '.') continue;
    if (c === '..') return { ok: false, status: FileStatus.PathOutside, why: '".." in the path' };
    if (Buffer.byteLength(c) > MAX_COMPONENT) return { ok: false, status: FileStatus.InvalidParameter, why: `a name longer than ${MAX_COMPONENT} bytes` };
    parts.push(c);
  }
  if (parts.length === 0 && !opts.allowRoot) return { ok: false, status: FileStatus.InvalidParameter, why: 'the path names no file' };
  return { ok: true, parts };
}
