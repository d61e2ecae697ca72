// The file server's open files, all RDMA connections and dedup transfers together
// (ServeOptions.maxOpenFilesTotal). Each connection has its own cap (limits.maxOpenFiles, 64) and the
// server caps connections (maxConnections, 64), but a Replace open holds two descriptors (its
// temporary and its held directory), so a token holder with a few connections could open files
// until the process hit RLIMIT_NOFILE, after which every other client's open — and the server's
// own accept of a socket — failed with EMFILE. Past this cap an open is refused with
// TooManyOpenFiles (counted) while the process still has descriptors for its sockets.
import fs from 'node:fs';
import { ErrorCode, SabreError } from '../core/errors.js';

/** Used when the process's limit cannot be read (no /proc): a quarter of the common soft limit of 1024. */
export const FALLBACK_MAX_OPEN_FILES = 256;
/** The smallest default, however low the process's limit: the server must be able to open a file. */
const MIN_MAX_OPEN_FILES = 16;

/** The soft RLIMIT_NOFILE of this process from /proc/self/limits (Infinity: unlimited; undefined: not readable). */
export function softFdLimit(limits?: string): number | undefined {
  let text = limits;
  if (text === undefined) {
    try {
      text = fs.readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return undefined;
    }
  }
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  if (!m) return undefined;
  return m[1] === 'unlimited' ? Infinity : Number(m[1]);
}

/**
 * The default cap: a quarter of the soft fd limit. A file may hold two descriptors, so the files
 * take at most half of them; the other half is the headroom for what the server holds besides
 * (control pipes, up to maxPipes 256; connection sockets on tcp; its devices, listeners and
 * Node's own). 1024 gives 256 files; a limit that cannot be read gives FALLBACK_MAX_OPEN_FILES.
 */
export function defaultMaxOpenFiles(limits?: string): number {
  const soft = softFdLimit(limits);
  if (soft === undefined) return FALLBACK_MAX_OPEN_FILES;
  if (soft === Infinity) return 1 << 20;
  return Math.max(MIN_MAX_OPEN_FILES, Math.floor(soft / 4));
}

/** ServeOptions.maxOpenFilesTotal, checked where it is given: a NaN or negative one would make the cap compare false (no cap). */
export function checkMaxOpenFiles(v: number | undefined): void {
  if (v !== undefined && !(Number.isSafeInteger(v) && v >= 1)) throw new SabreError(ErrorCode.InvalidArgument, `maxOpenFilesTotal must be a positive integer, not ${String(v)}`);
}

export interface OpenFileCounters {
  /** Files open now (or being opened), all connections and dedup transfers: at most maxOpenFilesTotal. */
  openFiles: number;
  /** Opens (and dedup transfers) refused with TooManyOpenFiles because the server held maxOpenFilesTotal. */
  openFilesRefused: number;
}

/** The count of open files against the server-wide cap: take() before an open, give() once it is closed. */
export class OpenFileBudget {
  open = 0;
  refused = 0;
  constructor(readonly max: number) {}

  /** Room for `n` more files: taken (true), or refused and counted (false). */
  take(n = 1): boolean {
    if (this.open + n > this.max) {
      this.refused++;
      return false;
    }
    this.open += n;
    return true;
  }

  give(n = 1): void {
    this.open = Math.max(0, this.open - n);
  }

  counters(): OpenFileCounters {
    return { openFiles: this.open, openFilesRefused: this.refused };
  }
}
