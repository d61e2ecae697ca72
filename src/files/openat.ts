// Path resolution beneath a directory that a local user racing renames cannot redirect. Node has
// no openat, but on Linux /proc/self/fd/N names the very directory that descriptor N holds, so
// "/proc/self/fd/N/name" looks `name` up in that directory, wherever its old path now leads.
// A path is walked one component at a time: each directory is opened with O_DIRECTORY|O_NOFOLLOW
// relative to its parent's descriptor, so a component swapped for a symbolic link after the walk
// passed it changes nothing, and one swapped before is seen as a link.
//
// A symbolic link met on the way is not followed by the kernel: its text is read and walked in
// turn by the same rules (a relative target from the directory holding the link, an absolute one
// only when it names the root or something under it, ".." never above the root, at most
// MAX_LINKS links per path). So links that stay inside keep working and none leads out.
//
// The root itself is reopened by its path for every walk and must still be the directory (device
// and inode) that was served at start: holding its descriptor for the server's life would need a
// close that the jail's callers do not make.
import { constants as C, promises as fsp } from 'node:fs';
import fs from 'node:fs';
import { sep } from 'node:path';
import { promisify } from 'node:util';
import { FileStatus } from '../wire/files-spec.js';

const open = promisify(fs.open);
const fstat = promisify(fs.fstat);
const readlink = promisify(fs.readlink);

/** Where a descriptor's directory can be named. */
const FD_DIR = '/proc/self/fd';
/** Links followed in one path before it is refused (the kernel's own bound). */
export const MAX_LINKS = 40;
/** Flags to open a directory on the way: never through a link; O_NONBLOCK so a FIFO cannot hang us. */
const DIR = C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW | C.O_NONBLOCK;

/** `name` inside the directory that `fd` holds (the directory itself without a name). */
export function at(fd: number, name?: string): string {
  return name === undefined ? `${FD_DIR}/${fd}` : `${FD_DIR}/${fd}/${name}`;
}

/** Close without waiting: the descriptor is not used again, and nothing can be done on failure. */
export function closeSoon(fd: number): void {
  fs.close(fd, () => {});
}

/** A refusal with the status the jail reports, thrown through the walk. */
export class Refused extends Error {
  readonly status: number;
  readonly why: string;
  constructor(status: number, why: string) {
    super(why);
    this.status = status;
    this.why = why;
  }
}

const outside = (why: string): Refused => new Refused(FileStatus.PathOutside, why);
const code = (e: unknown): string | undefined => (e as NodeJS.ErrnoException)?.code;

/** An open directory beneath the root and the names that lead to it from the root (no links). */
export interface Dir {
  fd: number;
  names: readonly string[];
}

/** Links followed so far in one path. */
export interface Budget {
  links: number;
}

export class Beneath {
  /** The root's realpath. */
  readonly root: string;
  readonly #dev: number;
  readonly #ino: number;

  private constructor(root: string, dev: number, ino: number) {
    this.root = root;
    this.#dev = dev;
    this.#ino = ino;
  }

  /**
   * The directory `root` (a realpath). Throws when it is not a directory or when /proc/self/fd
   * does not name descriptors: without it nothing can be resolved safely, so nothing is served.
   */
  static async open(root: string): Promise<Beneath> {
    const fd = await open(root, DIR);
    try {
      const st = await fstat(fd);
      // Looked up at call time (not bound at load) so a test can take /proc away.
      const via = await fsp.stat(at(fd)).catch(() => undefined);
      if (!via || via.dev !== st.dev || via.ino !== st.ino) {
        throw Object.assign(new Error(`cannot serve ${root}: ${FD_DIR} does not name open directories (is /proc mounted?); the jail needs it to open paths without following links`), { code: 'ENOSYS' });
      }
      return new Beneath(root, st.dev, st.ino);
    } finally {
      closeSoon(fd);
    }
  }

  /** The root, opened again; still the directory served at start. */
  async openRoot(): Promise<Dir> {
    const fd = await open(this.root, DIR).catch((e: unknown) => {
      // Its path now names a link or a file: whatever it leads to is not what was served.
      throw code(e) === 'ENOTDIR' || code(e) === 'ELOOP' ? outside('the served directory was replaced') : e;
    });
    try {
      const st = await fstat(fd);
      if (st.dev !== this.#dev || st.ino !== this.#ino) throw outside('the served directory was replaced');
    } catch (e) {
      closeSoon(fd);
      throw e;
    }
    return { fd, names: [] };
  }

  /** Whether the directory `fd` holds is still the root or under it (it may have been moved). */
  async holds(fd: number): Promise<boolean> {
    const p = await readlink(at(fd)).catch(() => '');
    return p === this.root || p.startsWith(this.root.endsWith(sep) ? this.root : this.root + sep);
  }

  /** A link's target as names to walk, and whether they start from the root (absolute). */
  #target(text: string): { fromRoot: boolean; names: string[] } {
    if (!text.startsWith('/')) return { fromRoot: false, names: text.split('/') };
    const base = this.root.endsWith(sep) ? this.root : this.root + sep;
    if (text !== this.root && !text.startsWith(base)) throw outside('a symbolic link that points outside');
    return { fromRoot: true, names: text.slice(this.root.length).split('/') };
  }

  /**
   * What the link `name` in `dir` says, or undefined when it is not a link (any more). Counts
   * against the budget either way, so a name flipping between link and directory cannot loop.
   */
  async #link(dir: Dir, name: string, budget: Budget): Promise<string | undefined> {
    if (++budget.links > MAX_LINKS) throw outside('too many symbolic links');
    try {
      return await readlink(at(dir.fd, name));
    } catch (e) {
      if (code(e) === 'EINVAL') return undefined;
      throw e;
    }
  }

  /**
   * Walk `names` (directories) from `dir`, which is consumed: closed on the way or on failure.
   * Returns the last directory, open.
   */
  async walk(dir: Dir, names: readonly string[], budget: Budget = { links: 0 }): Promise<Dir> {
    let cur = dir;
    try {
      const todo = [...names].reverse();
      while (todo.length > 0) {
        const n = todo.pop()!;
        if (n === '' || n === '.') continue;
        if (n === '..') {
          // Only a link's text can hold "..": the request's path was checked for it.
          if (cur.names.length === 0) throw outside('a symbolic link leads above the served directory');
          const up = cur.names.slice(0, -1);
          closeSoon(cur.fd);
          cur = { fd: -1, names: [] };
          cur = await this.walk(await this.openRoot(), up, budget);
          continue;
        }
        let fd: number;
        try {
          fd = await open(at(cur.fd, n), DIR);
        } catch (e) {
          // A link opened with O_DIRECTORY|O_NOFOLLOW fails with ENOTDIR (ELOOP without O_DIRECTORY).
          if (code(e) !== 'ENOTDIR' && code(e) !== 'ELOOP') throw e;
          const text = await this.#link(cur, n, budget);
          if (text === undefined) {
            // A file used as a directory; or a link that was renamed since: look again.
            const now = code(e) === 'ENOTDIR' ? await fsp.lstat(at(cur.fd, n)).catch(() => undefined) : undefined;
            if (now && !now.isDirectory() && !now.isSymbolicLink()) throw e;
            todo.push(n);
            continue;
          }
          const t = this.#target(text);
          if (t.fromRoot) {
            closeSoon(cur.fd);
            cur = { fd: -1, names: [] };
            cur = await this.openRoot();
          }
          todo.push(...t.names.reverse());
          continue;
        }
        closeSoon(cur.fd);
        cur = { fd, names: [...cur.names, n] };
      }
      return cur;
    } catch (e) {
      if (cur.fd >= 0) closeSoon(cur.fd);
      throw e;
    }
  }

  /**
   * Open `name` in `dir` with `flags` (O_NOFOLLOW added). A link there is followed by the walk's
   * rules to something that exists (never created through: a dangling link is PathOutside).
   * `dir` is consumed: on success the directory the file was found in comes back open with it.
   */
  async openLeaf(dir: Dir, name: string, flags: number, mode: number): Promise<{ fd: number; dir: Dir; name: string }> {
    let cur = dir;
    let leaf = name;
    let f = flags;
    let followed = false;
    const budget: Budget = { links: 0 };
    try {
      for (;;) {
        try {
          const fd = await open(at(cur.fd, leaf), f | C.O_NOFOLLOW, mode);
          return { fd, dir: cur, name: leaf };
        } catch (e) {
          if (code(e) === 'ENOENT' && followed) throw outside('a dangling symbolic link');
          if (code(e) !== 'ELOOP') throw e;
        }
        const text = await this.#link(cur, leaf, budget);
        if (text === undefined) continue;
        const t = this.#target(text);
        const names = t.names.filter((n) => n !== '' && n !== '.');
        const last = names.pop();
        // A target ending in ".." (or naming the root) is a directory: open it as ".".
        if (last === '..') names.push(last);
        leaf = last === undefined || last === '..' ? '.' : last;
        f = flags & ~(C.O_CREAT | C.O_EXCL);
        followed = true;
        const from = t.fromRoot ? await this.openRoot().then((r) => (closeSoon(cur.fd), r)) : cur;
        cur = { fd: -1, names: [] };
        try {
          cur = await this.walk(from, names, budget);
        } catch (e) {
          throw code(e) === 'ENOENT' ? outside('a dangling symbolic link') : e;
        }
      }
    } catch (e) {
      if (cur.fd >= 0) closeSoon(cur.fd);
      throw e;
    }
  }
}
