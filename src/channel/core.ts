// The sans-I/O channel protocol core: one end of a channel, fed with completions and a clock
// (handle*), its actions pulled with pollAction (./ports.ts; the shape: src/core/sans-io.ts). It owns both halves — this end as receiver (./inbound.ts) and
// as sender (./outbound.ts) — and what they share: the fixed region (HELLO receive buffer,
// mailbox, send scratch, phase 0's first slots), the control messages and their credits, the receive count, the
// lifecycle (HELLO → open → close / fail → teardown).
//
// Control messages are RDMA-written into the peer's mailbox, one credit per slot; the credits
// come back in the header of the peer's control messages. Two rules keep that from
// deadlocking or chattering (as SMB Direct's credit rules do):
// - the last mailbox credit is only spent on a message that returns credits, so both ends can
//   never be stuck each holding none while owing some;
// - a message sent only to return credits (CREDIT) goes when half of a pool is owed — slot
//   credits, the window, or mailbox slots — and a mailbox pool has at least 4 slots, so a
//   CREDIT returns at least 2 and answering it with another is never due at once; it is
//   decided at the end of a batch of completions (handleBatchEnd), so one CREDIT returns what a
//   whole batch freed.
// Receives: every message consumes one (a write with immediate included), so this end keeps
// exactly (mailbox slots + slots of the live epoch [+ the granted one]) posted; the peer can
// never have more messages in flight than that, by its credits.
// Idle channels post fewer: the HELLO grants only IDLE_MBOX_CREDITS mailbox credits (and the
// inbound half only a few of phase 0's slots); the rest are withheld, not posted, until the
// peer first uses the pool — the first control message received, or the first this end sends
// with credits in it, posts the withheld receives and returns their credits. Two credits are
// the least the first rule above allows a peer to start with: one for any message, the last for
// one that returns credits; and the answer to that first message returns all the rest.
import { CHAN_HELLO_BUF, CHAN_MBOX_SLOT, CHAN_SEQ_MOD, CHAN_VERSION, ChanType } from '../wire/channel-spec.js';
import { type HasTimeout, Outbox, type PollsActions } from '../core/sans-io.js';
import { Inbound, type InboundStats } from './inbound.js';
import { type CtrlEntry, type Link, MAX_CTRL_WRS, WrKind, type WrKindValue, wrKindOf } from './link.js';
import type { ResolvedOptions } from './options.js';
import { checkHello, SCRATCH_LEN, scratchOff, slots0Off } from './hello.js';
import { Outbound, type OutboundStats } from './outbound.js';
import type { Action, ChannelPorts, Delivered, FailKind, Outcome, Region } from './ports.js';
import { type Body, CTRL_LEN, ctrlImm, decodeCtrl, encodeCtrl, parseImm } from './wire.js';

export type CoreState = 'init' | 'open' | 'closing' | 'closed' | 'failed';

export interface CoreStats extends InboundStats, OutboundStats {
  state: CoreState;
  registeredBytes: number;
  ctrlSent: number;
  ctrlReceived: number;
  creditOnly: number;
  ctrlCredits: number;
  /** False before authorize() on a channel accepted by a listener with preauth. */
  authorized: boolean;
  /** Refusals of the peer going past a local limit (preauth, decoded value limits). */
  limitRefusals: number;
}

const HELLO_LEN = CTRL_LEN.get(ChanType.Hello)!;
/** Mailbox credits a HELLO grants; the rest of the mailbox is withheld until first used. */
export const IDLE_MBOX_CREDITS = 2;

/** ChannelCore's #flags. */
const F = { torn: 1, released: 2, helloSent: 4, helloReceived: 8, closeQueued: 16 } as const;

export class ChannelCore implements Link, PollsActions<Action>, HasTimeout {
  readonly o: ResolvedOptions;
  readonly ports: ChannelPorts;
  readonly fixed: Region;
  readonly inb: Inbound;
  readonly out: Outbound;
  state: CoreState = 'init';
  failure: { kind: FailKind; message: string } | undefined;
  /** Made by the first action after the last was taken: an idle channel holds no queue. */
  #actions: Outbox<Action> | undefined;
  #wrNext = 1;
  #closeWr = -1;
  /** F.* bits: one field for five flags (every field of an idle channel costs a word). */
  #flags = 0;
  /** The HELLO's deadline until it arrives, then close()'s (close() before the HELLO tears down at once); undefined while none runs. */
  #deadline: number | undefined = undefined;
  // Our mailbox (the peer's control messages land here), at CHAN_HELLO_BUF in the fixed region.
  #mboxNext = 0;
  #ctrlReceived = 0;
  /** Starts below 0 by the withheld credits: they count as owed from the start, reported when the mailbox opens. */
  #ctrlReported: number;
  /** Mailbox credits withheld (receives not posted) until the mailbox is first used; 0 once open. */
  #mboxHeld: number;
  // The peer's mailbox (slots 0: not known yet, before its HELLO).
  #peerMboxAddr = 0;
  #peerMboxRkey = 0;
  #peerMboxSlots = 0;
  #peerMboxNext = 0;
  ctrlCredits = 0;
  /** Control messages waiting for a credit; made on the first (an idle channel has credit). */
  #ctrlQ: CtrlEntry[] | undefined;
  #posted = 0;
  /** Control writes posted and not yet completed (MAX_CTRL_WRS at most: the send queue's room). */
  #ctrlInFlight = 0;
  #ctrlSent = 0;
  #creditOnly = 0;
  /** Untrusted: the largest message the peer may send (0: trusted). */
  #preauthMax: number;
  #limitRefusals = 0;

  /**
   * Registers the fixed region (phase-0 slots included) and asks for the first receives (the HELLO
   * buffer first): poll the actions and post them before the QP connects. Throws RangeError
   * when the device has no memory for them.
   */
  constructor(o: ResolvedOptions, ports: ChannelPorts, now: number, preauthMax = 0) {
    this.o = o;
    this.ports = ports;
    this.#preauthMax = preauthMax;
    this.#mboxHeld = Math.max(0, o.ctrlSlots - IDLE_MBOX_CREDITS);
    this.#ctrlReported = -this.#mboxHeld;
    // Phase 0's slots follow in the same region (same access): an idle channel end holds one
    // region, not two — one registration, one region table entry, one NIC call to open.
    const p0 = o.ladder[0]!;
    const fixed = ports.reg(slots0Off(o) + p0.slots * p0.slotSize, 'fixed');
    if (!fixed) throw new RangeError('no device memory for the channel');
    this.fixed = fixed;
    this.inb = new Inbound(this, now);
    this.out = new Outbound(this);
    const n = this.#want();
    this.#posted = n;
    this.emit({ kind: 'recv', n, hello: { region: fixed, off: 0, len: CHAN_HELLO_BUF } });
  }

  // ---- Link ---------------------------------------------------------------------------------

  get live(): boolean {
    return !this.#torn;
  }

  get scratchOff(): number {
    return scratchOff(this.o);
  }
  get scratchLen(): number {
    return SCRATCH_LEN;
  }
  get slots0Off(): number {
    return slots0Off(this.o);
  }

  get #torn(): boolean {
    return (this.#flags & F.torn) !== 0;
  }
  get #helloSent(): boolean {
    return (this.#flags & F.helloSent) !== 0;
  }
  get #helloReceived(): boolean {
    return (this.#flags & F.helloReceived) !== 0;
  }

  get preauthMax(): number {
    return this.#preauthMax;
  }

  /** Before authorization, phase 0's bytes: the peer's grant does not size our staging beyond it. */
  get stageCap(): number {
    if (this.#preauthMax === 0) return this.o.maxStageBytes;
    const p0 = this.o.ladder[0]!;
    return Math.min(this.o.maxStageBytes, p0.slots * p0.slotSize);
  }

  get authorized(): boolean {
    return this.#preauthMax === 0;
  }

  /** Lift the channel to its full options (enlargement, rendezvous, dedup, bigger messages). */
  authorize(now: number): void {
    if (this.#preauthMax === 0) return;
    this.#preauthMax = 0;
    this.#pump(now);
  }

  refuse(message: string): void {
    if (this.#torn) return;
    this.#limitRefusals++;
    this.fail('limit', message);
  }

  emit(a: Action): void {
    (this.#actions ??= new Outbox()).push(a);
  }

  newWr(kind: WrKindValue): number {
    return this.#wrNext++ * 8 + kind;
  }

  queueCtrl(e: CtrlEntry, front = false): void {
    const q = (this.#ctrlQ ??= []);
    if (front) q.unshift(e);
    else q.push(e);
  }

  #want(): number {
    return (this.#helloReceived ? 0 : 1) + this.o.ctrlSlots - this.#mboxHeld + this.inb.liveSlots;
  }

  /** The peer started using the mailbox: post the withheld receives (their credits are owed already). */
  #openMailbox(): void {
    if (this.#mboxHeld === 0) return;
    this.#mboxHeld = 0;
    this.refill();
  }

  refill(): void {
    if (this.#torn) return;
    const n = this.#want() - this.#posted;
    if (n > 0) {
      this.#posted += n;
      this.emit({ kind: 'recv', n });
    }
  }

  fail(kind: FailKind, message: string): void {
    if (this.#torn) return;
    this.state = 'failed';
    this.failure = { kind, message };
    this.emit({ kind: 'failed', cause: kind, message });
    // Tell the peer, where the link still carries a control message: its pending sends and
    // reads fail now instead of waiting on this end (a rendezvous DONE would never come).
    // Credit rules do not matter any more; one mailbox credit is enough. The write is inline
    // (copied when posted) and goes before the QP is destroyed; should it be lost, the peer's
    // own deadlines still end its waits.
    if (kind !== 'closed' && kind !== 'link' && kind !== 'aborted' && this.#peerMboxSlots > 0 && this.#helloSent && this.ctrlCredits >= 1) {
      this.#postCtrl({ type: ChanType.Close, next: this.out.nextSeq % CHAN_SEQ_MOD, abort: true }, false);
    }
    this.#teardown();
  }

  #teardown(): void {
    this.#flags |= F.torn;
    this.#ctrlQ = undefined;
    this.emit({ kind: 'teardown' });
  }

  // ---- application side ---------------------------------------------------------------------

  /** After the QP connected: send HELLO. */
  start(now: number): void {
    if (this.#helloSent || this.#torn) return;
    this.#flags |= F.helloSent;
    if (!this.#helloReceived) this.#deadline = now + this.o.timeoutMs;
    const maxEager = this.o.ladder[this.o.ladder.length - 1]!.slotSize;
    const bytes = encodeCtrl({
      type: ChanType.Hello,
      hdr: { flags: 0, ctrlCredits: this.o.ctrlSlots - this.#mboxHeld, epoch: 0, slotCredits: this.inb.helloCredits(), consumed: 0 },
      hello: {
        version: CHAN_VERSION, ctrlSlots: this.o.ctrlSlots, window: this.o.window, maxEager, maxMessage: this.o.maxMessage,
        mboxRkey: this.fixed.rkey, mboxAddr: this.fixed.addr + CHAN_HELLO_BUF,
      },
      grant: this.inb.helloGrant(),
    });
    const wrId = this.newWr(WrKind.Hello);
    this.emit({ kind: 'send', wrId, local: { region: this.fixed, off: this.scratchOff, len: bytes.length }, bytes });
    this.#pump(now);
  }

  /** Largest message the peer takes (after connected). */
  get maxMessage(): number {
    return this.out.peerMaxMessage;
  }

  /**
   * Accept a message for sending (state open, size checked by the caller); returns its seq.
   * With pump false it only queues: the shell pumps once for all the sends of one JS task, so
   * messages sent together are packed together instead of each taking a slot of its own.
   */
  send(bytes: Uint8Array, value: boolean, now: number, pump = true): number {
    const seq = this.out.enqueue(bytes, value);
    if (pump) this.#pump(now);
    return seq;
  }

  /** Rendezvous budget came free: start the reads that waited for it. */
  retryReads(now: number): void {
    if (this.#torn) return;
    this.inb.pumpReads(now);
    this.#pump(now);
  }

  /** Post what can go (after sends queued with pump false). */
  pump(now: number): void {
    this.#pump(now);
  }

  /** The next message in order without taking it. */
  peek(): Delivered | undefined {
    return this.inb.peek();
  }

  /**
   * The next message in order, if it is here. Takes the time: taking a message frees its slot,
   * which may send credits or start a waiting read.
   */
  pollMessage(now: number): Delivered | undefined {
    const d = this.inb.take();
    if (d) {
      this.inb.pumpReads(now);
      this.#pump(now);
    }
    return d;
  }

  get hasReady(): boolean {
    return this.inb.hasReady;
  }

  /** Nothing is ready and nothing more will arrive (see `failure` for why, if it failed). */
  get finished(): boolean {
    return this.#torn && !this.inb.hasReady;
  }

  /** Graceful close: wait until every accepted send is placed, then CLOSE. */
  close(now: number): void {
    if (this.state !== 'open' && this.state !== 'init') return;
    if (this.state === 'init' || this.#peerMboxSlots === 0) {
      // Nothing was ever exchanged: nothing to tell the peer.
      this.state = 'closed';
      this.emit({ kind: 'ended' });
      this.#teardown();
      return;
    }
    this.state = 'closing';
    this.#deadline = now + this.o.timeoutMs;
    this.#pump(now);
  }

  /** The next action, in the order the core made them (src/core/sans-io.ts). */
  pollAction(): Action | undefined {
    const a = this.#actions?.poll();
    if (a === undefined) this.#actions = undefined;
    return a;
  }

  // ---- completions --------------------------------------------------------------------------

  /** A Send landed in the HELLO buffer. */
  handleRecv(byteLen: number, now: number): void {
    if (this.#torn) return;
    this.#posted--;
    if (this.#helloReceived) return this.fail('protocol', 'a Send after HELLO (only writes with immediate follow it)');
    if (byteLen !== HELLO_LEN) return this.fail('protocol', `HELLO of ${byteLen} bytes, expected ${HELLO_LEN}`);
    const r = decodeCtrl(this.ports.read(this.fixed, 0, byteLen));
    if (!r.ok || r.msg.type !== ChanType.Hello) return this.fail('protocol', `first message is not a HELLO (${r.ok ? `type ${r.msg.type}` : r.error})`);
    const { hello: h, grant: g, hdr } = r.msg;
    const why = checkHello(h, hdr, g);
    if (why) return this.fail('protocol', `HELLO refused: ${why}`);
    this.#flags |= F.helloReceived;
    this.#deadline = undefined;
    this.#peerMboxAddr = h.mboxAddr;
    this.#peerMboxRkey = h.mboxRkey;
    this.#peerMboxSlots = h.ctrlSlots;
    // A HELLO's credits are what it grants at the start (0: the whole pool).
    this.ctrlCredits = hdr.ctrlCredits || h.ctrlSlots;
    this.out.onHello(h, g, now, hdr.slotCredits || g.slots);
    if (this.state === 'init') {
      this.state = 'open';
      this.emit({ kind: 'connected' });
    }
    this.refill();
    this.#pump(now);
  }

  /** A write with immediate landed (a data or control message). */
  handleImm(imm: number, byteLen: number, now: number): void {
    if (this.#torn) return;
    this.#posted--;
    if (!this.#helloReceived) return this.fail('protocol', 'a write before HELLO');
    this.out.heard(now);
    const f = parseImm(imm);
    if (!f.ctrl) {
      this.inb.onData(f, byteLen, now);
    } else {
      if (f.slot !== this.#mboxNext) return this.fail('protocol', `control message in mailbox slot ${f.slot}, the next is ${this.#mboxNext}`);
      if (byteLen < 8 || byteLen > CHAN_MBOX_SLOT) return this.fail('protocol', `control message of ${byteLen} bytes`);
      if (this.#ctrlReceived + 1 > this.#ctrlReported + this.o.ctrlSlots) return this.fail('protocol', 'control message without a mailbox credit');
      const bytes = this.ports.read(this.fixed, CHAN_HELLO_BUF + f.slot * CHAN_MBOX_SLOT, byteLen);
      this.#mboxNext = (this.#mboxNext + 1) % this.o.ctrlSlots;
      this.#ctrlReceived++;
      this.#openMailbox();
      this.#onCtrl(bytes, now);
    }
    this.refill();
    this.#pump(now);
  }

  #onCtrl(bytes: Uint8Array, now: number): void {
    const r = decodeCtrl(bytes);
    if (!r.ok) return this.fail('protocol', `control message: ${r.error}`);
    const m = r.msg;
    this.ctrlCredits += m.hdr.ctrlCredits;
    if (this.ctrlCredits > this.#peerMboxSlots) return this.fail('protocol', 'mailbox credits beyond the peer\'s mailbox');
    this.out.onCredits(m.hdr);
    if (this.#torn) return;
    switch (m.type) {
      case ChanType.Hello:
        return this.fail('protocol', 'a second HELLO');
      case ChanType.Credit:
        return;
      case ChanType.Enlarge:
        return this.inb.onEnlarge(m.need, m.epoch, now);
      case ChanType.Grant:
        return this.out.onGrant(m.grant, now);
      case ChanType.Switch:
        return this.inb.onSwitch(m.epoch, m.count, now);
      case ChanType.Offer:
        return this.inb.onOffer(m.seq, m.length, m.addr, m.rkey, m.value, now);
      case ChanType.Done:
        return this.out.onDone(m.seq, now);
      case ChanType.Close:
        if (m.abort) return this.fail('aborted', 'the peer failed the channel (it sent an abort: it failed, or its listener refused the channel — accept queue full, a per-peer cap)');
        this.inb.onClose(m.next);
        if (this.#torn) return;
        // Everything the peer sent is here; what we still had for it will not be taken.
        this.state = 'closed';
        this.emit({ kind: 'ended' });
        this.#teardown();
        return;
    }
  }

  /**
   * A receive completed in error (the QP went to ERROR). Every receive but the HELLO's is posted
   * with no buffer, so one that overflowed (length) means the peer sent bytes where none were
   * granted: a peer breaking the protocol, not a failed link. A remote-class status on a receive
   * names the peer's side too (this engine completes none with one). The rest is the link's.
   */
  handleRecvError(r: Outcome, _now: number): void {
    if (this.#torn) return;
    this.#posted--;
    if (r.ok) return;
    if (r.why === 'length') {
      return this.fail('protocol', this.#helloReceived
        ? `the peer sent a Send with bytes after its HELLO, where no receive buffer is granted (${r.status})`
        : `the peer's HELLO is longer than the ${CHAN_HELLO_BUF}-byte HELLO buffer (${r.status})`);
    }
    if (r.why === 'remote') return this.fail('protocol', `a receive failed with the peer's error (${r.status})`);
    this.fail(r.why === 'flush' ? 'closed' : 'link', `receive failed: ${r.status}`);
  }

  /** A posted send / write / read completed. */
  handleComplete(wrId: number, r: Outcome, now: number): void {
    if (this.#torn) return;
    const kind = wrKindOf(wrId);
    if (kind === WrKind.Ctrl) this.#ctrlInFlight--;
    if (kind === WrKind.Data) this.out.onWriteDone(wrId, r, now);
    else if (kind === WrKind.Read) this.inb.onReadDone(wrId, r, now);
    else if (!r.ok) {
      if (r.why === 'remote') return this.fail('protocol', `the peer refused a control message into its mailbox (${r.status})`);
      return this.fail(r.why === 'flush' ? 'closed' : r.why === 'link' ? 'link' : 'protocol', `control message failed: ${r.status}`);
    } else if (wrId === this.#closeWr) {
      this.state = 'closed';
      this.emit({ kind: 'ended' });
      this.#teardown();
      return;
    }
    this.#pump(now);
  }

  /** The QP went to ERROR outside any completion we track (e.g. device closed). */
  handleQpError(message: string, _now: number): void {
    this.fail('closed', message);
  }

  // ---- time ---------------------------------------------------------------------------------

  handleTimeout(now: number): void {
    if (this.#torn) return;
    if (this.#deadline !== undefined && now >= this.#deadline) {
      if (!this.#helloReceived) return this.fail('timeout', `no HELLO from the peer within ${this.o.timeoutMs} ms`);
      return this.fail('timeout', `close: sends still outstanding after ${this.o.timeoutMs} ms`);
    }
    this.out.tick(now);
    if (this.#torn) return;
    this.inb.tick(now);
    this.#pump(now);
  }

  pollTimeout(): number | undefined {
    if (this.#torn) return undefined;
    let d = this.#deadline;
    const a = this.out.deadline();
    if (a !== undefined && (d === undefined || a < d)) d = a;
    const b = this.inb.deadline();
    if (b !== undefined && (d === undefined || b < d)) d = b;
    return d;
  }

  // ---- the control pump ---------------------------------------------------------------------

  #carriesCredit(): boolean {
    return this.#ctrlReceived > this.#ctrlReported || this.inb.owedSlots > 0 || this.inb.owedWindow > 0;
  }

  #pump(now: number): void {
    if (this.#torn || !this.#helloSent || this.#peerMboxSlots === 0) return;
    // A posted SWITCH makes new slot credits usable and may lead to another ENLARGE: go round
    // again while control messages go out (each round spends a mailbox credit, so it ends).
    for (let round = 0; round <= this.o.ctrlSlots && !this.#torn; round++) {
      this.out.pump(now);
      if (this.state === 'closing' && !(this.#flags & F.closeQueued) && this.out.outstanding === 0) {
        this.#flags |= F.closeQueued;
        this.queueCtrl({
          make: () => ({ type: ChanType.Close, next: this.out.nextSeq % CHAN_SEQ_MOD }),
          onPost: (wrId) => {
            this.#closeWr = wrId;
          },
        });
      }
      let posted = false;
      for (let q = this.#ctrlQ; !this.#torn && q !== undefined && q.length > 0; q = this.#ctrlQ) {
        if (!(this.ctrlCredits >= 2 || (this.ctrlCredits === 1 && this.#carriesCredit()))) break;
        // A full share of the send queue: the rest wait for a completion (handleComplete pumps).
        if (this.#ctrlInFlight >= MAX_CTRL_WRS) break;
        const e = q.shift()!;
        const body = e.make();
        if (!body) continue;
        const wrId = this.#postCtrl(body);
        e.onPost?.(wrId);
        posted = true;
      }
      if (!posted) break;
    }
  }

  /**
   * End of a batch of inputs (the shell calls it once it has fed every completion of one poll,
   * and after the application took messages): send a CREDIT if credits are owed and nothing
   * else carried them. Deciding here rather than per message returns a whole batch's credits
   * in one message.
   */
  handleBatchEnd(now: number): void {
    if (this.#torn || !this.#helloSent || this.#peerMboxSlots === 0) return;
    this.#pump(now);
    if (this.#torn || (this.#ctrlQ?.length ?? 0) > 0 || this.ctrlCredits < 1 || this.#ctrlInFlight >= MAX_CTRL_WRS) return;
    // Withheld credits are owed, but not due: the peer has not used the mailbox yet.
    const owedCtrl = this.#ctrlReceived - this.#ctrlReported - this.#mboxHeld;
    if (owedCtrl >= Math.ceil(this.o.ctrlSlots / 2) || this.inb.creditDue) {
      this.#creditOnly++;
      this.#postCtrl({ type: ChanType.Credit });
    }
  }

  /** credits false: the message returns none (an abort: nothing will be sent to use them). */
  #postCtrl(body: Body, credits = true): number {
    // Receives before the credits that let the peer use them. A CLOSE leaves a mailbox the peer
    // never used withheld: the peer still holds both credits of its HELLO, enough for its CLOSE.
    if (credits && body.type !== ChanType.Close) this.#openMailbox();
    const owedCtrl = credits ? Math.min(this.#ctrlReceived - this.#ctrlReported - this.#mboxHeld, 0xff) : 0;
    this.#ctrlReported += owedCtrl;
    const c = credits ? this.inb.takeCredits() : { epoch: this.inb.cur.epoch, slotCredits: 0, consumed: this.inb.consumed % CHAN_SEQ_MOD };
    const bytes = encodeCtrl({ ...body, hdr: { flags: 0, ctrlCredits: owedCtrl, epoch: c.epoch, slotCredits: c.slotCredits, consumed: c.consumed } });
    const slot = this.#peerMboxNext;
    this.#peerMboxNext = (slot + 1) % this.#peerMboxSlots;
    this.ctrlCredits--;
    this.#ctrlInFlight++;
    this.#ctrlSent++;
    const wrId = this.newWr(WrKind.Ctrl);
    this.emit({
      kind: 'write', wrId, local: { region: this.fixed, off: this.scratchOff, len: bytes.length }, bytes,
      remoteAddr: this.#peerMboxAddr + slot * CHAN_MBOX_SLOT, rkey: this.#peerMboxRkey, imm: ctrlImm(slot),
    });
    return wrId;
  }

  // ---- teardown, stats ----------------------------------------------------------------------

  /** After 'teardown' (the QP is destroyed): deregister every region. Idempotent. */
  releaseMemory(): void {
    if (this.#flags & F.released) return;
    this.#flags |= F.released;
    this.#flags |= F.torn;
    this.out.releaseMemory();
    this.inb.releaseMemory();
    this.ports.dereg(this.fixed);
  }

  get registeredBytes(): number {
    if (this.#flags & F.released) return 0;
    return this.fixed.length + this.inb.registeredBytes + this.out.registeredBytes;
  }

  stats(): CoreStats {
    return {
      state: this.state,
      ...this.inb.stats(),
      ...this.out.stats(),
      registeredBytes: this.registeredBytes,
      ctrlSent: this.#ctrlSent,
      ctrlReceived: this.#ctrlReceived,
      creditOnly: this.#creditOnly,
      ctrlCredits: this.ctrlCredits,
      authorized: this.authorized,
      limitRefusals: this.#limitRefusals,
    };
  }
}
