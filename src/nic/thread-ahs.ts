// Address-handle ids of a device whose NIC runs on a worker thread. An srd send names its
// destination by a small id the NIC thread resolves (the address crosses once, not with every
// WQE). A server that answers each client at its source address makes one id per client, so
// the ids are bounded: at AH_MAX the least recently used quarter goes at once (one scan per
// AH_MAX/4 new destinations, not one per send), and the NIC thread is told to forget them in the
// same request that names the new id. That request is safe for the ids it forgets: the NIC
// thread takes everything the WQE ring holds before it serves a request (the application
// commits what a batch wrote first), so no record it has not yet taken names a forgotten id,
// and a record it took has its address already. A destination whose id went gets a new one
// at its next send.

/** Address-handle ids a device keeps (each side: the application's map, the NIC thread's). */
export const AH_MAX = 4096;

/** The application's side: destination key → id, least recently used first to go. */
export class AhIds {
  readonly #ids = new Map<string, { id: number; used: number }>();
  readonly #free: number[] = [];
  #next = 1;
  #clock = 0;
  /** Ids given up to make room (dev.stats().nic.ahEvictions). */
  evictions = 0;

  /** The id `key` has, or undefined (then add() one). */
  id(key: string): number | undefined {
    const e = this.#ids.get(key);
    if (e === undefined) return undefined;
    e.used = ++this.#clock;
    return e.id;
  }

  /** A new id for `key` (in 1..AH_MAX), and the ids that went to make room for it. */
  add(key: string): { id: number; forgot: number[] } {
    let forgot: number[] = [];
    if (this.#ids.size >= AH_MAX) forgot = this.#evict(Math.max(1, AH_MAX >> 2));
    const id = this.#free.pop() ?? this.#next++;
    this.#ids.set(key, { id, used: ++this.#clock });
    return { id, forgot };
  }

  #evict(n: number): number[] {
    const oldest = [...this.#ids].sort((a, b) => a[1].used - b[1].used).slice(0, n);
    for (const [key, e] of oldest) {
      this.#ids.delete(key);
      this.#free.push(e.id);
    }
    this.evictions += oldest.length;
    return oldest.map(([, e]) => e.id);
  }
}

/** Whether `id` is one the application's side can give (the NIC thread refuses others: its table stays within AH_MAX). */
export function validAhId(id: unknown): id is number {
  return Number.isInteger(id) && (id as number) >= 1 && (id as number) <= AH_MAX;
}
