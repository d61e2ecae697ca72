// This end as a sender: the messages it was given, in sequence order, and how each goes.
//
// - Eager (fits the peer's current slots): copied into the send scratch or staging and written
//   with RDMA WRITE WITH IMMEDIATE into the next slot of the current epoch, one slot credit each.
// - Needs bigger slots (fits the peer's largest phase): one ENLARGE for the largest such message
//   waiting; it waits for the GRANT while later messages that fit keep going eagerly (the
//   receiver reorders by seq) — the seed's fig. 5. A backlog of small messages bigger than the
//   current slots hold asks for the next phase too (more of them packed per write).
// - Above the peer's largest slot: rendezvous. The bytes go into a region the peer may read
//   (RemoteRead, exactly the message) and an OFFER names it; the peer pulls them with one RDMA
//   READ and answers DONE, which is when the source is deregistered and the send resolves.
//
// A GRANT is checked against what can be written at all (framing, epoch = current + 1, slot
// count and size within the peer's advertised limits, range below 2^53) and queued as SWITCH at
// the head of the control queue; the new epoch becomes current the moment SWITCH is posted, so
// every write posted after it is for the new slots and every one before it for the old ones
// (rc order does the rest). Whether the rkey really is the peer's to grant only the peer's
// device can tell: a write it refuses completes with a remote access error and the channel
// fails with ERR_PROTOCOL, nothing written.
import { CHAN_EPOCH_MOD, CHAN_MAX_SLOTS, CHAN_SEQ_MOD, ChanType } from '../wire/channel-spec.js';
import { INLINE_MAX, type Link, WrKind } from './link.js';
import type { ResolvedOptions } from './options.js';
import type { Outcome, Region, Seg } from './ports.js';
import { dataImm, type Grant, type Hdr, type Hello, packRecords, RECORD_HDR, RECORD_MAX } from './wire.js';

export interface TxEpoch {
  epoch: number;
  phase: number;
  slots: number;
  slotSize: number;
  /** The part of each slot this end writes: at most its staging cap (link.stageCap). */
  useSize: number;
  addr: number;
  rkey: number;
  next: number;
  credits: number;
  /** Data messages written in this epoch (SWITCH carries it). */
  written: number;
  /** Staging for writes above the scratch (none at phase 0: an idle channel holds no record for it). */
  stage: Stage | undefined;
}

export interface Stage {
  /** One inline slot, or one slot per peer slot. */
  region: Region;
  inline: boolean;
  /** Per staging slot (peer slot mod slots): a non-inline write from it is in flight. */
  busy: Uint8Array | undefined;
  slots: number;
  /** Writes from the stage not yet completed (it is deregistered only at 0). */
  count: number;
}

interface WriteRec {
  wrId: number;
  /** First seq; a packed write carries count consecutive ones. */
  seq: number;
  count: number;
  tx: TxEpoch;
  slot: number;
  staged: boolean;
  len: number;
}

interface OfferRec {
  seq: number;
  seq16: number;
  region: Region;
  len: number;
  posted: boolean;
  postedAt: number;
}

interface OutMsg {
  seq: number;
  bytes: Uint8Array;
  value: boolean;
}

export interface OutboundStats {
  peerPhase: number;
  peerEpoch: number;
  sendEagerSize: number;
  messagesSent: number;
  bytesSent: number;
  eagerSent: number;
  rendezvousSent: number;
  enlargeRequests: number;
  /** Writes that carried several messages in one slot. */
  packedWrites: number;
  queued: number;
  inFlight: number;
}

/** Offers outstanding at once (each holds a registered copy of its message). */
export const MAX_OFFERS = 4;

/**
 * Data writes this end keeps awaiting their completions, at most: what its send queue is sized
 * for (./hub.ts). The peer's slot credits (up to CHAN_MAX_SLOTS an epoch, and a new epoch's come
 * while the old one's writes complete) and its window are the peer's numbers; this one is ours,
 * so no grant can make a post overrun the queue. A write past it waits as one without a slot
 * credit does, until a completion frees an entry (onWriteDone pumps). Every write carries at
 * least one accepted send and the shell accepts highWaterMark at most, so below 256 it only
 * restates that bound.
 */
export function dataWrCap(o: ResolvedOptions): number {
  return Math.min(o.highWaterMark, CHAN_MAX_SLOTS);
}

/** What an Outbound counts for stats(). */
class OutTally {
  messagesSent = 0;
  bytesSent = 0;
  eagerSent = 0;
  rendezvousSent = 0;
  enlargeRequests = 0;
  packedWrites = 0;
}

/** The counts of every Outbound that has counted nothing yet: shared, never written. */
const NO_COUNTS: Readonly<OutTally> = new OutTally();

// The queue and offer lists of an Outbound that never had one: shared, never written (the first
// push makes the Outbound its own); an idle channel holds no empty lists of its own.
const NO_MSGS: OutMsg[] = [];
const NO_OFFERS: OfferRec[] = [];

export class Outbound {
  readonly #l: Link;
  /** The peer's limits from its HELLO (0 before it): three words, not an object per channel. */
  peerWindow = 0;
  peerMaxEager = 0;
  peerMaxMessage = 0;
  tx: TxEpoch | undefined;
  /** A GRANT whose SWITCH is queued. */
  #switching: Grant | undefined;
  #enlarge: { need: number; deadline: number } | undefined;
  /** The peer refused to enlarge: send what does not fit by rendezvous until the next GRANT. */
  #denied = false;
  #queue: OutMsg[] = NO_MSGS;
  /** Data writes awaiting their completion, in posting order (completions come in that order); made on the first. */
  #writes: WriteRec[] | undefined;
  /** Rendezvous messages offered and not yet DONE (at most MAX_OFFERS). */
  #offers: OfferRec[] = NO_OFFERS;
  /** Epochs replaced while writes into their staging were in flight; made on the first (an idle channel has none). */
  #retired: TxEpoch[] | undefined;
  nextSeq = 0;
  peerConsumed = 0;
  /** Counts for stats(), made at the first count: an idle channel holds none. */
  #tally: OutTally | undefined;
  #now = 0;
  /** When the peer last said anything (a control message or a data write). */
  #heardAt = 0;

  constructor(l: Link) {
    this.#l = l;
  }

  /** Sends accepted and not yet placed. */
  get outstanding(): number {
    return this.#queue.length + (this.#writes?.length ?? 0) + this.#offers.length;
  }

  get registeredBytes(): number {
    let n = this.tx?.stage?.region.length ?? 0;
    for (const t of this.#retired ?? []) n += t.stage!.region.length;
    for (const o of this.#offers) n += o.region.length;
    return n;
  }

  /** The largest message that goes eagerly: the peer's, within what this end stages. */
  get #maxEager(): number {
    return Math.min(this.peerMaxEager, this.#l.stageCap);
  }

  /** The peer said something (its liveness, for the DONE deadline). */
  heard(now: number): void {
    this.#heardAt = now;
  }

  /** `credits`: the slot credits the HELLO grants (the core checked them against g.slots). */
  onHello(h: Hello, g: Grant, now: number, credits: number): void {
    this.#now = this.#heardAt = now;
    this.peerWindow = h.window;
    this.peerMaxEager = h.maxEager;
    this.peerMaxMessage = h.maxMessage;
    this.#activate(g);
    if (this.tx) this.tx.credits = credits;
  }

  /** Accept a message; returns its seq. The caller checked it against peer.maxMessage. */
  enqueue(bytes: Uint8Array, value: boolean): number {
    const seq = this.nextSeq++;
    if (this.#queue === NO_MSGS) this.#queue = [];
    this.#queue.push({ seq, bytes, value });
    return seq;
  }

  // ---- the pump -----------------------------------------------------------------------------

  pump(now: number): void {
    const l = this.#l;
    const tx = this.tx;
    if (!tx || !l.live) return;
    this.#now = now;
    const maxEager = this.#maxEager;
    let need = 0;
    let stalled = 0;
    const limit = this.peerConsumed + this.peerWindow;
    for (let i = 0; i < this.#queue.length && l.live; ) {
      const m = this.#queue[i]!;
      // Everything after a message outside the window is outside it too.
      if (m.seq >= limit) break;
      const len = m.bytes.length;
      const t = this.tx!;
      if (len <= t.useSize) {
        const n = this.#packable(t, i, limit);
        if (this.#postEager(t, i, n)) this.#queue.splice(i, n);
        else {
          stalled += len;
          i++;
        }
        continue;
      }
      if (len <= maxEager && !this.#denied) {
        need = Math.max(need, len);
        i++;
        continue;
      }
      if (this.#offer(m)) this.#queue.splice(i, 1);
      else i++;
    }
    // A backlog of small messages larger than all the slots can hold at once enlarges too: the
    // next phase's bigger slots carry more of them per write (packed) and per credit round
    // trip. Memory follows the rate as well as the size, and shrink after idle undoes it.
    const tx2 = this.tx!;
    if (need === 0 && !this.#denied && stalled > tx2.slots * tx2.useSize && maxEager > tx2.useSize) need = tx2.useSize + 1;
    if (need > 0 && !this.#enlarge && !this.#switching && l.live) {
      this.#enlarge = { need, deadline: now + l.o.timeoutMs };
      this.#count().enlargeRequests++;
      l.queueCtrl({ make: () => ({ type: ChanType.Enlarge, need, epoch: this.tx!.epoch }) });
    }
  }

  /**
   * How many queued messages from i on go in one slot: the run of consecutive seqs (inside the
   * window) whose records fit it. 1: the message goes alone, unpacked.
   */
  #packable(t: TxEpoch, i: number, limit: number): number {
    const q = this.#queue;
    const first = q[i]!;
    if (first.bytes.length > RECORD_MAX) return 1;
    let total = RECORD_HDR + first.bytes.length;
    let n = 1;
    for (let j = i + 1; j < q.length && n < 256; j++, n++) {
      const m = q[j]!;
      if (m.seq !== first.seq + n || m.seq >= limit || m.bytes.length > RECORD_MAX) break;
      if (total + RECORD_HDR + m.bytes.length > t.useSize) break;
      total += RECORD_HDR + m.bytes.length;
    }
    return n;
  }

  /** Write queue[i .. i+n) into the next slot (packed when n > 1); false when it cannot go now. */
  #postEager(t: TxEpoch, i: number, n: number): boolean {
    const l = this.#l;
    if (t.credits === 0) return false;
    if ((this.#writes?.length ?? 0) >= dataWrCap(l.o)) return false;
    const slot = t.next;
    const first = this.#queue[i]!;
    const packed = n > 1;
    const bytes = packed ? packRecords(this.#queue.slice(i, i + n)) : first.bytes;
    const len = bytes.length;
    let local: Seg | undefined;
    let inline: Uint8Array | undefined;
    let staged = false;
    if (len === 0) local = undefined;
    else if (len <= l.scratchLen) {
      local = { region: l.fixed, off: l.scratchOff, len };
      inline = bytes;
    } else if (t.useSize <= INLINE_MAX) {
      // Inline, but the post may come later in this step than a SWITCH that retires the
      // stage: it stays registered until the write completes.
      const st = t.stage ?? this.#inlineStage(t);
      if (st === undefined) return false;
      local = { region: st.region, off: 0, len };
      inline = bytes;
      st.count++;
      staged = true;
    } else {
      // Not inline: the engine reads the staging until the write completes.
      const st = t.stage ?? this.#bigStage(t);
      if (st === undefined) return false;
      const k = slot % st.slots;
      if (st.busy![k]) return false;
      st.busy![k] = 1;
      st.count++;
      staged = true;
      local = { region: st.region, off: k * t.useSize, len };
      l.ports.write(local.region, local.off, bytes);
    }
    let msgLen = 0;
    for (let k = i; k < i + n; k++) msgLen += this.#queue[k]!.bytes.length;
    t.credits--;
    t.next = (slot + 1) % t.slots;
    t.written++;
    const wrId = l.newWr(WrKind.Data);
    (this.#writes ??= []).push({ wrId, seq: first.seq, count: n, tx: t, slot, staged, len: msgLen });
    l.emit({
      kind: 'write', wrId, local, ...(inline ? { bytes: inline } : {}),
      remoteAddr: t.addr + slot * t.slotSize, rkey: t.rkey, imm: dataImm(t.epoch, !packed && first.value, slot, first.seq % CHAN_SEQ_MOD, packed),
    });
    return true;
  }

  #offer(m: OutMsg): boolean {
    const l = this.#l;
    if (this.#offers.length >= MAX_OFFERS) return false;
    const len = m.bytes.length;
    const region = l.ports.reg(len, 'source');
    if (!region) {
      if (this.#offers.length === 0 && (this.#writes?.length ?? 0) === 0) l.fail('memory', `no device memory to expose a ${len}-byte message`);
      return false;
    }
    l.ports.write(region, 0, m.bytes);
    const seq16 = m.seq % CHAN_SEQ_MOD;
    const o: OfferRec = { seq: m.seq, seq16, region, len, posted: false, postedAt: 0 };
    if (this.#offers === NO_OFFERS) this.#offers = [];
    this.#offers.push(o);
    l.queueCtrl({
      make: () => ({ type: ChanType.Offer, seq: seq16, length: len, rkey: region.rkey, addr: region.addr, value: m.value }),
      onPost: () => {
        o.posted = true;
        o.postedAt = this.#now;
      },
    });
    return true;
  }

  // ---- from the peer ------------------------------------------------------------------------

  onCredits(h: Hdr): void {
    const l = this.#l;
    const t = this.tx;
    if (!t) return;
    if (h.epoch === t.epoch && h.slotCredits > 0) {
      t.credits += h.slotCredits;
      if (t.credits > t.slots) return l.fail('protocol', `slot credits for epoch ${t.epoch} exceed its ${t.slots} slots`);
    }
    const c = this.peerConsumed + ((h.consumed - this.peerConsumed) & (CHAN_SEQ_MOD - 1));
    if (c > this.nextSeq) return l.fail('protocol', `the peer says it consumed seq ${h.consumed}, which was never sent`);
    this.peerConsumed = c;
  }

  onGrant(g: Grant | undefined, now: number): void {
    const l = this.#l;
    const t = this.tx;
    if (!t) return l.fail('protocol', 'GRANT before HELLO');
    if (this.#switching) return l.fail('protocol', 'a second GRANT before the first was fenced');
    if (!g) {
      this.#denied = true;
      this.#enlarge = undefined;
      this.pump(now);
      return;
    }
    const why = checkGrant(g, (t.epoch + 1) % CHAN_EPOCH_MOD, this.peerMaxEager);
    if (why) return l.fail('protocol', `GRANT refused: ${why}`);
    this.#switching = g;
    l.queueCtrl(
      {
        make: () => ({ type: ChanType.Switch, epoch: g.epoch, count: this.tx!.written >>> 0 }),
        onPost: () => this.#activate(g),
      },
      true,
    );
  }

  onDone(seq16: number, now: number): void {
    const l = this.#l;
    const i = this.#offers.findIndex((x) => x.seq16 === seq16 && x.posted);
    if (i < 0) return l.fail('protocol', `DONE for seq ${seq16}, which has no offer outstanding`);
    const o = this.#offers[i]!;
    this.#offers.splice(i, 1);
    l.ports.dereg(o.region);
    const t = this.#count();
    t.messagesSent++;
    t.bytesSent += o.len;
    t.rendezvousSent++;
    l.emit({ kind: 'placed', seq: o.seq });
    this.pump(now);
  }

  onWriteDone(wrId: number, r: Outcome, now: number): void {
    const l = this.#l;
    // Completions of one send queue come in posting order: this is nearly always the head.
    const writes = this.#writes;
    if (writes === undefined) return;
    const i = writes[0]?.wrId === wrId ? 0 : writes.findIndex((x) => x.wrId === wrId);
    if (i < 0) return;
    const w = writes[i]!;
    writes.splice(i, 1);
    if (w.staged) {
      const st = w.tx.stage!;
      if (st.busy) st.busy[w.slot % st.slots] = 0;
      st.count--;
      this.#sweepRetired();
    }
    if (!r.ok) {
      if (r.why === 'remote') return l.fail('protocol', `the peer refused a write into slot ${w.slot} of epoch ${w.tx.epoch} it granted (${r.status})`);
      if (r.why === 'rnr') return l.fail('protocol', `the peer had no receive posted for a credited message (${r.status})`);
      return l.fail(r.why === 'flush' ? 'closed' : r.why === 'link' ? 'link' : 'protocol', `write failed: ${r.status}`);
    }
    const t = this.#count();
    t.messagesSent += w.count;
    t.bytesSent += w.len;
    t.eagerSent += w.count;
    if (w.count > 1) t.packedWrites++;
    for (let k = 0; k < w.count; k++) l.emit({ kind: 'placed', seq: w.seq + k });
    this.pump(now);
  }

  #activate(g: Grant): void {
    const old = this.tx;
    // The grant is the peer's number; what it costs here is ours: slots are used up to the
    // staging cap (link.stageCap). The stage waits for the first write that needs it
    // (#inlineStage, #bigStage): a peer granting big slots — in its HELLO or unasked — does not
    // make an idle channel end register staging.
    const useSize = Math.min(g.slotSize, this.#l.stageCap);
    this.tx = {
      epoch: g.epoch, phase: g.phase, slots: g.slots, slotSize: g.slotSize, useSize, addr: g.addr, rkey: g.rkey,
      next: 0, credits: g.slots, written: 0, stage: undefined,
    };
    this.#switching = undefined;
    this.#denied = false;
    if (this.#enlarge && useSize >= this.#enlarge.need) this.#enlarge = undefined;
    if (old?.stage) {
      (this.#retired ??= []).push(old);
      this.#sweepRetired();
    }
  }

  /** The current epoch's one inline staging slot, registered at its first write above the scratch. */
  #inlineStage(t: TxEpoch): Stage | undefined {
    const region = this.#l.ports.reg(t.useSize, 'stage');
    if (!region) return void this.#l.fail('memory', `no device memory to stage writes of ${t.useSize} bytes`);
    return (t.stage = { region, inline: true, busy: undefined, slots: 1, count: 0 });
  }

  /**
   * The current epoch's staging above the inline size, registered at its first write: no more
   * staging slots than fit in the cap (writes then wait for a free one), and fewer, down to
   * one, when the device has not the memory for them all.
   */
  #bigStage(t: TxEpoch): Stage | undefined {
    for (let slots = Math.max(1, Math.min(t.slots, Math.floor(this.#l.stageCap / t.useSize))); slots >= 1; slots = slots === 1 ? 0 : slots >> 1) {
      const region = this.#l.ports.reg(slots * t.useSize, 'stage');
      if (region) return (t.stage = { region, inline: false, busy: new Uint8Array(slots), slots, count: 0 });
    }
    return void this.#l.fail('memory', `no device memory to stage writes of ${t.useSize} bytes`);
  }

  #sweepRetired(): void {
    const retired = this.#retired;
    if (retired === undefined) return;
    for (let i = retired.length - 1; i >= 0; i--) {
      const t = retired[i]!;
      if (t.stage!.count > 0) continue;
      this.#l.ports.dereg(t.stage!.region);
      retired.splice(i, 1);
    }
  }

  // ---- time, teardown -----------------------------------------------------------------------

  tick(now: number): void {
    if (this.#enlarge && now >= this.#enlarge.deadline) {
      return this.#l.fail('timeout', `the peer did not answer an enlargement (ENLARGE for ${this.#enlarge.need} bytes) within ${this.#l.o.timeoutMs} ms`);
    }
    const d = this.#doneDeadline();
    if (d !== undefined && now >= d) {
      this.#l.fail('timeout', `the peer did not finish a rendezvous message (no DONE) and said nothing for ${this.#l.o.rendezvousTimeoutMs} ms`);
    }
  }

  /**
   * A peer that went silent (failed without a word, or gone) would leave an offered message
   * pending forever: its DONE must come, or the peer must show it is alive, within
   * rendezvousTimeoutMs of the offer.
   */
  #doneDeadline(): number | undefined {
    const t = this.#l.o.rendezvousTimeoutMs;
    if (t === 0) return undefined;
    let first = Infinity;
    for (const o of this.#offers) if (o.posted) first = Math.min(first, o.postedAt);
    if (first === Infinity) return undefined;
    return Math.max(first, this.#heardAt) + t;
  }

  deadline(): number | undefined {
    const a = this.#enlarge?.deadline;
    const b = this.#doneDeadline();
    if (a === undefined) return b;
    return b === undefined ? a : Math.min(a, b);
  }

  releaseMemory(): void {
    const d = this.#l.ports;
    if (this.tx?.stage) d.dereg(this.tx.stage.region);
    if (this.tx) this.tx.stage = undefined;
    for (const t of this.#retired ?? []) d.dereg(t.stage!.region);
    this.#retired = undefined;
    for (const o of this.#offers) d.dereg(o.region);
    this.#offers.length = 0;
    this.#queue.length = 0;
    this.#writes = undefined;
  }

  #count(): OutTally {
    return (this.#tally ??= new OutTally());
  }

  stats(): OutboundStats {
    const t = this.#tally ?? NO_COUNTS;
    return {
      peerPhase: this.tx?.phase ?? 0,
      peerEpoch: this.tx?.epoch ?? 0,
      sendEagerSize: this.tx?.useSize ?? 0,
      messagesSent: t.messagesSent,
      bytesSent: t.bytesSent,
      eagerSent: t.eagerSent,
      rendezvousSent: t.rendezvousSent,
      enlargeRequests: t.enlargeRequests,
      packedWrites: t.packedWrites,
      queued: this.#queue.length,
      inFlight: (this.#writes?.length ?? 0) + this.#offers.length,
    };
  }
}

/** Why a GRANT cannot be used (undefined: it can). */
export function checkGrant(g: Grant, epoch: number, maxEager: number): string | undefined {
  if (g.epoch !== epoch) return `epoch ${g.epoch}, expected ${epoch}`;
  if (g.slots < 1 || g.slots > CHAN_MAX_SLOTS) return `${g.slots} slots (1..${CHAN_MAX_SLOTS})`;
  if (g.slotSize < 1 || g.slotSize > maxEager) return `slot size ${g.slotSize} (1..${maxEager}, the peer's own maxEager)`;
  const len = g.slots * g.slotSize;
  if (len > 0xffff_ffff) return `${len} bytes of slots`;
  if (g.addr + len > Number.MAX_SAFE_INTEGER) return 'range beyond 2^53';
  return undefined;
}
