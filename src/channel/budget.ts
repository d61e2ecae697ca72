// What the channels of one device hold per peer and in all: channels, untrusted channels, and
// bytes of rendezvous messages (being read, or read and not yet taken by the application). One
// table, keyed by peer (its device address as the link saw it); the hub (./hub.ts) owns one per
// device and shows its totals in dev.stats().channels.
//
// A channel past a per-peer cap is refused when it is admitted (right after the HELLOs, so the
// peer is told why); a rendezvous read past a budget waits, holding nothing, until another read's
// bytes are released — the waiting channels are woken then. One message larger than a budget
// still goes when nothing else is held for the peer and the device (maxMessage bounds it): it
// could never go otherwise.

/** What a channel is, to the table. */
export interface BudgetMember {
  readonly peerKey: string;
  onBudget(): void;
}

interface PeerRow {
  channels: number;
  untrusted: number;
  rendezvous: number;
}

export interface BudgetTotals {
  /** Peers with a channel open now. */
  peers: number;
  /** Channels open now that are not yet authorized (preauth). */
  untrusted: number;
  /** Rendezvous bytes held now (sinks, and messages read and not yet taken). */
  rendezvousHeldBytes: number;
  /** Channels refused because their peer had maxChannelsPerPeer (or preauth.maxPerPeer untrusted) open. */
  peerCapRefused: number;
}

export class PeerBudget {
  readonly #peers = new Map<string, PeerRow>();
  /** Members admitted, and whether each still counts as untrusted (a flag, not an object per member). */
  readonly #members = new Map<BudgetMember, boolean>();
  readonly #waiting = new Set<BudgetMember>();
  #untrusted = 0;
  #held = 0;
  #peerCapRefused = 0;
  #wakeQueued = false;

  #row(key: string): PeerRow {
    let r = this.#peers.get(key);
    if (!r) this.#peers.set(key, (r = { channels: 0, untrusted: 0, rendezvous: 0 }));
    return r;
  }

  #drop(key: string, r: PeerRow): void {
    if (r.channels === 0 && r.rendezvous === 0) this.#peers.delete(key);
  }

  /** Count a channel for its peer; why not (counted as a refusal), past a cap. */
  admit(m: BudgetMember, untrusted: boolean, maxPerPeer: number, maxUntrustedPerPeer: number): string | undefined {
    if (this.#members.has(m)) return undefined;
    const r = this.#row(m.peerKey);
    const why =
      r.channels >= maxPerPeer ? `the peer has ${r.channels} channels open (maxChannelsPerPeer ${maxPerPeer})` :
      untrusted && r.untrusted >= maxUntrustedPerPeer ? `the peer has ${r.untrusted} channels open before authorization (preauth.maxPerPeer ${maxUntrustedPerPeer})` :
      undefined;
    if (why) {
      this.#peerCapRefused++;
      this.#drop(m.peerKey, r);
      return why;
    }
    r.channels++;
    if (untrusted) {
      r.untrusted++;
      this.#untrusted++;
    }
    this.#members.set(m, untrusted);
    return undefined;
  }

  authorized(m: BudgetMember): void {
    if (this.#members.get(m) !== true) return;
    this.#members.set(m, false);
    this.#row(m.peerKey).untrusted--;
    this.#untrusted--;
  }

  /** The channel is gone (its rendezvous bytes were released by its teardown). */
  forget(m: BudgetMember): void {
    this.#waiting.delete(m);
    const untrusted = this.#members.get(m);
    if (untrusted === undefined) return;
    this.#members.delete(m);
    const r = this.#row(m.peerKey);
    r.channels--;
    if (untrusted) {
      r.untrusted--;
      this.#untrusted--;
    }
    this.#drop(m.peerKey, r);
  }

  hold(m: BudgetMember, len: number, maxPeer: number, maxDevice: number): boolean {
    const r = this.#row(m.peerKey);
    const alone = r.rendezvous === 0 && this.#held === 0;
    if (!alone && (r.rendezvous + len > maxPeer || this.#held + len > maxDevice)) {
      this.#waiting.add(m);
      this.#drop(m.peerKey, r);
      return false;
    }
    r.rendezvous += len;
    this.#held += len;
    return true;
  }

  release(m: BudgetMember, len: number): void {
    const r = this.#row(m.peerKey);
    r.rendezvous -= len;
    this.#held -= len;
    this.#drop(m.peerKey, r);
    if (this.#waiting.size === 0 || this.#wakeQueued) return;
    // Not from inside the releasing channel's own step: the woken ones run after it.
    this.#wakeQueued = true;
    queueMicrotask(() => {
      this.#wakeQueued = false;
      const ws = [...this.#waiting];
      this.#waiting.clear();
      for (const w of ws) w.onBudget();
    });
  }

  totals(): BudgetTotals {
    return { peers: this.#peers.size, untrusted: this.#untrusted, rendezvousHeldBytes: this.#held, peerCapRefused: this.#peerCapRefused };
  }
}
