// Whole files: get and put through a FileClient's chunked reads and writes, as many in flight as
// its pipeline allows, into a temporary that is renamed into place (get) or through a Replace open
// whose name appears complete or not at all (put); and their --dedup forms over the session's
// dedup channels (./dedup.ts).
import fs from 'node:fs';
import { promisify } from 'node:util';
import type { ClientSession } from './client-session.js';
import { type BasisFile, dedupGet, dedupPut } from './dedup.js';
import { PrefixWriter } from './dedup-writer.js';
import type { OpenOptions, OpOptions, RemoteFile, TransferResult } from './client-types.js';
import { FileError, LocalCode, statusCode } from './status.js';

const fsRead = promisify(fs.read);
const fsWrite = promisify(fs.write);

/** What get and put use of a FileClient: its session, whole-file operations and chunked I/O. */
export interface TransferSide {
  readonly transport: TransferResult['transport'];
  readonly session: ClientSession;
  pipeline(): { sinks: number; writeBuffers: number; readChunk: number; writeChunk: number };
  open(path: string, o?: OpenOptions): Promise<RemoteFile>;
  close(f: RemoteFile, o?: { discard?: boolean }): Promise<void>;
  /** One read through a leased sink; `take` sees the sink before it is reused. */
  readChunk(f: RemoteFile, position: number, length: number, take: (view: Uint8Array, n: number) => void | Promise<void>, o: OpOptions): Promise<number>;
  /** One write through a leased buffer that `fill` fills. */
  writeChunk(f: RemoteFile, position: number, length: number, fill: (view: Uint8Array) => void | Promise<void>, o: OpOptions): Promise<number>;
}

/** The session as the dedup transfers see it: its device, the server's address and fresh keys. */
function dedupSide(s: ClientSession) {
  return { dev: s.dev, address: s.address, negotiate: () => s.negotiate(), timeoutMs: s.timeoutMs };
}

/**
 * get --dedup: the local file as it is now is the basis (rsync over RDMA): only the chunks of
 * the server's version it lacks cross the wire. Written to `local`.sabre-part, renamed at the end.
 */
export async function getDedup(c: TransferSide, remote: string, local: string): Promise<TransferResult> {
  const t0 = performance.now();
  // The local copy, if any: read by the transfer a piece at a time while it starts.
  const basis = await localBasis(local);
  const tmp = `${local}.sabre-part`;
  const fd = await promisify(fs.open)(tmp, 'w', 0o644).catch(async (e: unknown) => {
    await basis?.close();
    throw e;
  });
  // The verified prefix of the file is written while the rest still arrives.
  const writer = new PrefixWriter(async (from, at) => {
    let w = 0;
    while (w < from.length) w += (await fsWrite(fd, from, w, from.length - w, at + w)).bytesWritten;
  });
  let ok = false;
  try {
    const r = await dedupGet(dedupSide(c.session), remote, basis, writer.progress).catch((e: Error & { status?: number }) => {
      throw e instanceof FileError ? e : new FileError(e.status !== undefined ? statusCode(e.status) : LocalCode.ProtocolError, `get --dedup ${remote}: ${e.message}`, e.status);
    });
    try {
      await writer.finish(r.bytes);
    } finally {
      // In the file (or abandoned): its memory, maybe the local basis's, serves a later transfer.
      await writer.stop();
      // After the channel's teardown: nothing of the transfer writes to the basis any more.
      await r.closed();
      r.release();
    }
    await promisify(fs.close)(fd);
    ok = true;
    await fs.promises.rename(tmp, local);
    return { bytes: r.bytes.length, seconds: (performance.now() - t0) / 1000, transport: c.transport, dedup: r.stats };
  } finally {
    if (!ok) {
      await writer.stop();
      await promisify(fs.close)(fd).catch(() => {});
      await fs.promises.unlink(tmp).catch(() => {});
    }
  }
}

/** The local file opened as a get's basis (undefined: there is none, or it cannot be read). */
async function localBasis(local: string): Promise<BasisFile | undefined> {
  const fd = await promisify(fs.open)(local, 'r').catch(() => undefined);
  if (fd === undefined) return undefined;
  const st = await promisify(fs.fstat)(fd).catch(() => undefined);
  if (!st?.isFile()) {
    await promisify(fs.close)(fd).catch(() => {});
    return undefined;
  }
  let closed = false;
  return {
    size: st.size,
    read: async (into, length, position) => {
      let got = 0;
      while (got < length) {
        const n = (await fsRead(fd, into, got, length - got, position + got)).bytesRead;
        if (n === 0) break;
        got += n;
      }
      return got;
    },
    close: async () => {
      if (closed) return; // once: the descriptor's number may be another file's afterwards
      closed = true;
      await promisify(fs.close)(fd);
    },
  };
}

export async function getFile(c: TransferSide, remote: string, local: string, o: { onProgress?: (done: number, total: number) => void; signal: AbortSignal }): Promise<TransferResult> {
  const t0 = performance.now();
  const f = await c.open(remote);
  const tmp = `${local}.sabre-part`;
  const fd = await promisify(fs.open)(tmp, 'w', 0o644);
  let ok = false;
  try {
    const { readChunk: max, sinks } = c.pipeline();
    let done = 0;
    const chunks: Promise<void>[] = [];
    let failed: unknown;
    for (let pos = 0; pos < f.size; pos += max) {
      const len = Math.min(max, f.size - pos);
      // Leases bound what is in flight: at most `sinks` reads at once.
      const p = c.readChunk(f, pos, len, async (view, n) => {
        let w = 0;
        while (w < n) w += (await fsWrite(fd, view, w, n - w, pos + w)).bytesWritten;
        done += n;
        o.onProgress?.(done, f.size);
      }, { signal: o.signal }).then((n) => {
        if (n !== len) throw new FileError(LocalCode.ProtocolError, `get ${remote}: the file shrank while it was read`);
      }).catch((e) => {
        failed ??= e;
      });
      chunks.push(p);
      if (chunks.length >= sinks * 2) await chunks.shift();
      if (failed) break;
    }
    await Promise.all(chunks);
    if (failed) throw failed;
    await c.close(f);
    await promisify(fs.close)(fd);
    await fs.promises.rename(tmp, local);
    ok = true;
    return { bytes: f.size, seconds: (performance.now() - t0) / 1000, transport: c.transport };
  } finally {
    if (!ok) {
      await promisify(fs.close)(fd).catch(() => {});
      await fs.promises.unlink(tmp).catch(() => {});
      if (!c.session.failure && !c.session.closed) await c.close(f).catch(() => {});
    }
  }
}

/** put --dedup: the server's current version of `remote` is the basis; it is replaced whole. */
export async function putDedup(c: TransferSide, local: string, remote: string, fsync: boolean): Promise<TransferResult> {
  const t0 = performance.now();
  const fd = await promisify(fs.open)(local, 'r');
  try {
    const size = (await promisify(fs.fstat)(fd)).size;
    // Read by the sender into its staging memory, a piece at a time as it chunks (no copy of the
    // file in this process's heap).
    const source = {
      length: size,
      read: async (into: Uint8Array, at: number): Promise<number> => {
        const n = (await fsRead(fd, into, 0, into.length, at)).bytesRead;
        if (n === 0) throw new FileError('ERR_FILE_IO_ERROR', `put ${local}: the file shrank while it was read`);
        return n;
      },
    };
    const stats = await dedupPut(dedupSide(c.session), source, remote, fsync).catch((e: Error & { status?: number }) => {
      throw e instanceof FileError ? e : new FileError(e.status !== undefined ? statusCode(e.status) : LocalCode.ProtocolError, `put --dedup ${remote}: ${e.message}`, e.status);
    });
    return { bytes: size, seconds: (performance.now() - t0) / 1000, transport: c.transport, dedup: stats };
  } finally {
    await promisify(fs.close)(fd).catch(() => {});
  }
}

export async function putFile(c: TransferSide, local: string, remote: string, o: { fsync?: boolean; onProgress?: (done: number, total: number) => void; signal: AbortSignal }): Promise<TransferResult> {
  const t0 = performance.now();
  const fd = await promisify(fs.open)(local, 'r');
  try {
    const size = (await promisify(fs.fstat)(fd)).size;
    const f = await c.open(remote, { flags: 'replace', ...(o.fsync ? { fsync: true } : {}) });
    const { writeChunk: max, writeBuffers } = c.pipeline();
    let done = 0;
    let failed: unknown;
    const chunks: Promise<void>[] = [];
    for (let pos = 0; pos < size; pos += max) {
      const len = Math.min(max, size - pos);
      const p = c.writeChunk(f, pos, len, async (view) => {
        let r = 0;
        while (r < len) {
          const n = (await fsRead(fd, view, r, len - r, pos + r)).bytesRead;
          if (n === 0) throw new FileError('ERR_FILE_IO_ERROR', `put ${local}: the file shrank while it was read`);
          r += n;
        }
      }, { signal: o.signal }).then((n) => {
        done += n;
        o.onProgress?.(done, size);
      }).catch((e) => {
        failed ??= e;
      });
      chunks.push(p);
      if (chunks.length >= writeBuffers * 2) await chunks.shift();
      if (failed) break;
    }
    await Promise.all(chunks);
    if (failed) {
      // Abandon the temporary: the name keeps whatever it had.
      if (!c.session.failure) await c.close(f, { discard: true }).catch(() => {});
      throw failed;
    }
    await c.close(f);
    return { bytes: size, seconds: (performance.now() - t0) / 1000, transport: c.transport };
  } finally {
    await promisify(fs.close)(fd).catch(() => {});
  }
}

