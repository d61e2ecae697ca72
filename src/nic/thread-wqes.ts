// The NIC thread's intake of WQE records (./thread-nic.ts): each record the WQE ring holds is
// checked, then handed to the engine as a post. The ring is a SharedArrayBuffer the application's
// code can reach, and the application's library code checked every post already, so nothing here
// trusts a record: counts that run past the record, an unknown kind, QP or opcode, an lkey that
// names no region of the QP's PD, a segment outside its region, a sink without LocalWrite, more
// SGEs than the QP's maxSge, an srd send whose address handle this thread does not know. Such a
// record is dropped and counted (dev.stats().nic.badWqes): an error completion would need a
// work request id, and a token the application's thread never gave out is not one (its window
// of ids would take it for a later one). Nothing a record says reaches the engine unchecked, and
// a throw on its way (a bug) is a counted drop too, never a throw out of the NIC thread's turn
// (that would end the thread: device-fatal).
import { Access } from '../core/enums.js';
import { rowForWr } from '../rdmap/opcodes.js';
import { copyBytes } from '../core/bytes.js';
import type { InlinePort } from './inline-port.js';
import type { PortDest, PortPiece, PortQp, PortSend } from './port.js';
import type { RecordRing } from './ring.js';
import { readRecvWqe, readSendWqe, recordKind, recvWqeFits, type RecvWqe, sendWqeFits, type SendWqe, WQE_KIND_RECV, WQE_KIND_SEND, type WqeSge } from './wqe.js';

/**
 * WQE records the NIC thread's ring watch takes in one turn of its event loop. The application
 * posts tens of thousands at once (a loop of postSend): taken in one step, with the frames they
 * make packed and sent, the thread read no input for a third of a second, about a second on a
 * loaded machine — and the peer's answers, unread, fed this device's own requester watchdogs,
 * which took the silence for the peer's (test/nic/place-records). A turn of this many is a few
 * milliseconds; the next starts after the input that came meanwhile.
 */
export const WQES_PER_TURN = 1024;

/** The largest message a work request may name (verbs: 2^32 - 1 bytes). */
const MAX_MSG = 0xffff_ffff;

export interface QpEntry {
  pq: PortQp;
  slot: number;
  /** What its records are checked against: its PD, its type, its caps' maxSge. */
  pd: number;
  srd: boolean;
  maxSge: number;
  /** Send / receive WQEs handed to the engine (their tokens are these counts at the time). */
  sqTaken: number;
  rqTaken: number;
  /** Resets done here: its qpError events carry the count (ThreadQp.resets tells a stale one). */
  resets: number;
  /** On the list of QPs whose words the next publish writes (#dirty). */
  dirty: boolean;
  /** Destroyed: its slot may be another QP's next, so its words are never written again. */
  gone?: boolean;
  /** Connected: the key of its peer in NicThread.#peers. */
  peerKey: string | undefined;
}

/** An address handle as this thread knows it (the application's thread tells it, by id). */
export type NicAh = Omit<PortDest, 'remoteQpn'>;

export class WqeIntake {
  /** Records dropped as malformed (dev.stats().nic.badWqes). */
  bad = 0;
  readonly #port: InlinePort;
  readonly #qps: ReadonlyMap<number, QpEntry>;
  readonly #ahs: { get(id: number): NicAh | undefined };
  /** The WQE being taken, decoded in place of a new object per record. */
  readonly #sendIn: SendWqe = { qpn: 0, token: 0, opcode: 0, signaled: false, sges: [] };
  readonly #recvIn: RecvWqe = { qpn: 0, token: 0, sges: [] };

  constructor(port: InlinePort, qps: ReadonlyMap<number, QpEntry>, ahs: { get(id: number): NicAh | undefined }) {
    this.#port = port;
    this.#qps = qps;
    this.#ahs = ahs;
  }

  /**
   * What `ring` holds, at most `max` records, in one driver step; true when records are left
   * (the caller takes them in a later turn of the event loop, after the input that came meanwhile).
   */
  take(ring: RecordRing, max = Infinity): boolean {
    if (ring.peek() < 0) return false;
    let n = 0;
    this.#port.batch(() => {
      for (let off = ring.peek(); off >= 0 && n < max; off = ring.peek(), n++) {
        try {
          const kind = recordKind(ring.dv, off);
          const ok = kind === WQE_KIND_SEND ? this.#postSend(ring, off) : kind === WQE_KIND_RECV && this.#postRecv(ring, off);
          if (!ok) this.bad++;
        } catch {
          this.bad++;
        }
        ring.advance();
      }
    });
    return ring.peek() >= 0;
  }

  /** The pieces of `sges` for a QP of PD `pd`, each inside a region of that PD (with LocalWrite for a sink); undefined when one is not. */
  #pieces(sges: readonly WqeSge[], pd: number, sink: boolean): { pieces: PortPiece[]; total: number } | undefined {
    const pieces: PortPiece[] = [];
    let total = 0;
    const memory = this.#port.memory;
    for (const s of sges) {
      const rec = memory.lookup(s.lkey);
      if (rec === undefined || rec.pd !== pd || (sink && (rec.access & Access.LocalWrite) === 0)) return undefined;
      if (!(s.addr >= rec.addr) || s.addr - rec.addr > rec.length || s.length > rec.length - (s.addr - rec.addr)) return undefined;
      pieces.push({ rec, addr: s.addr, len: s.length });
      total += s.length;
    }
    return total <= MAX_MSG ? { pieces, total } : undefined;
  }

  #postSend(ring: RecordRing, off: number): boolean {
    if (!sendWqeFits(ring.dv, off, ring.peekLength())) return false;
    // Decoded into one reused record: the engine copies what it keeps (newSendWork).
    const w = readSendWqe(ring.dv, off, this.#sendIn);
    const e = this.#qps.get(w.qpn);
    const row = rowForWr(w.opcode);
    if (e === undefined || row === undefined || w.sges.length > e.maxSge || (w.remoteSges?.length ?? 0) > e.maxSge) return false;
    const p = this.#pieces(w.sges, e.pd, row.source !== true);
    if (p === undefined) return false;
    let dest: PortDest | undefined;
    if (e.srd) {
      const ah = w.ah === undefined ? undefined : this.#ahs.get(w.ah);
      if (ah === undefined) return false;
      dest = { address: ah.address, key: ah.key, remoteQpn: w.remoteQpn ?? 0 };
    }
    const wr: PortSend = {
      wrId: w.token, opcode: w.opcode as never, signaled: w.signaled, imm: w.imm, remoteAddr: w.remoteAddr, rkey: w.rkey,
      remoteSgList: w.remoteSges, compareAdd: w.compareAdd, swap: w.swap,
    };
    e.pq.postSend(wr, row, p.pieces, p.total, dest, w.inline ? copyBytes(w.inline) : undefined);
    e.sqTaken++;
    return true;
  }

  #postRecv(ring: RecordRing, off: number): boolean {
    if (!recvWqeFits(ring.dv, off, ring.peekLength())) return false;
    const r = readRecvWqe(ring.dv, off, this.#recvIn);
    const e = this.#qps.get(r.qpn);
    if (e === undefined || r.sges.length > e.maxSge) return false;
    const p = this.#pieces(r.sges, e.pd, true);
    if (p === undefined) return false;
    e.pq.postRecv(r.token, p.pieces, p.total);
    e.rqTaken++;
    return true;
  }
}
