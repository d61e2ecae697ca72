// The application's side of one QP whose NIC runs on a worker thread: a post writes one WQE
// record into the device's ring (./thread-port.ts rings the doorbell), keeps the work request
// id under a token, and reads the QP's state and retired counts from the shared control table.
import type { DeviceAddress } from '../core/address.js';
import type { QpStateValue } from '../core/enums.js';
import type { QpDownCause } from '../core/link.js';
import type { WrId } from '../core/work.js';
import { type OpcodeRow, SEND_TAKES_COMPARE_ADD, SEND_TAKES_IMM, SEND_TAKES_REMOTE, SEND_TAKES_REMOTE_LIST, SEND_TAKES_SWAP, sendFieldsTaken } from '../rdmap/opcodes.js';
import type { PortDest, PortMr, PortPiece, PortQp, PortSend } from './port.js';
import type { RecordRing } from './ring.js';
import { QP_DOWN_CAUSES, QP_FLAG_CAUSE_MASK, QP_FLAG_CAUSE_SHIFT, QP_FLAG_STANDARD_PEER, QP_WORDS, QpWord } from './thread-proto.js';
import { type RecvWqe, type SendWqe, type WqeSge, writeRecvWqe, writeSendWqe } from './wqe.js';
import { WrIdWindow } from './wr-ids.js';

/** What a ThreadQp needs of its device's port (ThreadPort). */
export interface QpHost {
  readonly control: Int32Array;
  readonly isClosing: boolean;
  /** The NIC thread takes calls (not closed, not gone). */
  readonly callable: boolean;
  /** The send and receive WQEs being posted, refilled for each. */
  readonly sendOut: SendWqe;
  readonly recvOut: RecvWqe;
  call(op: string, args?: Record<string, unknown>): any;
  /** A call that lets go of something: while the device closes, sent with the close and awaited (./thread-close.ts). */
  tearDown(op: string, args: Record<string, unknown>): void;
  post<W>(write: (ring: RecordRing, w: W) => boolean, w: W): void;
  drain(): void;
  ahId(dest: PortDest): number;
  trimLater(qp: ThreadQp): void;
  forget(qp: ThreadQp): void;
}

/** The later of two wrapping int32 counts. */
function later(a: number, b: number): number {
  return ((b - a) | 0) > 0 ? b : a;
}

/** The SGEs of a WQE from the checked pieces, reusing the list's objects. */
function fillSges(sges: WqeSge[], pieces: readonly PortPiece[]): void {
  for (let i = 0; i < pieces.length; i++) {
    const p = pieces[i]!;
    const g = (sges[i] ??= { addr: 0, length: 0, lkey: 0 });
    g.addr = p.addr;
    g.length = p.len;
    g.lkey = p.rec.stag;
  }
  sges.length = pieces.length;
}


export interface ThreadMr extends PortMr {
  /** The NIC's copy of a region over non-shared memory: sources are copied in at post, placements out at drain. */
  readonly shadow?: Uint8Array;
}

export class ThreadQp implements PortQp {
  readonly qpn: number;
  readonly slot: number;
  readonly #port: QpHost;
  readonly maxSendWr: number;
  /** The CQs its completions go to (ids in the port's CQ table): where a flush of its work goes when the NIC thread is gone. */
  readonly sendCq: number;
  readonly recvCq: number;
  sqPosted = 0;
  rqPosted = 0;
  /**
   * Retirements the application has seen in completions: a send's completion retires it and
   * every send before it (the send queue drains in order), each receive completion one receive.
   * The NIC publishes its retired counts just after it commits the completions, so a completion
   * polled in between must not leave its queue looking full (a repost would be refused).
   */
  sqSeen = 0;
  rqSeen = 0;
  /** Send work request ids by token (the send sequence number); receive ids likewise. */
  sends = new WrIdWindow();
  recvs = new WrIdWindow();
  /**
   * The id tables of its lives before a reset or destroy whose completions may still come (the
   * NIC thread held them back while the ring was full): a completion belongs to the oldest one
   * until that life's fence record (QP_FENCE_CQ) is drained — tokens start again at 0 after a
   * reset, so a late flush would otherwise name new work. `retired`: the life's last published
   * retired send count (see outstanding()).
   */
  readonly #earlier: { sends: WrIdWindow; recvs: WrIdWindow; retired: number }[] = [];

  constructor(port: QpHost, qpn: number, slot: number, maxSendWr: number, sendCq: number, recvCq: number) {
    this.#port = port;
    this.qpn = qpn;
    this.slot = slot;
    this.maxSendWr = maxSendWr;
    this.sendCq = sendCq;
    this.recvCq = recvCq;
  }

  #word(w: number): number {
    return Atomics.load(this.#port.control, this.slot * QP_WORDS + w);
  }

  get state(): QpStateValue {
    return this.#word(QpWord.state) as QpStateValue;
  }

  // Counts are int32 words that wrap: differences are taken modulo 2^32, and what was seen
  // catches up with the word at every look (each post looks), so the two never drift 2^31 apart.
  get sqLength(): number {
    this.sqSeen = later(this.#word(QpWord.sqRetired), this.sqSeen);
    return (this.sqPosted - this.sqSeen) | 0;
  }

  get rqLength(): number {
    this.rqSeen = later(this.#word(QpWord.rqRetired), this.rqSeen);
    return (this.rqPosted - this.rqSeen) | 0;
  }

  /** The work request id of a completion with `token` (undefined: none held), taken. */
  take(token: number, recv: boolean): WrId | undefined {
    const e = this.#earlier[0];
    if (e !== undefined) return recv ? e.recvs.take(token) : e.sends.takeThrough(token);
    if (recv) {
      this.sawRecv();
      return this.recvs.take(token);
    }
    this.sawSend(token);
    return this.sends.takeThrough(token);
  }

  /** A send completion with `token` was taken. */
  sawSend(token: number): void {
    this.sqSeen = later(this.sqSeen, (token + 1) | 0);
  }

  /** A receive completion was taken. */
  sawRecv(): void {
    this.rqSeen = (this.rqSeen + 1) | 0;
  }

  /** Its oldest earlier life's fence record came: every completion of that life is in. */
  fenced(): void {
    this.#earlier.shift();
  }

  /** Completions of an earlier life may still come. */
  get fencing(): boolean {
    return this.#earlier.length > 0;
  }

  /**
   * Its ids so far wait for their completions apart (see #earlier); new ones from token 0.
   * `retired`: the retired send count read before the reset or destroy was asked for (the NIC
   * zeroes it at a reset, and the slot serves another QP after a destroy).
   */
  #newLife(retired: number): void {
    this.#earlier.push({ sends: this.sends, recvs: this.recvs, retired });
    this.sends = new WrIdWindow();
    this.recvs = new WrIdWindow();
    this.sqPosted = 0;
    this.rqPosted = 0;
    this.sqSeen = 0;
    this.rqSeen = 0;
  }

  get standardPeer(): boolean {
    return (this.#word(QpWord.flags) & QP_FLAG_STANDARD_PEER) !== 0;
  }

  /** Written by the NIC thread before the completions it flushed are in the ring (./thread-nic.ts). */
  get downCause(): QpDownCause | undefined {
    const f = (this.#word(QpWord.flags) & QP_FLAG_CAUSE_MASK) >> QP_FLAG_CAUSE_SHIFT;
    return f === 0 ? undefined : QP_DOWN_CAUSES[f - 1];
  }

  #act(act: string, more: Record<string, unknown> = {}): void {
    this.#port.call('qp', { qpn: this.qpn, act, ...more });
  }

  init(): void {
    this.#act('init');
  }

  connect(peer: DeviceAddress, rqpn: number, secret?: Uint8Array, passive = false): void {
    this.#act('connect', { peer, rqpn, ...(secret ? { secret } : {}), ...(passive ? { passive } : {}) });
  }

  toError(): void {
    this.#act('toError');
  }

  /** Resets asked of the NIC thread (a qpError it sends with a lower count is from before the last). */
  resets = 0;

  reset(): void {
    const retired = this.#word(QpWord.sqRetired);
    this.resets++;
    this.#act('reset', { fence: true });
    this.#newLife(retired);
    this.#port.drain();
  }

  postSend(w: PortSend, row: OpcodeRow, pieces: PortPiece[], total: number, dest: PortDest | undefined, inline: Uint8Array | undefined): void {
    void total;
    const port = this.#port;
    const token = this.sqPosted >>> 0;
    for (const p of pieces) {
      const shadow = (p.rec as ThreadMr).shadow;
      if (shadow) shadow.set(p.rec.ext!.subarray(p.addr - p.rec.addr, p.addr - p.rec.addr + p.len), p.addr - p.rec.addr);
    }
    // One record the port reuses, written into the ring at once: no object per work request.
    const q = port.sendOut;
    q.qpn = this.qpn;
    q.token = token;
    q.opcode = w.opcode;
    q.signaled = w.signaled ?? true;
    // Only what the opcode takes (sendFieldsTaken): checked by verbs, the rest ignored.
    const takes = sendFieldsTaken(row, w.opcode, w.remoteSgList !== undefined);
    q.imm = takes & SEND_TAKES_IMM ? w.imm : undefined;
    q.remoteAddr = takes & SEND_TAKES_REMOTE ? w.remoteAddr : undefined;
    q.rkey = takes & SEND_TAKES_REMOTE ? w.rkey : undefined;
    q.remoteSges = takes & SEND_TAKES_REMOTE_LIST ? w.remoteSgList : undefined;
    q.compareAdd = takes & SEND_TAKES_COMPARE_ADD ? w.compareAdd : undefined;
    q.swap = takes & SEND_TAKES_SWAP ? w.swap : undefined;
    q.ah = dest ? port.ahId(dest) : undefined;
    q.remoteQpn = dest?.remoteQpn;
    q.inline = inline;
    fillSges(q.sges as WqeSge[], pieces);
    try {
      port.post(writeSendWqe, q);
    } finally {
      // In the ring now: the shared record keeps none of the caller's objects past the post.
      q.inline = undefined;
      q.remoteSges = undefined;
    }
    this.sends.put(token, w.wrId);
    this.sqPosted++;
    // Unsignaled sends never complete: past this many held, the NIC's retired count drops them.
    if (this.sends.span > 2 * this.maxSendWr + 64) port.trimLater(this);
  }

  postRecv(wrId: number | bigint, pieces: PortPiece[], _total: number): void {
    const token = this.rqPosted >>> 0;
    const q = this.#port.recvOut;
    q.qpn = this.qpn;
    q.token = token;
    fillSges(q.sges as WqeSge[], pieces);
    this.#port.post(writeRecvWqe, q);
    this.recvs.put(token, wrId);
    this.rqPosted++;
  }

  /** Its outstanding work, for the flushes a NIC thread that is gone cannot make; none held after. */
  outstanding(each: (cq: number, wrId: WrId, recv: boolean) => void): void {
    // Sends the NIC retired without a completion (unsignaled successes) are not outstanding: the
    // NIC publishes a retired count only once every completion of the work it retired is in the
    // ring, and the ring was drained before this flush, so an id below it still held is one
    // that never completes. An earlier life's count is the one it had when it ended.
    this.sends.dropBefore(this.#word(QpWord.sqRetired));
    for (const e of this.#earlier) e.sends.dropBefore(e.retired);
    for (const life of [...this.#earlier.splice(0), this]) {
      for (const id of life.sends.takeAll()) each(this.sendCq, id, false);
      for (const id of life.recvs.takeAll()) each(this.recvCq, id, true);
    }
  }

  destroy(deviceOpen: boolean): void {
    // The device's close takes the flushes at its end, as the inline NIC hands them over; the
    // destroy goes with the close, so a NIC thread just ended is seen gone, not waited for.
    if (this.#port.isClosing) {
      if (this.#port.callable) this.#port.tearDown('qp', { qpn: this.qpn, act: 'destroy', deviceOpen, fence: false });
      return;
    }
    let fenced = false;
    const retired = this.#word(QpWord.sqRetired);
    // A NIC thread that is gone has nothing to destroy (its work was flushed when it went).
    try {
      if (this.#port.callable) {
        this.#act('destroy', { deviceOpen, fence: true });
        fenced = true;
      }
    } catch (e) {
      // The NIC thread found gone by this call: its work is flushed as it goes.
      if (this.#port.callable) throw e;
    }
    // Its flushes come up to its fence record: the port routes them to it until then.
    if (fenced) this.#newLife(retired);
    this.#port.drain();
    this.#port.forget(this);
  }
}
