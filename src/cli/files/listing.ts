// How `sabre ls` prints an entry. Names are any UTF-8 but NUL and '/', and the server (or
// whoever writes into the served directory) chooses them: printed raw, a name holding escape
// sequences would drive the reader's terminal (set its title, clear it, write its clipboard)
// and one holding a newline would forge lines among the real entries. So what is not printable
// is written as an escape (\n, \t, \xNN, \u{NNNN}), and a backslash as \\ so the escapes are
// unambiguous. JSON output (--json) is left as it is: JSON.stringify escapes it already.
import type { DirEntry } from '../../files/dirents.js';

/** Control (Cc), format (Cf: bidirectional overrides, zero-width) and line/paragraph separators, and '\'. */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\\]/gu;
const SHORT: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** `s` with every character that could act on a terminal written as an escape. */
export function printable(s: string): string {
  return s.replace(UNPRINTABLE, (c) => {
    const short = SHORT[c];
    if (short) return short;
    const cp = c.codePointAt(0)!;
    return cp < 0x100 ? `\\x${cp.toString(16).padStart(2, '0')}` : `\\u{${cp.toString(16)}}`;
  });
}

/** The time column: ISO 8601, or '?' padded to its width for a time a Date cannot hold (past ±8.64e15 ms). */
function when(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? '?'.padEnd(24) : d.toISOString();
}

/** One line of `sabre ls`: type, mode, size, mtime, name (a directory's with '/'). */
export function lsLine(e: DirEntry): string {
  const t = e.type === 'directory' ? 'd' : e.type === 'symlink' ? 'l' : e.type === 'file' ? '-' : '?';
  return `${t} ${e.mode.toString(8).padStart(4, '0')} ${String(e.size).padStart(14)} ${when(e.mtimeMs)} ${printable(e.name)}${e.type === 'directory' ? '/' : ''}`;
}
