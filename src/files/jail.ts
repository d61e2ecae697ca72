// The served directory as the server's file operations see it: nothing outside it can be read,
// written, listed or created.
//
// The path's text was checked already (./paths.ts: no "..", not absolute, no NUL). Here, against
// the file system, every path is walked from the root one directory at a time without the kernel
// following links (./openat.ts): each directory is opened relative to the descriptor of the one
// before, and a symbolic link met on the way is followed only by reading it and walking its
// target by the same rules, inside the root. A directory swapped for a link to elsewhere while a
// request is under way therefore cannot send it out: what was already opened stays what it was,
// and what is opened next is opened in it. Then:
// - the last component is opened (or created) relative to its directory's descriptor with
//   O_NOFOLLOW; a symbolic link there is followed as above, to a file that exists (a dangling link
//   is never created through);
// - after open, fstat must show a regular file with one link (a hard link may name a file
//   outside the root: refused as LinkedFile), and the directory we hold must still lie under the
//   root (one moved out of it since is refused);
// - Truncate happens with ftruncate after those checks, never with O_TRUNC at open;
// - Replace writes a new temporary file (O_CREAT|O_EXCL|O_NOFOLLOW) in the held directory and
//   renames it over the name in that same directory on a committed close (fsync of file and
//   directory on request); an uncommitted close unlinks it. Renaming replaces a symbolic link or
//   a hard link at the name itself, never what it points to. With Create|Exclusive the commit
//   is link(2) then unlink of the temporary, so a name that appeared since the open is kept
//   and the close fails with Exists;
// - List reads the held directory (or reuses its sorted names: ./list-cache.ts) and lstats names in it.
// Without /proc/self/fd none of this can be done, and the jail refuses to open (nothing served).
import { randomBytes } from 'node:crypto';
import { constants as C, promises as fsp } from 'node:fs';
import fs from 'node:fs';
import { sep } from 'node:path';
import { promisify } from 'node:util';
import { FileAccess, FileStatus } from '../wire/files-spec.js';
import { MAX_LIST_ENTRIES, direntSize, encodeDirEntries, type DirEntry } from './dirents.js';
import { ListingCache, readSortedNames } from './list-cache.js';
import { at, Beneath, closeSoon, type Dir, Refused } from './openat.js';
import { type PartSweepCounters, type SweepLimits, sweepTemps } from './sweep.js';

const open = promisify(fs.open);
const close = promisify(fs.close);
const fstat = promisify(fs.fstat);
const ftruncate = promisify(fs.ftruncate);
const fchmod = promisify(fs.fchmod);
const fsync = promisify(fs.fsync);
const read = promisify(fs.read);
const write = promisify(fs.write);
const readlink = promisify(fs.readlink);

/** Temporary files of Replace puts: hidden from List, never opened by name, swept at start (./sweep.ts). */
export const TEMP = /^\.sabre-[0-9a-f]{16}\.part$/;

/** The status for an errno from node:fs. */
export function statusOf(e: unknown): number {
  switch ((e as NodeJS.ErrnoException)?.code) {
    case 'ENOENT':
      return FileStatus.NotFound;
    case 'EEXIST':
      return FileStatus.Exists;
    case 'EISDIR':
      return FileStatus.IsDirectory;
    case 'ENOTDIR':
      return FileStatus.NotDirectory;
    case 'ELOOP':
      return FileStatus.PathOutside;
    case 'ENOSPC':
    case 'EDQUOT':
      return FileStatus.NoSpace;
    case 'EACCES':
    case 'EPERM':
      return FileStatus.AccessDenied;
    case 'ENAMETOOLONG':
    case 'EINVAL':
      return FileStatus.InvalidParameter;
    default:
      return FileStatus.IoError;
  }
}

export type Opened = { status: typeof FileStatus.Success; file: JailFile } | { status: number; why: string };

/**
 * A Replace put: the directory it is in (held open), the temporary's name and the final name;
 * `exclusive` (Create|Exclusive): the name must not exist when the put commits.
 */
export interface Replacing {
  dir: number;
  tmp: string;
  name: string;
  beneath: Beneath;
  exclusive?: boolean;
}

/** A refusal thrown by the walk, or an errno, as the status and reason the jail reports. */
function refusal(e: unknown, why: string): { status: number; why: string } {
  return e instanceof Refused ? { status: e.status, why: e.why } : { status: statusOf(e), why };
}

export class JailFile {
  readonly fd: number;
  readonly size: number;
  readonly #replace: Replacing | undefined;
  readonly #fsync: boolean;
  /** The first close's work: a second close (a request's and the connection's teardown) shares it. */
  #closing: Promise<number> | undefined;

  constructor(fd: number, size: number, replace: Replacing | undefined, fsyncOnClose: boolean) {
    this.fd = fd;
    this.size = size;
    this.#replace = replace;
    this.#fsync = fsyncOnClose;
  }

  get replacing(): boolean {
    return this.#replace !== undefined;
  }

  /** Read up to `length` bytes at `position` into `into` (short only at end of file). */
  async read(into: Uint8Array, length: number, position: number): Promise<number> {
    let got = 0;
    while (got < length) {
      const { bytesRead } = await read(this.fd, into, got, length - got, position + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return got;
  }

  async write(from: Uint8Array, position: number): Promise<number> {
    let put = 0;
    while (put < from.length) {
      const { bytesWritten } = await write(this.fd, from, put, from.length - put, position + put);
      put += bytesWritten;
    }
    return put;
  }

  /**
   * Close; a Replace file reaches its name only when `commit`. Returns a status. Every call
   * returns the first call's promise (its `commit` decides): a later one must not report the
   * file closed before the first has renamed or unlinked it.
   */
  close(commit: boolean): Promise<number> {
    return (this.#closing ??= this.#close(commit));
  }

  async #close(commit: boolean): Promise<number> {
    const r = this.#replace;
    if (!r) {
      await close(this.fd).catch(() => {});
      return FileStatus.Success;
    }
    const tmp = at(r.dir, r.tmp);
    try {
      if (!commit) {
        await close(this.fd).catch(() => {});
        await fsp.unlink(tmp).catch(() => {});
        return FileStatus.Success;
      }
      if (this.#fsync) {
        try {
          await fsync(this.fd);
        } catch (e) {
          // The catch below only unlinks the temporary: the descriptor is closed here.
          await close(this.fd).catch(() => {});
          throw e;
        }
      }
      await close(this.fd);
      // The name appears in the directory we hold, which must still lie under the root.
      if (!(await r.beneath.holds(r.dir))) {
        await fsp.unlink(tmp).catch(() => {});
        return FileStatus.PathOutside;
      }
      const final = at(r.dir, r.name);
      const st = await fsp.lstat(final).catch(() => undefined);
      if (st?.isDirectory()) {
        await fsp.unlink(tmp).catch(() => {});
        return FileStatus.IsDirectory;
      }
      if (r.exclusive) {
        // The open's check that the name was free is long past: link(2) creates the name only
        // if it still does not exist (EEXIST → Exists), where rename(2) would replace it.
        await fsp.link(tmp, final);
        await fsp.unlink(tmp).catch(() => {});
      } else await fsp.rename(tmp, final);
      if (this.#fsync) await fsync(r.dir);
      return FileStatus.Success;
    } catch (e) {
      await fsp.unlink(tmp).catch(() => {});
      return statusOf(e);
    } finally {
      await close(r.dir).catch(() => {});
    }
  }
}

export class Jail {
  /** The served directory's realpath. */
  readonly root: string;
  /** Sorted listings of directories, reused across List pages while unchanged. */
  readonly listCache = new ListingCache();
  readonly #beneath: Beneath;

  private constructor(beneath: Beneath) {
    this.root = beneath.root;
    this.#beneath = beneath;
  }

  /** The jail over `dir`; throws where it is not a directory or /proc/self/fd is missing. */
  static async open(dir: string): Promise<Jail> {
    const root = await fsp.realpath(dir);
    const st = await fsp.stat(root);
    if (!st.isDirectory()) throw Object.assign(new Error(`${dir} is not a directory`), { code: 'ENOTDIR' });
    return new Jail(await Beneath.open(root));
  }

  /** Remove stale put temporaries under the root (./sweep.ts); before serving, so none of ours is live. */
  async sweepParts(limits: Partial<SweepLimits>): Promise<PartSweepCounters> {
    return sweepTemps((await this.#beneath.openRoot()).fd, TEMP, limits);
  }

  inside(real: string): boolean {
    return real === this.root || real.startsWith(this.root.endsWith(sep) ? this.root : this.root + sep);
  }

  /** Directory `parts` under the root, open (the caller closes it), or a refusal. */
  async #dir(parts: readonly string[]): Promise<Dir | { status: number; why: string }> {
    try {
      return await this.#beneath.walk(await this.#beneath.openRoot(), parts);
    } catch (e) {
      return refusal(e, 'directory does not resolve');
    }
  }

  /** The realpath of a directory under the root, or a status. */
  async dir(parts: readonly string[]): Promise<string | { status: number; why: string }> {
    const d = await this.#dir(parts);
    if (!('fd' in d)) return d;
    try {
      return await readlink(at(d.fd));
    } catch (e) {
      return refusal(e, 'directory does not resolve');
    } finally {
      closeSoon(d.fd);
    }
  }

  async open(parts: readonly string[], access: number, mode: number, fsyncOnClose: boolean): Promise<Opened> {
    const name = parts[parts.length - 1]!;
    if (TEMP.test(name)) return { status: FileStatus.NotFound, why: 'temporary files are not served' };
    const dir = await this.#dir(parts.slice(0, -1));
    if (!('fd' in dir)) return dir;
    return access & FileAccess.Replace ? this.#openReplace(dir, name, access, mode, fsyncOnClose) : this.#openInPlace(dir, name, access, mode);
  }

  /** Open `name` in `dir` (consumed: closed before this returns). */
  async #openInPlace(dir: Dir, name: string, access: number, mode: number): Promise<Opened> {
    const rw = access & FileAccess.Read && access & FileAccess.Write ? C.O_RDWR : access & FileAccess.Write ? C.O_WRONLY : C.O_RDONLY;
    const flags = rw | C.O_NONBLOCK | (access & FileAccess.Create ? C.O_CREAT : 0) | (access & FileAccess.Create && access & FileAccess.Exclusive ? C.O_EXCL : 0);
    let opened: { fd: number; dir: Dir; name: string };
    try {
      opened = await this.#beneath.openLeaf(dir, name, flags, mode || 0o644);
    } catch (e) {
      return refusal(e, 'open failed');
    }
    const { fd } = opened;
    const fail = (status: number, why: string): Opened => {
      closeSoon(fd);
      return { status, why };
    };
    try {
      const fst = await fstat(fd);
      if (fst.isDirectory()) return fail(FileStatus.IsDirectory, 'a directory');
      // A link inside may lead to a Replace put's temporary, which is never served by name.
      if (TEMP.test(opened.name)) return fail(FileStatus.NotFound, 'temporary files are not served');
      if (!fst.isFile()) return fail(FileStatus.InvalidParameter, 'not a regular file');
      if (fst.nlink > 1) return fail(FileStatus.LinkedFile, 'more than one hard link');
      if (!(await this.#beneath.holds(opened.dir.fd))) return fail(FileStatus.PathOutside, 'the directory moved outside');
      let size = fst.size;
      if (access & FileAccess.Truncate && access & FileAccess.Write) {
        await ftruncate(fd, 0);
        size = 0;
      }
      // The size crosses the wire as a safe integer (a sparse file on tmpfs or xfs may be
      // larger): such a file cannot be served, and saying so beats a Completion the client
      // cannot decode.
      if (!Number.isSafeInteger(size)) return fail(FileStatus.LimitExceeded, 'the file is larger than 2^53 - 1 bytes');
      return { status: FileStatus.Success, file: new JailFile(fd, size, undefined, false) };
    } catch (e) {
      return fail(statusOf(e), 'checks after open failed');
    } finally {
      closeSoon(opened.dir.fd);
    }
  }

  /** A temporary file in `dir` (consumed: held by the JailFile, or closed on refusal). */
  async #openReplace(dir: Dir, name: string, access: number, mode: number, fsyncOnClose: boolean): Promise<Opened> {
    const refuse = (status: number, why: string): Opened => {
      closeSoon(dir.fd);
      return { status, why };
    };
    const st = await fsp.lstat(at(dir.fd, name)).catch(() => undefined);
    if (st?.isDirectory()) return refuse(FileStatus.IsDirectory, 'a directory');
    if (st && access & FileAccess.Create && access & FileAccess.Exclusive) return refuse(FileStatus.Exists, 'exists');
    if (!st && !(access & FileAccess.Create)) return refuse(FileStatus.NotFound, 'no such file');
    const tmp = `.sabre-${randomBytes(8).toString('hex')}.part`;
    let fd: number;
    try {
      fd = await open(at(dir.fd, tmp), C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
    } catch (e) {
      return refuse(statusOf(e), 'cannot create the temporary file');
    }
    try {
      await fchmod(fd, mode || 0o644);
    } catch (e) {
      await close(fd).catch(() => {});
      await fsp.unlink(at(dir.fd, tmp)).catch(() => {});
      return refuse(statusOf(e), 'chmod failed');
    }
    return { status: FileStatus.Success, file: new JailFile(fd, 0, { dir: dir.fd, tmp, name, beneath: this.#beneath, exclusive: (access & FileAccess.Create && access & FileAccess.Exclusive) !== 0 }, fsyncOnClose) };
  }

  /**
   * One page of directory `parts` from entry `cookie` into `out`: [status, bytes, next cookie
   * (0: the end)]. Entries are sorted by name so cookies are stable; temporary files are hidden.
   */
  async list(parts: readonly string[], cookie: number, out: Uint8Array): Promise<{ status: number; bytes: number; next: number }> {
    const dir = await this.#dir(parts);
    if (!('fd' in dir)) return { status: dir.status, bytes: 0, next: 0 };
    try {
      let names: readonly string[] | undefined;
      try {
        // Pages are cut from one sorted read of the directory, kept while it is unchanged (./list-cache.ts).
        const st = await fstat(dir.fd, { bigint: true });
        names = await this.listCache.load(st, cookie, () => readSortedNames(at(dir.fd), TEMP, MAX_LIST_ENTRIES));
        if (!names) return { status: FileStatus.LimitExceeded, bytes: 0, next: 0 };
      } catch (e) {
        return { status: statusOf(e), bytes: 0, next: 0 };
      }
      if (cookie > names.length) return { status: FileStatus.InvalidParameter, bytes: 0, next: 0 };
      const page: DirEntry[] = [];
      let room = out.length;
      for (let i = cookie; i < names.length; i++) {
        const n = names[i]!;
        const need = direntSize(Buffer.byteLength(n));
        if (need > room) break;
        room -= need;
        const st = await fsp.lstat(at(dir.fd, n)).catch(() => undefined);
        page.push({
          name: n, type: !st ? 'other' : st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other',
          mode: st ? st.mode & 0o7777 : 0, size: st?.isFile() ? st.size : 0, mtimeMs: st?.mtimeMs ?? 0,
        });
      }
      if (page.length === 0 && cookie < names.length) return { status: FileStatus.LimitExceeded, bytes: 0, next: 0 };
      const [bytes, count] = encodeDirEntries(out, page, 0);
      const next = cookie + count;
      return { status: FileStatus.Success, bytes, next: next < names.length ? next : 0 };
    } finally {
      closeSoon(dir.fd);
    }
  }
}
