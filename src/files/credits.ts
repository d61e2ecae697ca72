// One side's credit accounting on one RDMA connection (MS-SMBD §3.1.5.1, §3.1.5.8, §3.1.5.9),
// shared by the client and the server state machines.
//
// A credit is one posted receive at the peer that the peer has granted us: a Send (or a Write
// with Immediate) spends one. Both directions are credited. The rules, each from a bug that
// SMB Direct or NFS/RDMA implementations shipped:
//
// - Grants are computed when a message leaves, from the counts of that moment — never from a
//   count taken when the message was built or queued (a grant from a stale posted count promised
//   receives that were already consumed: smb client "make use of
//   smbdirect_socket.recv_io.credits.available", 2026). `grantable()` is what is posted and not yet
//   granted, capped by the target.
// - The last credit is only spent by a message that grants at least one credit back
//   (MS-SMBD 3.1.5.1). Otherwise neither side may ever send again: the last-credit deadlock
//   (smb client "fix last send credit problem causing disconnects", 2026). It is not enough that
//   the peer "still holds one of ours": it may be spending it at this very moment, and when both
//   last messages cross, both sides end with nothing (our own randomized test found exactly
//   that with the weaker rule). So that the rule never blocks a side whose receives are all
//   granted, one posted receive is held back from ordinary grants: the reserve, granted only by
//   a last-credit message (the smb fix refills a receive before the last credit; here it is
//   always there). The owner posts target + RESERVE receives.
// - Credits belong to one connection instance: a new connection starts from a new Credits
//   (send = 1 for the one message allowed before the first grant), never from the old counts
//   (xprtrdma "Avoid deadlock when credit window is reset").
// - A message from a peer that held none of our credits is an overrun: the caller terminates.

export const CREDIT_FIELD_MAX = 0xffff;
/** Receives posted beyond the target, granted only by a message that spends the last credit. */
export const RESERVE = 1;

export class Credits {
  /** Credits the peer granted us and we have not spent. */
  send: number;
  /** Our receives posted and not yet consumed. */
  posted = 0;
  /** Credits the peer holds: granted minus the messages it has sent us. */
  grantedOut: number;
  /** How many credits we want the peer to hold. */
  target: number;
  /** What the peer says it wants to hold (its creditsRequested). */
  peerTarget = 1;

  /**
   * `send`: credits we start with (1: the one message allowed before any grant, as the
   * AuthenticateRequest); `grantedOut`: credits the peer starts with (1 at the listener, for
   * that same message). The owner sets `posted` as it posts receives (target + RESERVE).
   */
  constructor(target: number, init: { send?: number; grantedOut?: number } = {}) {
    this.target = target;
    this.send = init.send ?? 0;
    this.grantedOut = init.grantedOut ?? 0;
  }

  /** Receives we could grant now with an ordinary message (the reserve stays back). */
  grantable(): number {
    return Math.max(0, Math.min(this.posted - RESERVE - this.grantedOut, this.target - this.grantedOut, CREDIT_FIELD_MAX));
  }

  /** True when a message could leave now (see spend). */
  canSpend(): boolean {
    return this.send >= 2 || (this.send === 1 && this.posted > this.grantedOut);
  }

  /**
   * Spend a credit for a message leaving now and take the grant it carries; -1 when it may not
   * leave: no credit, or the last credit and not even the reserve to grant.
   */
  spend(): number {
    if (!this.canSpend()) return -1;
    this.send--;
    if (this.send > 0) return this.grant();
    // The last credit: this message must grant; the reserve is for exactly this.
    const g = Math.max(1, this.grantable());
    this.grantedOut += g;
    return g;
  }

  /** The grant of a message that costs no credit (a status block written by plain RDMA Write). */
  grant(): number {
    const g = this.grantable();
    this.grantedOut += g;
    return g;
  }

  /** The peer's header granted `n`. */
  granted(n: number): void {
    this.send += n;
  }

  /**
   * One of our receives completed with a message from the peer. False: the peer held no credit
   * (an overrun; the receive is consumed all the same).
   */
  received(): boolean {
    this.posted--;
    if (this.grantedOut === 0) return false;
    this.grantedOut--;
    return true;
  }

  /** Below this many held credits the peer is about to starve: grant without waiting for traffic. */
  lowWater(): number {
    return Math.max(1, Math.floor(this.target / 4));
  }

  /** A credit-only message is due: the peer holds few of ours and we have some to give. */
  grantDue(): boolean {
    return this.grantedOut < this.lowWater() && this.grantable() > 0;
  }
}
