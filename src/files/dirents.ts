// One page of a List answer: fileDirEntry records, each followed by its name padded to 8 bytes.
// The server fills at most the client's sink length; the client decodes with every length
// checked against the bytes the completion says were written.
import { FILE_DIR_ENTRY } from '../wire/files-spec.js';
import { readFields, writeFields } from './layout.js';

export interface DirEntry {
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  mode: number;
  size: number;
  mtimeMs: number;
}

const TYPES = ['other', 'file', 'directory', 'symlink'] as const;
const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true });
const pad8 = (n: number): number => (n + 7) & ~7;

/** Bound on the entries of one listed directory (the server refuses more; the client accepts no more). */
export const MAX_LIST_ENTRIES = 100_000;

/** Bytes one entry takes. */
export const direntSize = (nameBytes: number): number => FILE_DIR_ENTRY.size + pad8(nameBytes);

/** Writes entries from `from` while they fit in `out`; returns [bytes, entries written]. */
export function encodeDirEntries(out: Uint8Array, entries: readonly DirEntry[], from: number): [number, number] {
  let at = 0;
  let i = from;
  for (; i < entries.length; i++) {
    const e = entries[i]!;
    const name = enc.encode(e.name);
    const n = direntSize(name.length);
    if (at + n > out.length || name.length > 0xffff) break;
    writeFields(FILE_DIR_ENTRY, out, at, {
      type: TYPES.indexOf(e.type), nameLen: name.length, mode: e.mode & 0xffff_ffff, size: Math.max(0, Math.min(e.size, Number.MAX_SAFE_INTEGER)),
      mtimeMs: Math.max(0, Math.min(Math.floor(e.mtimeMs), Number.MAX_SAFE_INTEGER)),
    });
    out.set(name, at + FILE_DIR_ENTRY.size);
    out.fill(0, at + FILE_DIR_ENTRY.size + name.length, at + n);
    at += n;
  }
  return [at, i - from];
}

export function decodeDirEntries(b: Uint8Array): DirEntry[] | string {
  const out: DirEntry[] = [];
  let at = 0;
  while (at < b.length) {
    if (b.length - at < FILE_DIR_ENTRY.size) return `a directory entry is cut at byte ${at}`;
    const f = readFields(FILE_DIR_ENTRY, b, at);
    const n = direntSize(f.nameLen);
    if (at + n > b.length) return `a directory entry name runs past the page at byte ${at}`;
    let name: string;
    try {
      name = dec.decode(b.subarray(at + FILE_DIR_ENTRY.size, at + FILE_DIR_ENTRY.size + f.nameLen));
    } catch {
      return 'a directory entry name is not UTF-8';
    }
    if (f.size < 0 || f.mtimeMs < 0) return 'a directory entry size or time is not a safe integer';
    out.push({ name, type: TYPES[f.type] ?? 'other', mode: f.mode, size: f.size, mtimeMs: f.mtimeMs });
    at += n;
  }
  return out;
}
