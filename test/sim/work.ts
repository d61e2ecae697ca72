// Work as the verbs layer hands it to the engine, and a completion queue that keeps what it is
// offered: the shapes every simulated test posts and collects (the verbs checks on them are
// tested elsewhere).
import { Access } from '../../src/core/enums.js';
import type { WorkCompletion } from '../../src/core/work.js';
import type { MrRecord } from '../../src/rdmap/memory.js';
import { rowForWr } from '../../src/rdmap/opcodes.js';
import { newRecvWork, newSendWork, type Piece, type QpCaps, type RecvWork, type SendWork } from '../../src/rdmap/state.js';
import type { SendWr } from '../../src/verbs/types.js';

export const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic;

export const caps = (o: Partial<QpCaps> = {}): QpCaps => ({
  maxSendWr: 4096, maxRecvWr: 4096, maxSge: 16, maxInline: 0, rnrRetry: 7, rnrTimeoutMs: 1, maxRdAtomic: 16, timeoutMs: 8000, ...o,
});

/** A completion queue: keeps every completion, or refuses past `depth` (an overflow test). */
export class Sink {
  wcs: WorkCompletion[] = [];
  depth = Infinity;
  offer(wc: WorkCompletion): boolean {
    if (this.wcs.length >= this.depth) return false;
    this.wcs.push(wc);
    return true;
  }
  take(): WorkCompletion[] {
    const w = this.wcs;
    this.wcs = [];
    return w;
  }
}

/** `len` bytes of region `r` from offset `off`, as one scatter/gather element. */
export const piece = (r: MrRecord, off: number, len: number): Piece => ({ rec: r, addr: r.addr + off, len });

/** A send work request as QueuePair.postSend would copy it. */
export function wr(w: SendWr, pieces: Piece[]): SendWork {
  const total = pieces.reduce((s, p) => s + p.len, 0);
  return newSendWork(w, rowForWr(w.opcode)!, pieces, total);
}

/** A receive as the verbs layer hands it over (one segment kept as the piece itself: newRecvWork). */
export const recv = (wrId: number, pieces: Piece[]): RecvWork => newRecvWork(wrId, pieces, pieces.reduce((s, p) => s + p.len, 0));
