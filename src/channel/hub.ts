// The channels of one device: one completion queue and one poll loop for all of them (a
// completion names its QP; the hub hands it to that QP's channel), a pool of protection domains
// (one per channel, reused after it closes), and the device-wide totals — the channel registry
// the device's stats read.
//
// One PD per channel: a peer's rkey is honoured only on a QP of the region's PD, so a channel's
// peer can never touch another channel's slots, mailbox or rendezvous sources, whatever key it
// guesses. The CQ is shared and sized for every channel's worst case (the sends and receives a
// channel can have outstanding by its own limits and its own grants, whatever the peer grants):
// it cannot overrun, and a channel that would exceed its capacity is refused
// (ERR_LIMIT_EXCEEDED) before its QP is made.
import { DEDUP_WRS } from './dedup.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { WorkCompletion } from '../core/work.js';
import type { CompletionQueue } from '../verbs/cq.js';
import { driveCq } from '../verbs/cq-driver.js';
import type { Device } from '../verbs/device.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import { dataWrCap } from './outbound.js';
import { INLINE_MAX, MAX_CTRL_WRS } from './link.js';
import type { ResolvedOptions } from './options.js';
import { type BudgetMember, type BudgetTotals, PeerBudget } from './budget.js';

/** What the hub needs of a channel. */
export interface HubMember {
  onWc(wc: WorkCompletion): void;
  /** Every completion of one poll was fed: act on them (post, return credits). */
  afterBatch(): void;
  /** The device closed or the CQ died: fail now. */
  onDeviceGone(message: string): void;
  readonly registeredBytes: number;
  counters(): Counted;
}

type Counted = { enlargements: number; shrinks: number; messagesSent: number; messagesReceived: number; limitRefusals: number; rendezvousWaits: number; rendezvousReadTimeouts: number };

export interface ChannelTotals extends BudgetTotals {
  /** Channels open now (QP made, not yet torn down). */
  channels: number;
  opened: number;
  closed: number;
  failed: number;
  /** Bytes registered by open channels now (slots, mailboxes, staging, rendezvous buffers). */
  registeredBytes: number;
  /** Sums over every channel this device had, open or gone. */
  enlargements: number;
  shrinks: number;
  messagesSent: number;
  messagesReceived: number;
  /** Channels refused because the shared CQ had no room for them. */
  refused: number;
  /** Channels failed because the peer went past a local limit (preauth, decoded value limits). */
  limitRefusals: number;
  /** Rendezvous offers that waited for the per-peer or per-device budget. */
  rendezvousWaits: number;
  /** Channels failed because their rendezvous reads went rendezvousReadTimeoutMs without one completing (the peer did not answer). */
  rendezvousReadTimeouts: number;
  /** Channels closed before their peer's HELLO came, for a newer one: a listener's backlog of them was full. */
  helloEvicted: number;
  /** Channels refused after their HELLOs crossed because a listener's accept queue (its `backlog` not yet accepted) was full. */
  acceptRefused: number;
}

const CQ_DEPTH = 1 << 22;

export class ChannelHub {
  readonly dev: Device;
  readonly cq: CompletionQueue;
  readonly #members = new Map<number, HubMember>();
  readonly #freePds: ProtectionDomain[] = [];
  #reserved = 0;
  #dead = false;
  readonly totals: Omit<ChannelTotals, 'channels' | 'registeredBytes' | keyof BudgetTotals> = {
    opened: 0, closed: 0, failed: 0, enlargements: 0, shrinks: 0, messagesSent: 0, messagesReceived: 0, refused: 0, limitRefusals: 0, rendezvousWaits: 0, rendezvousReadTimeouts: 0, helloEvicted: 0, acceptRefused: 0,
  };
  readonly #budget = new PeerBudget();
  #lastPeerKey = '';

  constructor(dev: Device) {
    this.dev = dev;
    this.cq = dev.createCq({ depth: CQ_DEPTH });
    void this.#loop();
  }

  /** Work requests one channel with these options can have outstanding, per queue. */
  static caps(o: ResolvedOptions): { maxSendWr: number; maxRecvWr: number } {
    const maxSlots = Math.max(...o.ladder.map((p) => p.slots));
    return {
      // What this end itself holds back to, never what the peer grants (a full queue fails the
      // channel): data writes (./outbound.ts dataWrCap), control writes (MAX_CTRL_WRS), reads,
      // the HELLO and an abort's CLOSE, the dedup writes (./dedup.ts).
      maxSendWr: dataWrCap(o) + MAX_CTRL_WRS + o.maxReads + 2 + DEDUP_WRS,
      // HELLO's receive, the mailbox, the live slots and the granted ones.
      maxRecvWr: 1 + o.ctrlSlots + 2 * maxSlots,
    };
  }

  /** QP attributes for a channel, reserving its room in the CQ (release with unreserve). */
  qpInit(o: ResolvedOptions) {
    const c = ChannelHub.caps(o);
    return {
      sendCq: this.cq, recvCq: this.cq, maxSendWr: c.maxSendWr, maxRecvWr: c.maxRecvWr, maxSge: 1,
      maxInline: INLINE_MAX, maxRdAtomic: o.maxReads,
    };
  }

  reserve(o: ResolvedOptions): number {
    const c = ChannelHub.caps(o);
    const n = c.maxSendWr + c.maxRecvWr;
    if (this.#reserved + n > CQ_DEPTH) {
      this.totals.refused++;
      throw new SabreError(ErrorCode.LimitExceeded, `the device's channel completion queue is full (${this.#members.size} channels)`);
    }
    this.#reserved += n;
    return n;
  }

  unreserve(n: number): void {
    this.#reserved -= n;
  }

  takePd(): ProtectionDomain {
    return this.#freePds.pop() ?? this.dev.allocPd();
  }

  /** A PD whose regions and QPs are all gone goes back to the pool. */
  returnPd(pd: ProtectionDomain): void {
    if (pd.mrs.size === 0 && pd.qps.size === 0 && !this.dev.closed && this.#freePds.length < 4096) this.#freePds.push(pd);
  }

  add(qpn: number, m: HubMember): void {
    this.#members.set(qpn, m);
    this.totals.opened++;
  }

  remove(qpn: number, how: 'closed' | 'failed', s: Counted): void {
    if (!this.#members.delete(qpn)) return;
    this.totals[how]++;
    this.totals.enlargements += s.enlargements;
    this.totals.shrinks += s.shrinks;
    this.totals.messagesSent += s.messagesSent;
    this.totals.messagesReceived += s.messagesReceived;
    this.totals.limitRefusals += s.limitRefusals;
    this.totals.rendezvousWaits += s.rendezvousWaits;
    this.totals.rendezvousReadTimeouts += s.rendezvousReadTimeouts;
  }

  // ---- per peer (./budget.ts) ---------------------------------------------------------------

  /** Count a connected channel for its peer; throws ERR_LIMIT_EXCEEDED past a per-peer cap. */
  admit(m: BudgetMember, untrusted: boolean, maxPerPeer: number, maxUntrustedPerPeer: number): void {
    const why = this.#budget.admit(m, untrusted, maxPerPeer, maxUntrustedPerPeer);
    if (why) throw new SabreError(ErrorCode.LimitExceeded, `channel refused: ${why}`);
  }

  /**
   * A channel's peer key: the string the last channel got when it is equal, so the channels of
   * one peer (made one after another) hold one string, not one each.
   */
  peerKey(key: string): string {
    if (key === this.#lastPeerKey) return this.#lastPeerKey;
    return (this.#lastPeerKey = key);
  }

  authorized(m: BudgetMember): void {
    this.#budget.authorized(m);
  }

  forget(m: BudgetMember): void {
    this.#budget.forget(m);
  }

  holdRendezvous(m: BudgetMember, len: number, o: ResolvedOptions): boolean {
    return this.#budget.hold(m, len, o.maxPeerRendezvousBytes, o.maxDeviceRendezvousBytes);
  }

  releaseRendezvous(m: BudgetMember, len: number): void {
    this.#budget.release(m, len);
  }

  stats(): ChannelTotals {
    const t = { ...this.totals, ...this.#budget.totals(), channels: this.#members.size, registeredBytes: 0 };
    for (const m of this.#members.values()) {
      t.registeredBytes += m.registeredBytes;
      const s = m.counters();
      t.enlargements += s.enlargements;
      t.shrinks += s.shrinks;
      t.messagesSent += s.messagesSent;
      t.messagesReceived += s.messagesReceived;
      t.limitRefusals += s.limitRefusals;
      t.rendezvousWaits += s.rendezvousWaits;
      t.rendezvousReadTimeouts += s.rendezvousReadTimeouts;
    }
    return t;
  }

  get members(): Iterable<HubMember> {
    return this.#members.values();
  }

  #loop(): Promise<void> {
    const touched = new Set<HubMember>();
    return driveCq(this.cq, 1024, {
      onBatch: (wcs) => {
        // A completion for a QP no channel holds is a flush of one already torn down.
        let last: HubMember | undefined;
        for (const wc of wcs) {
          const m = this.#members.get(wc.qpn);
          if (!m) continue;
          m.onWc(wc);
          if (m !== last) {
            touched.add(m);
            last = m;
          }
        }
        for (const m of touched) m.afterBatch();
        touched.clear();
      },
      onEnd: (e) => {
        this.#dead = true;
        const why = e instanceof SabreError && e.code === ErrorCode.Closed ? 'the device closed' : `the channel completion queue failed: ${(e as Error).message}`;
        for (const m of [...this.#members.values()]) m.onDeviceGone(why);
        hubs.delete(this.dev);
      },
    });
  }

  get dead(): boolean {
    return this.#dead;
  }
}

const hubs = new WeakMap<Device, ChannelHub>();
const sourced = new WeakSet<Device>();

export function hubOf(dev: Device): ChannelHub {
  if (dev.closed) throw new SabreError(ErrorCode.Closed, 'device is closed');
  let h = hubs.get(dev);
  if (!h || h.dead) {
    h = new ChannelHub(dev);
    hubs.set(dev, h);
  }
  // dev.stats().channels (and so the metrics: sabre_device_stat{stat="channels_…"}) from the
  // first channel on; verbs cannot import channels (layers), hence the device's generic hook.
  if (!sourced.has(dev)) {
    sourced.add(dev);
    dev.addStatsSource('channels', () => hubs.get(dev)!.stats() as unknown as Record<string, unknown>);
  }
  return h;
}

/** The hub of a device, if it ever had a channel. */
export function existingHub(dev: Device): ChannelHub | undefined {
  return hubs.get(dev);
}
