// The old version of a file read whole as a dedup basis (./dedup.ts): a piece at a time, ahead of
// the chunk store's fill, into device memory where there is room (chunked where it lies) or a
// kept buffer (../dedup/buffers.ts).
import { giveBack, takeBuffer } from '../dedup/buffers.js';
import type { FillSource } from '../dedup/store.js';
import type { DedupMemory } from '../dedup/types.js';
import type { JailFile } from './jail.js';

/** Bytes of a basis read per call while it is ingested (each piece is ingested as the next is read). */
const BASIS_PIECE = 4 << 20;
/**
 * Largest basis read into device memory, where it is chunked in place (no copy through the
 * store's scratch); a larger one, or one device memory has no room for, is read into ordinary
 * memory. Device memory is every channel's of the device: a put does not take more than this.
 */
const DEVICE_BASIS_MAX = 64 << 20;

/** A file read whole as a basis: its size when opened, positional reads, its close. */
export interface BasisFile {
  readonly size: number;
  /** Up to `length` bytes at `position` into `into` (short only at end of file). */
  read(into: Uint8Array, length: number, position: number): Promise<number>;
  close(): Promise<unknown>;
}

export const basisOf = (f: JailFile): BasisFile => ({ size: f.size, read: (into, length, position) => f.read(into, length, position), close: () => f.close(false) });

/**
 * Read an opened file whole as a FillSource (at most the size it had when opened), a piece at a
 * time and ahead of the store: the next piece is being read while the store ingests the last.
 * The file is closed when the reading ends or fails, or once stop() has been called (its promise
 * settles when no read is in flight any more: then `bytes` is the caller's again).
 */
export function readPieces(f: BasisFile, mem?: DedupMemory): { source: FillSource; stop(): Promise<void>; release(): void } {
  let addr: number | undefined;
  if (mem && f.size > 0 && f.size <= DEVICE_BASIS_MAX) {
    try {
      addr = mem.alloc(f.size);
    } catch {
      addr = undefined; // no room: ordinary memory
    }
  }
  const bytes = addr !== undefined ? mem!.u8().subarray(addr, addr + f.size) : takeBuffer(f.size);
  let at = 0;
  let done = false;
  let stopped = false;
  let failed: unknown;
  let wake: (() => void) | undefined;
  const reading = (async () => {
    try {
      while (at < bytes.length && !stopped) {
        const n = await f.read(bytes.subarray(at), Math.min(BASIS_PIECE, bytes.length - at), at);
        if (n === 0) break; // it shrank meanwhile: what is there is the basis
        at += n;
        wake?.();
      }
    } catch (e) {
      failed = e;
    } finally {
      done = true;
      await f.close().catch(() => undefined);
      wake?.();
    }
  })();
  const stop = (): Promise<void> => {
    stopped = true;
    return reading;
  };
  async function* progress(): AsyncGenerator<number> {
    let seen = 0;
    try {
      for (;;) {
        if (at > seen) yield (seen = at);
        else if (done) {
          if (failed) throw failed;
          return;
        } else await new Promise<void>((r) => (wake = r));
      }
    } finally {
      await stop();
    }
  }
  /** Once stopped and out of the store: the memory serves a later transfer. */
  const release = (): void => {
    if (addr !== undefined) mem!.free(addr);
    else giveBack(bytes);
  };
  return { source: { bytes, progress: progress(), readDone: () => done, ...(addr !== undefined ? { addr } : {}) }, stop, release };
}

