// Requests parked at a tcp endpoint for a raw QP-to-QP connect (src/transport/tcp/connector.ts)
// whose QP is not connecting yet: the peer's initiative, or the responder's fallback dial, comes
// before this end's qp.connect. At most PARKED_PER_QP per QP; each waits under its handshake's
// deadline and leaves the table when it closes.
import type { MpaConnection } from './connection.js';

/** Parked Requests per QP, at most: more are refused (the handshake deadline bounds each). */
const PARKED_PER_QP = 16;

export interface Parked {
  conn: MpaConnection;
  initiatorQpn: number;
  nonce: number;
  /** The Request's sabrePdProof, if it had one. */
  proof: Uint8Array | undefined;
}

export class ParkedRequests {
  readonly #byQp = new Map<number, Parked[]>();

  get size(): number {
    let n = 0;
    for (const l of this.#byQp.values()) n += l.length;
    return n;
  }

  /** Park `p` for QP `responderQpn`; false (refused with the reason) when it has its share. */
  park(responderQpn: number, p: Parked): boolean {
    const list = this.#byQp.get(responderQpn) ?? [];
    if (list.length >= PARKED_PER_QP) {
      p.conn.reject(`too many pending connections for QP ${responderQpn}`);
      return false;
    }
    list.push(p);
    this.#byQp.set(responderQpn, list);
    p.conn.once('close', () => {
      const l = this.#byQp.get(responderQpn);
      if (!l) return;
      const i = l.findIndex((x) => x.conn === p.conn);
      if (i >= 0) l.splice(i, 1);
      if (!l.length) this.#byQp.delete(responderQpn);
    });
    return true;
  }

  /**
   * The oldest Request parked for QP `localQpn` by `remoteQpn`, of those `eligible` says (a copy
   * of one, made by whoever saw it, can only come after it). `proven` says whether one may be
   * taken (where the connect has a secret, it proves it): those for the pairing that are not,
   * and copies of the one taken (the same proof), are refused with `unproven` on the way;
   * others stay parked.
   */
  take(localQpn: number, remoteQpn: number, proven: (p: Parked) => boolean, unproven: string, eligible?: (p: Parked) => boolean): Parked | undefined {
    const list = this.#byQp.get(localQpn);
    if (!list) return undefined;
    let found: Parked | undefined;
    for (const p of [...list]) {
      if (p.initiatorQpn !== remoteQpn || p.conn.state !== 'handshake' || (eligible && !eligible(p))) continue;
      const copy = found?.proof !== undefined && p.proof !== undefined && Buffer.compare(found.proof, p.proof) === 0;
      if (found && !copy) continue;
      list.splice(list.indexOf(p), 1);
      if (!copy && proven(p)) found = p;
      else p.conn.reject(unproven);
    }
    if (!list.length) this.#byQp.delete(localQpn);
    return found;
  }

  closeAll(): void {
    for (const list of this.#byQp.values()) for (const p of list) p.conn.close();
    this.#byQp.clear();
  }
}
