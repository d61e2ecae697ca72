// The served directory as the server's file operations see it: nothing outside it can be read,
// written, listed or created.
//
// The path's text was checked already (./paths.ts: no "..", not absolute, no NUL). Here, against
// the file system:
// - the parent directory is resolved with realpath and must lie inside the root's realpath (a
//   symbolic link among the directories that points out is refused);
// - the last component is opened with O_NOFOLLOW; a symbolic link there is followed only when
//   its realpath is inside the root, and then the target is opened with O_NOFOLLOW in turn;
// - after open, fstat must show a regular file with one link (a hard link may name a file
//   outside the root: refused as LinkedFile), and the path must still resolve inside the root to
//   the very inode we hold (a component swapped for a symbolic link between check and open is
//   caught here);
// - Truncate happens with ftruncate after those checks, never with O_TRUNC at open;
// - Replace writes a new temporary file (O_CREAT|O_EXCL|O_NOFOLLOW) next to the name and renames
//   it over the name on a committed close (fsync of file and directory on request), after
//   checking the directory still resolves to itself; an uncommitted close unlinks it. Renaming
//   replaces a symbolic link or a hard link at the name itself, never what it points to.
// Node has no openat/renameat, so a local user racing renames inside the served directory has a
// window between the final check and the rename; the checks above bound it to that instant.
import { randomBytes } from 'node:crypto';
import { constants as C, promises as fsp } from 'node:fs';
import fs from 'node:fs';
import { join, sep } from 'node:path';
import { promisify } from 'node:util';
import { FileAccess, FileStatus } from '../wire/spec.js';
import { direntSize, encodeDirEntries, type DirEntry } from './dirents.js';

const open = promisify(fs.open);
const close = promisify(fs.close);
const fstat = promisify(fs.fstat);
const ftruncate = promisify(fs.ftruncate);
const fchmod = promisify(fs.fchmod);
const fsync = promisify(fs.fsync);
const read = promisify(fs.read);
const write = promisify(fs.write);

/** Temporary files of Replace puts: hidden from List, never opened by name. */
const TEMP = /^\.sabre-[0-9a-f]{16}\.part$/;
/** Bound on the entries of one listed directory. */
export const MAX_LIST_ENTRIES = 100_000;

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

/** A Replace put: the temporary file, the name it goes to, the directory (its realpath). */
interface Replacing {
  tmp: string;
  final: string;
  dir: string;
  jail: Jail;
}

export class JailFile {
  readonly fd: number;
  readonly size: number;
  readonly #replace: Replacing | undefined;
  readonly #fsync: boolean;
  #closed = false;

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

  /** Close; a Replace file reaches its name only when `commit`. Returns a status. */
  async close(commit: boolean): Promise<number> {
    if (this.#closed) return FileStatus.Success;
    this.#closed = true;
    const r = this.#replace;
    if (!r) {
      await close(this.fd).catch(() => {});
      return FileStatus.Success;
    }
    if (!commit) {
      await close(this.fd).catch(() => {});
      await fsp.unlink(r.tmp).catch(() => {});
      return FileStatus.Success;
    }
    try {
      if (this.#fsync) await fsync(this.fd);
      await close(this.fd);
      // The directory must still be itself (not swapped for a link out) when the name appears.
      const real = await fsp.realpath(r.dir);
      if (real !== r.dir || !r.jail.inside(real)) {
        await fsp.unlink(r.tmp).catch(() => {});
        return FileStatus.PathOutside;
      }
      const st = await fsp.lstat(r.final).catch(() => undefined);
      if (st?.isDirectory()) {
        await fsp.unlink(r.tmp).catch(() => {});
        return FileStatus.IsDirectory;
      }
      await fsp.rename(r.tmp, r.final);
      if (this.#fsync) {
        const d = await open(r.dir, C.O_RDONLY | C.O_DIRECTORY);
        try {
          await fsync(d);
        } finally {
          await close(d);
        }
      }
      return FileStatus.Success;
    } catch (e) {
      await fsp.unlink(r.tmp).catch(() => {});
      return statusOf(e);
    }
  }
}

export class Jail {
  /** The served directory's realpath. */
  readonly root: string;

  private constructor(root: string) {
    this.root = root;
  }

  static async open(dir: string): Promise<Jail> {
    const root = await fsp.realpath(dir);
    const st = await fsp.stat(root);
    if (!st.isDirectory()) throw Object.assign(new Error(`${dir} is not a directory`), { code: 'ENOTDIR' });
    return new Jail(root);
  }

  inside(real: string): boolean {
    return real === this.root || real.startsWith(this.root.endsWith(sep) ? this.root : this.root + sep);
  }

  /** The realpath of a directory under the root, or a status. */
  async dir(parts: readonly string[]): Promise<string | { status: number; why: string }> {
    let real: string;
    try {
      real = await fsp.realpath(join(this.root, ...parts));
    } catch (e) {
      return { status: statusOf(e), why: 'directory does not resolve' };
    }
    if (!this.inside(real)) return { status: FileStatus.PathOutside, why: 'a directory in the path leads outside' };
    const st = await fsp.stat(real).catch(() => undefined);
    if (!st) return { status: FileStatus.NotFound, why: 'no such directory' };
    if (!st.isDirectory()) return { status: FileStatus.NotDirectory, why: 'not a directory' };
    return real;
  }

  async open(parts: readonly string[], access: number, mode: number, fsyncOnClose: boolean): Promise<Opened> {
    const name = parts[parts.length - 1]!;
    if (TEMP.test(name)) return { status: FileStatus.NotFound, why: 'temporary files are not served' };
    const dir = await this.dir(parts.slice(0, -1));
    if (typeof dir !== 'string') return dir;
    return access & FileAccess.Replace ? this.#openReplace(dir, name, access, mode, fsyncOnClose) : this.#openInPlace(dir, name, access, mode);
  }

  async #openInPlace(dir: string, name: string, access: number, mode: number): Promise<Opened> {
    let path = join(dir, name);
    let st = await fsp.lstat(path).catch(() => undefined);
    if (st?.isSymbolicLink()) {
      const real = await fsp.realpath(path).catch(() => undefined);
      if (!real) return { status: FileStatus.PathOutside, why: 'a dangling symbolic link' };
      if (!this.inside(real)) return { status: FileStatus.PathOutside, why: 'a symbolic link that points outside' };
      path = real;
      st = await fsp.lstat(path).catch(() => undefined);
    }
    if (st?.isDirectory()) return { status: FileStatus.IsDirectory, why: 'a directory' };
    const rw = access & FileAccess.Read && access & FileAccess.Write ? C.O_RDWR : access & FileAccess.Write ? C.O_WRONLY : C.O_RDONLY;
    const flags = rw | C.O_NOFOLLOW | C.O_NONBLOCK | (access & FileAccess.Create ? C.O_CREAT : 0) | (access & FileAccess.Create && access & FileAccess.Exclusive ? C.O_EXCL : 0);
    let fd: number;
    try {
      fd = await open(path, flags, mode || 0o644);
    } catch (e) {
      return { status: statusOf(e), why: 'open failed' };
    }
    const fail = async (status: number, why: string): Promise<Opened> => {
      await close(fd).catch(() => {});
      return { status, why };
    };
    try {
      const fst = await fstat(fd);
      if (fst.isDirectory()) return fail(FileStatus.IsDirectory, 'a directory');
      if (!fst.isFile()) return fail(FileStatus.InvalidParameter, 'not a regular file');
      if (fst.nlink > 1) return fail(FileStatus.LinkedFile, 'more than one hard link');
      // Still the same file, still inside (a component swapped between check and open).
      const real = await fsp.realpath(path).catch(() => undefined);
      if (!real || !this.inside(real)) return fail(FileStatus.PathOutside, 'the path moved outside');
      const again = await fsp.stat(real).catch(() => undefined);
      if (!again || again.ino !== fst.ino || again.dev !== fst.dev) return fail(FileStatus.PathOutside, 'the path changed under us');
      let size = fst.size;
      if (access & FileAccess.Truncate && access & FileAccess.Write) {
        await ftruncate(fd, 0);
        size = 0;
      }
      return { status: FileStatus.Success, file: new JailFile(fd, size, undefined, false) };
    } catch (e) {
      return fail(statusOf(e), 'checks after open failed');
    }
  }

  async #openReplace(dir: string, name: string, access: number, mode: number, fsyncOnClose: boolean): Promise<Opened> {
    const final = join(dir, name);
    const st = await fsp.lstat(final).catch(() => undefined);
    if (st?.isDirectory()) return { status: FileStatus.IsDirectory, why: 'a directory' };
    if (st && access & FileAccess.Create && access & FileAccess.Exclusive) return { status: FileStatus.Exists, why: 'exists' };
    if (!st && !(access & FileAccess.Create)) return { status: FileStatus.NotFound, why: 'no such file' };
    const tmp = join(dir, `.sabre-${randomBytes(8).toString('hex')}.part`);
    let fd: number;
    try {
      fd = await open(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
    } catch (e) {
      return { status: statusOf(e), why: 'cannot create the temporary file' };
    }
    try {
      await fchmod(fd, mode || 0o644);
    } catch (e) {
      await close(fd).catch(() => {});
      await fsp.unlink(tmp).catch(() => {});
      return { status: statusOf(e), why: 'chmod failed' };
    }
    return { status: FileStatus.Success, file: new JailFile(fd, 0, { tmp, final, dir, jail: this }, fsyncOnClose) };
  }

  /**
   * One page of directory `parts` from entry `cookie` into `out`: [status, bytes, next cookie
   * (0: the end)]. Entries are sorted by name so cookies are stable; temporary files are hidden.
   */
  async list(parts: readonly string[], cookie: number, out: Uint8Array): Promise<{ status: number; bytes: number; next: number }> {
    const dir = await this.dir(parts);
    if (typeof dir !== 'string') return { status: dir.status, bytes: 0, next: 0 };
    let names: string[];
    try {
      names = (await fsp.readdir(dir)).filter((n) => !TEMP.test(n)).sort();
    } catch (e) {
      return { status: statusOf(e), bytes: 0, next: 0 };
    }
    if (names.length > MAX_LIST_ENTRIES) return { status: FileStatus.LimitExceeded, bytes: 0, next: 0 };
    if (cookie > names.length) return { status: FileStatus.InvalidParameter, bytes: 0, next: 0 };
    const page: DirEntry[] = [];
    let room = out.length;
    for (let i = cookie; i < names.length; i++) {
      const n = names[i]!;
      const need = direntSize(Buffer.byteLength(n));
      if (need > room) break;
      room -= need;
      const st = await fsp.lstat(join(dir, n)).catch(() => undefined);
      page.push({
        name: n, type: !st ? 'other' : st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other',
        mode: st ? st.mode & 0o7777 : 0, size: st?.isFile() ? st.size : 0, mtimeMs: st?.mtimeMs ?? 0,
      });
    }
    if (page.length === 0 && cookie < names.length) return { status: FileStatus.LimitExceeded, bytes: 0, next: 0 };
    const [bytes, count] = encodeDirEntries(out, page, 0);
    const next = cookie + count;
    return { status: FileStatus.Success, bytes, next: next < names.length ? next : 0 };
  }
}
