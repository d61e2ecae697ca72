// The engine's timers: one table, entries keyed by the object they time (a flow's watchdog, a
// message waiting out an RNR back-off) and tagged with their kind; engine.ts runs a due entry
// through the handler of its kind. Re-arming a key replaces its entry. Sans-I/O: the shell asks
// next() for the earliest deadline and calls back with the time.
export interface TimerEntry {
  readonly kind: string;
  readonly key: object;
  readonly at: number;
}

export class TimerTable<T extends TimerEntry> {
  readonly #byKey = new Map<object, T>();

  /** Arm `t`, replacing any entry under the same key (it moves to the end: entries run in arming order). */
  arm(t: T): void {
    this.#byKey.delete(t.key);
    this.#byKey.set(t.key, t);
  }

  has(key: object): boolean {
    return this.#byKey.has(key);
  }

  cancel(key: object): void {
    this.#byKey.delete(key);
  }

  /**
   * The earliest deadline, or undefined. `keep` is asked about each entry: one that became moot
   * before it was due (the watchdog of a flow gone idle) is dropped, so the shell does not keep
   * a timer pending for nothing.
   */
  next(keep: (t: T) => boolean): number | undefined {
    let at: number | undefined;
    for (const t of this.#byKey.values()) {
      if (!keep(t)) {
        this.#byKey.delete(t.key);
        continue;
      }
      if (at === undefined || t.at < at) at = t.at;
    }
    return at;
  }

  /** Remove and return the entries due at `now`, in arming order. */
  due(now: number): T[] {
    const out: T[] = [];
    for (const t of this.#byKey.values()) if (t.at <= now) out.push(t);
    for (const t of out) this.#byKey.delete(t.key);
    return out;
  }

  get size(): number {
    return this.#byKey.size;
  }
}
