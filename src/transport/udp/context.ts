// The transport context (M5): the reliability state one device keeps for one peer device,
// shared by every QP that talks to that peer. Sans-I/O: fed payloads, decoded packet fields
// and a clock; it answers with datagrams to transmit and with delivery/ack/failure events.
//
// This file is the context itself: its ids and state, the events the owner drains, what one
// packet from the peer does to both halves, the keepalive that watches an idle peer, and the
// header every DATA and ACK carries. The sending half (window, SACK scoreboard, retransmission
// and probe timers) is ./sender.ts, its congestion window and RTT estimate ./congestion.ts,
// the receive half (PSNs seen, credit, ACK scheduling) ./receiver.ts.
// Headers are src/wire/udp.ts's `UdpHdr`; RESET is handled by the endpoint.
import type { Owns } from '../../core/detach.js';
import { UdpType, type UdpHdr } from '../../wire/udp.js';
import {
  defaultContextOptions, RxVerdict, tsNow, type ContextCounters, type ContextOptions, type FailReason, type RxVerdictValue,
  type TxDatagram, type TxPayload,
} from './context-options.js';
import { ContextReceiver } from './receiver.js';
import { ContextSender, type HeaderSource } from './sender.js';

/** Incarnations of contexts, in this process: unique, so an old context's never names a new one. */
let nextIncarnation = 1;

export class TransportContext implements HeaderSource {
  readonly opts: ContextOptions;
  localId: number;
  /**
   * The stream this context's payloads belong to: new with the context and with a restart that
   * fails what was unacknowledged ('fail'); one that keeps it for the new stream ('requeue')
   * keeps it too (a new localId, the same payloads).
   */
  incarnation = nextIncarnation++;
  peerId: number;
  state: 'open' | 'failed' = 'open';
  /** Time of the last packet received from the peer or payload queued (for idle reclaim). */
  lastActivity: number;
  readonly counters: ContextCounters = {
    txData: 0, retransmits: 0, fastRetransmits: 0, probes: 0, timeouts: 0, txAcks: 0,
    rxData: 0, rxDuplicate: 0, rxOutOfWindow: 0, rxNoCredit: 0, delivered: 0, rxBadAck: 0, rxBadSack: 0, scanned: 0,
    keepalives: 0, keepaliveAnswers: 0,
  };
  /**
   * First contact, before the peer has shown it keeps state for us (a COOKIE or its answer):
   * one DATA datagram in flight at most, as a SYN — the receiver keeps nothing and drops it.
   */
  probing = false;

  // Events for the owner to drain.
  delivered: Uint8Array[] = [];
  readonly acked: number[] = [];
  failed: number[] = [];
  failReason: FailReason | undefined;

  private nextId = 1;
  // Keepalive: when the next probe (or the check whether one is wanted) is due, the probes
  // sent since the peer was last heard, and a probe owed to the next flush.
  private kaAt: number;
  private kaSent = 0;
  private kaOwed = false;
  /** The sending half: window, scoreboard, retransmission and probe timers. */
  private tx: ContextSender;
  /** The receive half: the PSNs seen, receive credit, when an ACK is owed. */
  rx: ContextReceiver;

  constructor(localId: number, now: number, opts: Partial<ContextOptions> = {}, peerId = 0) {
    this.opts = { ...defaultContextOptions, ...opts };
    this.localId = localId;
    this.peerId = peerId;
    this.lastActivity = now;
    this.kaAt = this.opts.keepaliveMs > 0 ? now + this.opts.keepaliveMs : Infinity;
    this.tx = new ContextSender(this.opts, this.counters, this.acked, this);
    this.rx = new ContextReceiver(this.opts, this.counters, this.opts.initialPsn >>> 0);
  }

  /**
   * Queue a payload; returns its id (reported later in `acked` or `failed`), or 0 when the
   * context has failed or its queue is full. The QPNs travel with it in the header. `id`:
   * the owner's own nonzero id for it (default: one counted by the context).
   */
  send(payload: TxPayload, now: number, dstQpn = 0, srcQpn = 0, id = 0): number {
    if (this.state !== 'open') return 0;
    const own = id === 0;
    if (!this.tx.enqueue({ id: own ? this.nextId : id, payload, dstQpn, srcQpn })) return 0;
    if (own) id = this.nextId++;
    this.lastActivity = now;
    return id;
  }

  /** Payloads send() would take now (0 once the context is not open). */
  get sendRoom(): number {
    return this.state === 'open' ? this.tx.room : 0;
  }

  /** The views of its payloads that `owns` claims become copies (core/detach.ts). */
  detach(owns: Owns): void {
    this.tx.detach(owns);
  }

  /** Payloads accepted by send() and not yet acked or failed. */
  get outstanding(): number {
    return this.tx.outstanding;
  }

  /**
   * Established (the peer answered our handshake: it keeps state for us), open, with payloads
   * queued or unacknowledged: what a closing device lingers for. A peer that never answered
   * (a first contact to a dead port) is not waited for.
   */
  get sending(): boolean {
    return this.state === 'open' && this.peerId !== 0 && !this.probing && !this.tx.idle;
  }

  /** Nothing to send, nothing unacknowledged, no ACK owed: the context may be reclaimed. */
  get quiescent(): boolean {
    return this.tx.idle && !this.rx.ackDue();
  }

  get stats(): { cwnd: number; ssthresh: number; srtt: number; rto: number; pipe: number; peerRwnd: number; pending: number } {
    return { ...this.tx.stats, pending: this.rx.pending };
  }

  /** The owner finished with `n` delivered payloads: their receive credit returns. True: a window update is due now. */
  release(n: number): boolean {
    return this.rx.release(n);
  }

  nextDeadline(): number {
    if (this.state !== 'open') return Infinity;
    return Math.min(this.tx.deadline(), this.rx.ackNow ? -Infinity : this.rx.ackDeadline, this.keepaliveDeadline());
  }

  /**
   * When keepalive(now, …) is next due: Infinity while it is off, while the handshake is not
   * done, or while something of ours is outstanding (the retransmission timer watches then).
   */
  keepaliveDeadline(): number {
    if (this.state !== 'open' || this.kaAt === Infinity || this.peerId === 0 || this.probing) return Infinity;
    if (!this.tx.idle) return Infinity;
    return this.kaAt;
  }

  /**
   * The keepalive timer fired: `wanted` says whether the owner still keeps this peer (it has
   * connected rc QPs to it). Not wanted: nothing is sent, asked again a keepalive interval
   * later. Wanted: a probe goes with the next flush, or — keepaliveProbes sent and none
   * answered — the context fails ('peer-lost'). Only an answer from inside this context (its
   * two ids and an acceptable ack, checked by the owner and receive()) counts as hearing the
   * peer, so an off-path sender cannot hold a dead peer up, and nothing it sends can make the
   * probes go unanswered.
   */
  keepalive(now: number, wanted: boolean): void {
    if (this.keepaliveDeadline() > now) return;
    const ms = this.opts.keepaliveMs;
    if (!wanted) {
      this.kaSent = 0;
      this.kaAt = now + ms;
      return;
    }
    if (this.kaSent >= this.opts.keepaliveProbes) {
      this.fail('peer-lost');
      return;
    }
    this.kaSent++;
    this.kaOwed = true;
    this.kaAt = now + Math.max(1, ms / 2);
  }

  /**
   * Process one decoded packet from the peer (already matched to this context). A delivered
   * payload is appended to `delivered`.
   */
  receive(h: UdpHdr, payload: Uint8Array | null, now: number): RxVerdictValue {
    if (this.state !== 'open' || (h.type !== UdpType.Data && h.type !== UdpType.Ack)) return RxVerdict.Ok;
    const v = this.tx.checkAck(h);
    if (v !== RxVerdict.Ok) {
      if (v === RxVerdict.BadAck) this.counters.rxBadAck++;
      else this.counters.rxBadSack++;
      return v;
    }
    this.lastActivity = now;
    if (this.kaAt !== Infinity) {
      this.kaSent = 0;
      this.kaAt = now + this.opts.keepaliveMs;
    }
    // A peer's keepalive probe (an ACK asking for one): answered with one ACK, the same size.
    if (h.type === UdpType.Ack && h.ackReq) {
      this.rx.ackNow = true;
      this.counters.keepaliveAnswers++;
    }
    this.tx.onAck(h, now);
    if (h.type === UdpType.Data && payload !== null && this.rx.onData(h, now)) this.delivered.push(payload);
    return RxVerdict.Ok;
  }

  /**
   * The peer showed it keeps state for us (it challenged us with a COOKIE, or answered): the
   * window opens, and what we sent to a receiver that kept nothing goes again at once — not
   * as loss (no congestion response, no retry counted). `tsEcr` echoes our probe: an RTT sample.
   */
  validated(now: number, tsEcr: number): void {
    if (this.state !== 'open') return;
    this.probing = false;
    this.tx.validated(now, tsEcr);
  }

  /** Fire timers due at `now`. */
  tick(now: number): void {
    if (this.state !== 'open') return;
    if (!this.tx.tick(now)) this.fail('retry-exceeded');
  }

  /**
   * Append every datagram that may leave now, at most `limit` DATA datagrams; returns true when
   * the limit held back DATA the window would have let go (the owner flushes again soon).
   */
  flush(now: number, out: TxDatagram[], limit = Infinity): boolean {
    if (this.state !== 'open') return false;
    const start = out.length;
    const more = this.tx.flush(now, out, limit, this.probing);
    // DATA carries the ACK (and does a keepalive probe's work): an ACK-only datagram goes only without it.
    if (out.length === start) {
      if (this.kaOwed) {
        this.counters.keepalives++;
        const hdr = this.header(false, this.tx.sndNxt, now);
        hdr.ackReq = true;
        out.push({ hdr, payload: null, dstQpn: 0, srcQpn: 0 });
      } else if (this.rx.ackDue(now)) {
        this.counters.txAcks++;
        out.push({ hdr: this.header(false, this.tx.sndNxt, now), payload: null, dstQpn: 0, srcQpn: 0 });
      }
    }
    this.kaOwed = false;
    this.tx.armPersist(now);
    return more;
  }

  /** Give up on everything outstanding (peer gone, device closing). */
  fail(reason: FailReason): void {
    if (this.state !== 'open') return;
    for (const e of this.tx.takeUnacked()) this.failed.push(e.id);
    this.state = 'failed';
    this.failReason = reason;
    this.tx.stopTimers();
    this.rx.ackDeadline = Infinity;
    this.rx.ackNow = false;
  }

  /**
   * Start a new incarnation towards the same peer address: fresh ids and PSN spaces.
   * 'requeue' keeps every unacknowledged payload (with its id) for the new stream;
   * 'fail' reports them failed. The counters, the payload ids and the events not yet drained
   * carry over.
   */
  restart(newLocalId: number, newPeerId: number, mode: 'requeue' | 'fail', now: number): void {
    const unacked = this.tx.takeUnacked();
    if (mode === 'fail') {
      for (const e of unacked) this.failed.push(e.id);
      this.incarnation = nextIncarnation++;
    }
    this.localId = newLocalId;
    this.peerId = newPeerId;
    this.state = 'open';
    this.failReason = undefined;
    this.lastActivity = now;
    this.probing = false;
    this.kaAt = this.opts.keepaliveMs > 0 ? now + this.opts.keepaliveMs : Infinity;
    this.kaSent = 0;
    this.kaOwed = false;
    this.tx = new ContextSender(this.opts, this.counters, this.acked, this);
    this.rx = new ContextReceiver(this.opts, this.counters, this.opts.initialPsn >>> 0);
    if (mode === 'requeue') this.tx.requeue(unacked);
  }

  /** Every DATA and ACK carries the receive side's state: cumulative ack, SACK, credit. */
  header(data: boolean, psn: number, now: number): UdpHdr {
    const rx = this.rx;
    const sack = rx.sack();
    const rwnd = rx.advertisedWindow();
    rx.ackSent();
    return {
      type: data ? UdpType.Data : UdpType.Ack, ackReq: false, retx: false, window: rwnd,
      srcCtx: this.localId, dstCtx: this.peerId, psn, ackPsn: rx.rcvNxt,
      tsVal: tsNow(now), tsEcr: rx.tsRecent, dstQpn: 0, srcQpn: 0, sack,
    };
  }
}
