// "The oldest entry of the source holding the most": how a full backlog makes room for a new
// entry (the cm listener's connecting requests, the channel listener's channels waiting for a
// HELLO), so that a source that floods churns its own share and another source's entries keep
// their time. Bounded by the map's size, which the backlog bounds.

/** How many entries of `bySource` (key → source) each source holds, and the source that holds the most (the first to reach that count). */
export function busiestSource<K>(bySource: ReadonlyMap<K, string>): { most: string | undefined; count: Map<string, number> } {
  const count = new Map<string, number>();
  let most: string | undefined;
  for (const h of bySource.values()) {
    const n = (count.get(h) ?? 0) + 1;
    count.set(h, n);
    if (most === undefined || n > count.get(most)!) most = h;
  }
  return { most, count };
}

/** The oldest key (the map's insertion order) whose source is `source`. */
export function oldestOf<K>(bySource: ReadonlyMap<K, string>, source: string): K | undefined {
  for (const [k, h] of bySource) if (h === source) return k;
  return undefined;
}
