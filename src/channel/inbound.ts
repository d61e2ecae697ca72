// This end as a receiver: its eager slots and their phases (M2), the fence that retires an old
// epoch, the reorder window, rendezvous reads, and the credits it owes the sender.
//
// Epochs. The slots the sender may write are those of exactly one epoch, `cur`. An epoch
// change (enlargement on request, shrink after idle) registers the new phase first (`pending`),
// posts receives for it and sends GRANT; the sender keeps writing `cur` — elements that fit go
// eagerly while the enlargement is under way (the seed's fig. 5) — until it posts SWITCH, after
// which it writes only the new epoch. rc delivers in posting order, so when SWITCH arrives every
// write of the old epoch has landed: its slots are deregistered right then (the count in SWITCH
// must match). A data message naming any epoch but `cur` is refused, never placed elsewhere:
// before SWITCH the new slots are not writable yet, after it the old region's rkey is gone.
//
// Messages are copied out of their slot (and decoded by the shell later) when their completion
// arrives, so a slot is free at once and its credit returns with the next control message; the
// application's pace is enforced by the window instead: the sender may not run more than
// `window` messages past the position the application has taken (reported as `consumed`).
import { CHAN_EPOCH_MOD, CHAN_SEQ_MOD, ChanType } from '../wire/channel-spec.js';
import { type CtrlEntry, type Link, WrKind } from './link.js';
import type { Delivered, Outcome, Region } from './ports.js';
import { type Grant, type ImmFields, unpackRecords } from './wire.js';

export interface RxEpoch {
  /** mod CHAN_EPOCH_MOD */
  epoch: number;
  phase: number;
  region: Region;
  /** Where the slots start in region (phase 0's slots lie in the core's fixed region, which the epoch does not deregister). */
  off: number;
  slots: number;
  slotSize: number;
  /** Slot the next data message must name. */
  next: number;
  /** Data messages received in this epoch. */
  received: number;
  /** Slot credits reported back for this epoch. */
  reported: number;
}

interface Entry {
  state: 'ready' | 'offered' | 'reading';
  value: boolean;
  len: number;
  bytes?: Uint8Array;
  addr?: number;
  rkey?: number;
  /** Its bytes are held against the shared rendezvous budgets (ports.holdRendezvous) until taken. */
  held?: boolean;
}

export interface InboundStats {
  phase: number;
  epoch: number;
  eagerSize: number;
  slots: number;
  enlargements: number;
  shrinks: number;
  deniedEnlargements: number;
  messagesReceived: number;
  bytesReceived: number;
  rendezvousReceived: number;
  buffered: number;
  bufferedBytes: number;
  readsInFlight: number;
  /** Offers that waited because the peer's or the device's rendezvous budget was spent. */
  rendezvousWaits: number;
  /** Rendezvous reads that went rendezvousReadTimeoutMs without one completing (the channel failed). */
  rendezvousReadTimeouts: number;
}

/** What an Inbound counts for stats(). */
class InTally {
  enlargements = 0;
  shrinks = 0;
  deniedEnlargements = 0;
  messagesReceived = 0;
  bytesReceived = 0;
  rendezvousReceived = 0;
  rendezvousWaits = 0;
  rendezvousReadTimeouts = 0;
}

/** The counts of every Inbound that has counted nothing yet: shared, never written. */
const NO_COUNTS: Readonly<InTally> = new InTally();

/** Phase-0 slot credits a HELLO grants; the first epoch's other slots are withheld until its first message. */
export const IDLE_SLOT_CREDITS = 2;

export class Inbound {
  readonly #l: Link;
  cur: RxEpoch;
  /** Granted, not yet fenced by SWITCH. */
  pending: RxEpoch | undefined;
  /** Largest need of an ENLARGE that arrived while an epoch change was under way. */
  #pendingNeed = 0;
  /** Until SWITCH fences a granted epoch (undefined while none is granted). */
  #grantDeadline: number | undefined = undefined;
  #lastDataAt: number;
  /** Messages arrived and not yet taken, by seq (made on the first message: idle channels have none). */
  #inbox: Map<number, Entry> | undefined;
  /** Seq of the next message the application takes. */
  consumed = 0;
  /** `consumed` as last reported to the sender. */
  #reported = 0;
  bufferedBytes = 0;
  /** Offers waiting for a read, by seq (kept sorted: the oldest is read first). Made on the first OFFER, as #reads on the first read: an idle channel holds neither. */
  #readQ: number[] | undefined;
  /**
   * Rendezvous reads in flight (at most maxReads). `at`: when it was posted, or when another read
   * last completed if later — the read deadline counts from the last progress, so a queue of
   * reads that keeps completing never fires it (kept on the reads: an idle channel holds no field for it).
   */
  #reads: { wrId: number; seq: number; sink: Region; at: number }[] | undefined;
  /** Seq after the last message (peer CLOSE). */
  endAt: number | undefined;
  /** Counts for stats(), made at the first count: an idle channel holds none. */
  #tally: InTally | undefined;
  /** The head of the read queue is waiting for budget (counted once per wait). */
  #waitingBudget = false;
  /**
   * Slot credits of the first epoch withheld (receives not posted) while the peer has sent no
   * data: counted as reported already (cur.reported starts below 0 by them), owed from the first
   * message on. 0 after it, and after the first epoch ends.
   */
  #held: number;

  /** The first epoch's slots (phase 0's) lie in the core's fixed region, at l.slots0Off: every phase-0 epoch uses them (one is live at a time). */
  constructor(l: Link, now: number) {
    this.#l = l;
    const p0 = l.o.ladder[0]!;
    this.#held = Math.max(0, p0.slots - IDLE_SLOT_CREDITS);
    this.cur = { epoch: 0, phase: 0, region: l.fixed, off: l.slots0Off, slots: p0.slots, slotSize: p0.slotSize, next: 0, received: 0, reported: -this.#held };
    this.#lastDataAt = now;
  }

  /** Receives the sender may consume with data messages right now. */
  get liveSlots(): number {
    return this.cur.slots - this.#held + (this.pending?.slots ?? 0);
  }

  get registeredBytes(): number {
    let n = this.#own(this.cur) + (this.pending ? this.#own(this.pending) : 0);
    for (const r of this.#reads ?? []) n += r.sink.length;
    return n;
  }

  /** Bytes an epoch registered itself (the fixed region's are the core's). */
  #own(e: RxEpoch): number {
    return e.region === this.#l.fixed ? 0 : e.region.length;
  }

  /** Deregister an epoch's slots, unless they are the fixed region's. */
  #release(e: RxEpoch): void {
    if (e.region !== this.#l.fixed) this.#l.ports.dereg(e.region);
  }

  /** The epoch-0 grant for HELLO. */
  helloGrant(): Grant {
    const c = this.cur;
    return { epoch: c.epoch, slots: c.slots, slotSize: c.slotSize, addr: c.region.addr + c.off, rkey: c.region.rkey, phase: c.phase };
  }

  // ---- credits owed to the sender -----------------------------------------------------------

  /** The slot credits the HELLO grants. */
  helloCredits(): number {
    return this.cur.slots - this.#held;
  }

  /** Slot credits not yet reported for `cur` (withheld ones are not due before the first message). */
  get owedSlots(): number {
    return this.cur.received - this.cur.reported - this.#held;
  }

  get owedWindow(): number {
    return this.consumed - this.#reported;
  }

  /** A credit-only message is worth sending (the sender may be about to stall). */
  get creditDue(): boolean {
    return this.owedSlots >= Math.ceil(this.cur.slots / 2) || this.owedWindow >= Math.ceil(this.#l.o.window / 2);
  }

  /** Header fields for the next control message; marks them reported. */
  takeCredits(): { epoch: number; slotCredits: number; consumed: number } {
    const n = Math.min(this.owedSlots, 0xffff);
    this.cur.reported += n;
    this.#reported = this.consumed;
    return { epoch: this.cur.epoch, slotCredits: n, consumed: this.consumed % CHAN_SEQ_MOD };
  }

  // ---- data ---------------------------------------------------------------------------------

  /** Full seq of a 16-bit one, if it lies in the window and is new. */
  #seqOf(seq16: number): number | undefined {
    const full = this.consumed + ((seq16 - this.consumed) & (CHAN_SEQ_MOD - 1));
    if (full - this.consumed >= this.#l.o.window) return undefined;
    if (this.#inbox?.has(full)) return undefined;
    if (this.endAt !== undefined && full >= this.endAt) return undefined;
    return full;
  }

  onData(f: ImmFields, byteLen: number, now: number): void {
    const e = this.cur;
    const l = this.#l;
    if (f.epoch !== e.epoch) {
      return l.fail('protocol', `data message for epoch ${f.epoch}, the live epoch is ${e.epoch}${this.pending ? ` (epoch ${this.pending.epoch} granted, not yet fenced)` : ''}: refused`);
    }
    if (f.slot !== e.next) return l.fail('protocol', `data message in slot ${f.slot}, the next slot is ${e.next}`);
    if (byteLen > e.slotSize) return l.fail('protocol', `data message of ${byteLen} bytes in ${e.slotSize}-byte slots`);
    if (e.received + 1 > e.reported + e.slots) return l.fail('protocol', 'data message without a slot credit');
    const bytes = l.ports.read(e.region, e.off + f.slot * e.slotSize, byteLen);
    let msgs: { bytes: Uint8Array; value: boolean }[];
    if (f.packed) {
      const r = unpackRecords(bytes);
      if (typeof r === 'string') return l.fail('protocol', `packed data message: ${r}`);
      msgs = r;
    } else msgs = [{ bytes, value: f.value }];
    if (l.preauthMax > 0) {
      for (const m of msgs) {
        if (m.bytes.length > l.preauthMax) return l.refuse(`a ${m.bytes.length}-byte message before authorization (preauth.maxMessage ${l.preauthMax})`);
      }
    }
    // Every seq is checked before any is taken: a bad record refuses the whole write.
    const seqs: number[] = [];
    for (let k = 0; k < msgs.length; k++) {
      const seq = this.#seqOf((f.seq + k) % CHAN_SEQ_MOD);
      if (seq === undefined) return l.fail('protocol', `data message seq ${(f.seq + k) % CHAN_SEQ_MOD} outside the window [${this.consumed % CHAN_SEQ_MOD}, +${l.o.window}) or repeated`);
      seqs.push(seq);
    }
    e.next = (e.next + 1) % e.slots;
    e.received++;
    // The peer has started sending: the withheld slots' receives are posted by the core's
    // refill after this, before the credits go back.
    this.#held = 0;
    this.#lastDataAt = now;
    const inbox = (this.#inbox ??= new Map());
    const t = this.#count();
    for (let k = 0; k < msgs.length; k++) {
      const m = msgs[k]!;
      inbox.set(seqs[k]!, { state: 'ready', value: m.value, len: m.bytes.length, bytes: m.bytes });
      this.bufferedBytes += m.bytes.length;
      t.bytesReceived += m.bytes.length;
    }
    t.messagesReceived += msgs.length;
    if (seqs[0] === this.consumed) l.emit({ kind: 'readable' });
  }

  get hasReady(): boolean {
    return this.#inbox?.get(this.consumed)?.state === 'ready';
  }

  get ended(): boolean {
    return this.endAt !== undefined && this.consumed >= this.endAt;
  }

  get buffered(): number {
    return this.#inbox?.size ?? 0;
  }

  /** The next message in order without taking it. */
  peek(): Delivered | undefined {
    const e = this.#inbox?.get(this.consumed);
    return e && e.state === 'ready' ? { bytes: e.bytes!, value: e.value } : undefined;
  }

  take(): Delivered | undefined {
    const e = this.#inbox?.get(this.consumed);
    if (!e || e.state !== 'ready') return undefined;
    this.#inbox!.delete(this.consumed);
    this.consumed++;
    this.bufferedBytes -= e.len;
    if (e.held) this.#l.ports.releaseRendezvous?.(e.len);
    return { bytes: e.bytes!, value: e.value };
  }

  // ---- phases -------------------------------------------------------------------------------

  /** Smallest phase whose slots hold `need` bytes (need <= the largest slot size). */
  #phaseFor(need: number): number {
    const ladder = this.#l.o.ladder;
    for (let p = 0; p < ladder.length; p++) if (ladder[p]!.slotSize >= need) return p;
    return ladder.length - 1;
  }

  onEnlarge(need: number, epoch: number, now: number): void {
    const l = this.#l;
    const maxEager = l.o.ladder[l.o.ladder.length - 1]!.slotSize;
    if (need === 0 || need > maxEager) return l.fail('protocol', `ENLARGE for ${need} bytes (largest slot is ${maxEager})`);
    if (epoch !== this.cur.epoch) return l.fail('protocol', `ENLARGE names epoch ${epoch}, the live epoch is ${this.cur.epoch}`);
    this.#lastDataAt = now;
    if (this.pending) {
      this.#pendingNeed = Math.max(this.#pendingNeed, need);
      return;
    }
    this.#need(need, now);
  }

  #need(need: number, now: number): void {
    const l = this.#l;
    if (l.preauthMax > 0 && need > Math.max(l.preauthMax, l.o.ladder[0]!.slotSize)) {
      // Before authorization no slots beyond preauth.maxMessage: denied, as with no memory. A
      // backlog of small messages goes on in the slots there are; a message this big comes as
      // an OFFER next, which is refused.
      this.#count().deniedEnlargements++;
      l.queueCtrl({ make: () => ({ type: ChanType.Grant, grant: undefined }) });
      return;
    }
    const p = this.#phaseFor(need);
    // Already big enough: an ENLARGE that crossed our GRANT. Nothing to do. (An epoch granted
    // before authorization may be smaller than its phase: the size decides too.)
    if (p <= this.cur.phase && need <= this.cur.slotSize) return;
    this.#grant(p, now, true);
  }

  #grant(p: number, now: number, asked: boolean): void {
    const l = this.#l;
    let ph = l.o.ladder[p]!;
    if (l.preauthMax > 0 && p > 0) {
      // Before authorization the peer's messages are small (preauth.maxMessage): slots just
      // big enough for one, and no more of them than phase 0's bytes hold (at least one).
      const p0 = l.o.ladder[0]!;
      const slotSize = Math.min(ph.slotSize, Math.max(l.preauthMax, p0.slotSize));
      ph = { slotSize, slots: Math.max(1, Math.min(ph.slots, Math.floor((p0.slots * p0.slotSize) / slotSize))) };
    }
    // Back to phase 0 (a shrink): its slots in the fixed region, free since the last phase-0
    // epoch was fenced — no registration, so a shrink can never fail for want of memory.
    const shared = p === 0;
    const region = shared ? l.fixed : l.ports.reg(ph.slots * ph.slotSize, 'eager');
    if (!region) {
      if (asked) {
        // No memory for bigger slots: say so, and the sender sends those messages by rendezvous.
        this.#count().deniedEnlargements++;
        l.queueCtrl({ make: () => ({ type: ChanType.Grant, grant: undefined }) });
      } else this.#lastDataAt = now;
      return;
    }
    const epoch = (this.cur.epoch + 1) % CHAN_EPOCH_MOD;
    const off = shared ? l.slots0Off : 0;
    this.pending = { epoch, phase: p, region, off, slots: ph.slots, slotSize: ph.slotSize, next: 0, received: 0, reported: 0 };
    // Receives for the new slots go in before the GRANT can be read (actions run in order).
    l.refill();
    const grant: Grant = { epoch, slots: ph.slots, slotSize: ph.slotSize, addr: region.addr + off, rkey: region.rkey, phase: p };
    l.queueCtrl({ make: () => ({ type: ChanType.Grant, grant }) });
    this.#grantDeadline = now + l.o.timeoutMs;
  }

  onSwitch(epoch: number, count: number, now: number): void {
    const l = this.#l;
    const next = this.pending;
    if (!next || epoch !== next.epoch) return l.fail('protocol', `SWITCH to epoch ${epoch} that was not granted`);
    if (count !== this.cur.received >>> 0) {
      return l.fail('protocol', `SWITCH says ${count} messages were written in epoch ${this.cur.epoch}, ${this.cur.received} arrived`);
    }
    const old = this.cur;
    this.#release(old);
    this.#held = 0;
    this.cur = next;
    this.pending = undefined;
    this.#grantDeadline = undefined;
    if (next.phase > old.phase) this.#count().enlargements++;
    else this.#count().shrinks++;
    this.#lastDataAt = now;
    const need = this.#pendingNeed;
    this.#pendingNeed = 0;
    if (need > 0) this.#need(need, now);
  }

  // ---- rendezvous ---------------------------------------------------------------------------

  onOffer(seq16: number, length: number, addr: number, rkey: number, value: boolean, now: number): void {
    const l = this.#l;
    const seq = this.#seqOf(seq16);
    if (seq === undefined) return l.fail('protocol', `OFFER seq ${seq16} outside the window or repeated`);
    if (l.preauthMax > 0) return l.refuse(`an OFFER (rendezvous, ${length} bytes) before authorization`);
    if (length > l.o.maxMessage) return l.fail('protocol', `OFFER of ${length} bytes, more than maxMessage ${l.o.maxMessage}`);
    (this.#inbox ??= new Map()).set(seq, { state: 'offered', value, len: length, addr, rkey });
    const q = (this.#readQ ??= []);
    let i = q.length;
    while (i > 0 && q[i - 1]! > seq) i--;
    q.splice(i, 0, seq);
    this.pumpReads(now);
  }

  pumpReads(now: number): void {
    const l = this.#l;
    const q = this.#readQ;
    if (q === undefined) return;
    const reads = (this.#reads ??= []);
    // (releaseMemory drops the lists: a teardown during the loop ends it.)
    while (l.live && this.#readQ === q && reads.length < l.o.maxReads && q.length > 0) {
      const seq = q[0]!;
      const e = this.#inbox!.get(seq)!;
      // The message the application waits for is always read; others wait for room.
      if (seq !== this.consumed && this.bufferedBytes + e.len > l.o.maxBufferedBytes) return;
      if (e.len === 0) {
        q.shift();
        this.#ready(seq, e, new Uint8Array(0));
        continue;
      }
      // The budgets shared with the peer's and the device's other channels: the read waits
      // (holding nothing) until one of them releases bytes; the sender's DONE deadline bounds it.
      const hold = l.ports.holdRendezvous;
      if (hold && !hold.call(l.ports, e.len)) {
        if (!this.#waitingBudget) this.#count().rendezvousWaits++;
        this.#waitingBudget = true;
        return;
      }
      this.#waitingBudget = false;
      const sink = l.ports.reg(e.len, 'sink');
      if (!sink) {
        l.ports.releaseRendezvous?.(e.len);
        if (seq === this.consumed && reads.length === 0) l.fail('memory', `no device memory for a ${e.len}-byte rendezvous message`);
        return;
      }
      e.held = hold !== undefined;
      q.shift();
      e.state = 'reading';
      this.bufferedBytes += e.len;
      const wrId = l.newWr(WrKind.Read);
      reads.push({ wrId, seq, sink, at: now });
      l.emit({ kind: 'read', wrId, local: { region: sink, off: 0, len: e.len }, remoteAddr: e.addr!, rkey: e.rkey! });
    }
  }

  onReadDone(wrId: number, r: Outcome, now: number): void {
    const l = this.#l;
    const reads = this.#reads;
    const i = reads ? reads.findIndex((x) => x.wrId === wrId) : -1;
    if (i < 0) return;
    const rd = reads![i]!;
    reads!.splice(i, 1);
    const e = this.#inbox!.get(rd.seq)!;
    if (!r.ok) {
      l.ports.dereg(rd.sink);
      if (r.why === 'remote') return l.fail('protocol', `the peer's OFFER for seq ${rd.seq % CHAN_SEQ_MOD} named memory it does not expose (${r.status})`);
      return l.fail(r.why === 'flush' ? 'closed' : 'link', `rendezvous read failed: ${r.status}`);
    }
    const bytes = l.ports.read(rd.sink, 0, e.len);
    l.ports.dereg(rd.sink);
    this.bufferedBytes -= e.len; // #ready counts it again
    // Progress: the reads still in flight count their deadline from here.
    for (const x of reads!) x.at = Math.max(x.at, now);
    this.#ready(rd.seq, e, bytes);
    this.pumpReads(now);
  }

  #ready(seq: number, e: Entry, bytes: Uint8Array): void {
    const l = this.#l;
    e.state = 'ready';
    e.bytes = bytes;
    this.bufferedBytes += e.len;
    const t = this.#count();
    t.messagesReceived++;
    t.bytesReceived += e.len;
    t.rendezvousReceived++;
    const seq16 = seq % CHAN_SEQ_MOD;
    const entry: CtrlEntry = { make: () => ({ type: ChanType.Done, seq: seq16 }) };
    l.queueCtrl(entry);
    if (seq === this.consumed) l.emit({ kind: 'readable' });
  }

  // ---- close, time, teardown ----------------------------------------------------------------

  onClose(next16: number): void {
    const l = this.#l;
    const full = this.consumed + ((next16 - this.consumed) & (CHAN_SEQ_MOD - 1));
    if (full - this.consumed > l.o.window) return l.fail('protocol', `CLOSE names seq ${next16}, outside the window`);
    for (const seq of this.#inbox?.keys() ?? []) if (seq >= full) return l.fail('protocol', `CLOSE before seq ${next16} but seq ${seq % CHAN_SEQ_MOD} arrived`);
    for (let s = this.consumed; s < full; s++) {
      const e = this.#inbox?.get(s);
      if (!e || e.state !== 'ready') return l.fail('protocol', `CLOSE before seq ${next16} with seq ${s % CHAN_SEQ_MOD} not delivered`);
    }
    this.endAt = full;
  }

  tick(now: number): void {
    const l = this.#l;
    const rd = this.#readDeadline();
    if (rd !== undefined && now >= rd) {
      // The peer has not answered a read (it may go on talking: the verbs watchdog would not end
      // this). Failing releases the sinks and their budget (releaseMemory) and tells the peer.
      const r = this.#reads![0]!;
      this.#count().rendezvousReadTimeouts++;
      return l.fail('timeout', `a rendezvous read (seq ${r.seq % CHAN_SEQ_MOD}, ${r.sink.length} bytes) went ${l.o.rendezvousReadTimeoutMs} ms without completing: the peer has not answered it`);
    }
    if (this.pending) {
      if (this.#grantDeadline !== undefined && now >= this.#grantDeadline) l.fail('timeout', `the peer did not fence epoch ${this.cur.epoch} (SWITCH) within ${l.o.timeoutMs} ms of the GRANT`);
      return;
    }
    // Same expression as deadline(): the clock reaching it must fire it (no float round-off).
    if (this.cur.phase > 0 && l.o.shrinkAfterMs > 0 && now >= this.#lastDataAt + l.o.shrinkAfterMs) this.#grant(0, now, false);
  }

  deadline(): number | undefined {
    const rd = this.#readDeadline();
    let d: number | undefined;
    if (this.pending) d = this.#grantDeadline;
    else if (this.cur.phase > 0 && this.#l.o.shrinkAfterMs > 0) d = this.#lastDataAt + this.#l.o.shrinkAfterMs;
    return rd === undefined || (d !== undefined && d < rd) ? d : rd;
  }

  /** When the reads in flight have gone rendezvousReadTimeoutMs without progress; undefined: none, or no deadline. */
  #readDeadline(): number | undefined {
    const t = this.#l.o.rendezvousReadTimeoutMs;
    const reads = this.#reads;
    if (t === 0 || reads === undefined || reads.length === 0) return undefined;
    let at = Infinity;
    for (const r of reads) at = Math.min(at, r.at);
    return at + t;
  }

  releaseMemory(): void {
    const d = this.#l.ports;
    this.#release(this.cur);
    if (this.pending) this.#release(this.pending);
    this.pending = undefined;
    for (const r of this.#reads ?? []) d.dereg(r.sink);
    this.#reads = undefined;
    this.#readQ = undefined;
    for (const e of this.#inbox?.values() ?? []) {
      if (e.held) d.releaseRendezvous?.(e.len);
      e.held = false;
    }
  }

  #count(): InTally {
    return (this.#tally ??= new InTally());
  }

  stats(): InboundStats {
    const t = this.#tally ?? NO_COUNTS;
    return {
      phase: this.cur.phase,
      epoch: this.cur.epoch,
      eagerSize: this.cur.slotSize,
      slots: this.cur.slots,
      enlargements: t.enlargements,
      shrinks: t.shrinks,
      deniedEnlargements: t.deniedEnlargements,
      messagesReceived: t.messagesReceived,
      bytesReceived: t.bytesReceived,
      rendezvousReceived: t.rendezvousReceived,
      buffered: this.buffered,
      bufferedBytes: this.bufferedBytes,
      readsInFlight: this.#reads?.length ?? 0,
      rendezvousWaits: t.rendezvousWaits,
      rendezvousReadTimeouts: t.rendezvousReadTimeouts,
    };
  }
}
