// Node stream adapters over a FileClient: a Readable of a remote file (reads pipelined, in
// order) and a Writable into a remote file (a Replace put: the name gets the whole file on
// finish, nothing on error or destroy).
import { Readable, Writable } from 'node:stream';
import type { FileClient, RemoteFile } from './client.js';

export interface RemoteReadStreamOptions {
  /** First byte (default 0). */
  start?: number;
  /** Last byte, inclusive (default: the end of the file). */
  end?: number;
  /** Bytes per read (default: the server's maxReadWriteSize). */
  chunkSize?: number;
  /** Reads in flight (default 4). */
  window?: number;
}

export function createRemoteReadStream(client: FileClient, path: string, o: RemoteReadStreamOptions = {}): Readable {
  async function* chunks(): AsyncGenerator<Uint8Array> {
    const f: RemoteFile = await client.open(path);
    const inflight: Promise<Uint8Array>[] = [];
    const asked: number[] = [];
    try {
      const chunk = Math.min(o.chunkSize ?? client.pipeline.readChunk, client.limits.maxReadWriteSize);
      const end = Math.min(o.end === undefined ? f.size : o.end + 1, f.size);
      let pos = o.start ?? 0;
      while (pos < end || inflight.length > 0) {
        while (inflight.length < (o.window ?? 4) && pos < end) {
          const len = Math.min(chunk, end - pos);
          const p = client.read(f, pos, len);
          // A later read's failure is reported when its turn comes; do not let it go unhandled.
          p.catch(() => {});
          inflight.push(p);
          asked.push(len);
          pos += chunk;
        }
        const b = await inflight.shift()!;
        if (b.length > 0) yield b;
        // A short read is the end of the file as it was then: what later reads got lies past a
        // gap (the file shrank and grew, or the server skipped bytes), so the stream ends here.
        if (b.length < asked.shift()!) break;
      }
    } finally {
      await Promise.allSettled(inflight);
      await client.close(f).catch(() => {});
    }
  }
  return Readable.from(chunks(), { objectMode: false });
}

export interface RemoteWriteStreamOptions {
  /** fsync the file before it is renamed into place. */
  fsync?: boolean;
  /** Writes in flight (default 4). */
  window?: number;
}

export function createRemoteWriteStream(client: FileClient, path: string, o: RemoteWriteStreamOptions = {}): Writable {
  let f: RemoteFile | undefined;
  let pos = 0;
  const inflight = new Set<Promise<number>>();
  let failed: Error | undefined;
  const window = o.window ?? 4;
  return new Writable({
    construct(cb) {
      client.open(path, { flags: 'replace', ...(o.fsync ? { fsync: true } : {}) }).then((x) => {
        f = x;
        cb();
      }, cb);
    },
    write(chunk: Buffer, _enc, cb) {
      if (failed) return cb(failed);
      const data = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      const p = client.write(f!, pos, data);
      pos += data.length;
      inflight.add(p);
      p.then(() => inflight.delete(p), (e: Error) => {
        inflight.delete(p);
        failed ??= e;
      });
      if (inflight.size < window) return cb();
      Promise.race(inflight).then(() => cb(failed), () => cb(failed));
    },
    final(cb) {
      Promise.allSettled([...inflight]).then(() => {
        if (failed) return cb(failed);
        client.close(f!).then(() => cb(), cb);
      }, cb);
    },
    destroy(err, cb) {
      if (!f || (!err && !failed && inflight.size === 0 && this.writableFinished)) return cb(err);
      // Abandoned: the temporary file goes, the name is left as it was.
      Promise.allSettled([...inflight]).then(() => client.close(f!, { discard: true })).then(() => cb(err), () => cb(err));
    },
  });
}
