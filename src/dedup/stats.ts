// Dedup totals per device memory (so per device): the chunk stores over it and every transfer
// its senders and receivers finished, for dev.stats().dedup. Verbs cannot import dedup (layers),
// so dedupMemoryOf(pd) registers these totals with the device's generic hook
// (Device.addStatsSource) the first time dedup touches that device.
import { stageKeptBytes } from './stage-pool.js';
import type { ChunkStoreStats, DedupMemory, RecvStats, SendResult } from './types.js';

/**
 * The counters a finished transfer adds to its side's totals, by name (a transfer's `total`
 * goes to `bytes`); the totals are the same names plus transfers, failed (and refused).
 */
const SENT_SUMMED = ['chunks', 'chunksSent', 'bytesSent', 'rounds'] as const satisfies readonly (keyof SendResult)[];
const RECEIVED_SUMMED = [
  'chunks', 'chunksFromStore', 'bytesFromStore', 'chunksRepeated', 'chunksReceived', 'bytesReceived', 'rounds', 'hashedInBand', 'rehashedRounds', 'leftBasis', 'leftBasisRanges',
] as const satisfies readonly (keyof RecvStats)[];

export type DedupSentTotals = Record<(typeof SENT_SUMMED)[number] | 'transfers' | 'failed' | 'bytes', number>;

/**
 * `refused`: dedup sends refused before they began (the receiver takes none, dedup: false, or had
 * no device memory for a landing zone). `helloRefused`: receivers whose HELLO the sender refused
 * (ABORT status HelloRefused: it cannot use their parameters; no transfer ran). `overLimit`: transfers ended because what they declared
 * or reached went past the receiver's limits (maxTotal, maxChunks, maxEntries); also in `failed`.
 */
export type DedupReceivedTotals = Record<(typeof RECEIVED_SUMMED)[number] | 'transfers' | 'refused' | 'helloRefused' | 'overLimit' | 'failed' | 'bytes', number>;

function zeros<K extends string>(keys: readonly K[]): Record<K, number> {
  const t = {} as Record<K, number>;
  for (const k of keys) t[k] = 0;
  return t;
}

/** dev.stats().dedup */
export interface DedupDeviceStats {
  /** Chunk stores open on the device; `store` sums them. */
  stores: number;
  store: ChunkStoreStats;
  sent: DedupSentTotals;
  received: DedupReceivedTotals;
  /** Device memory the senders' staging pool keeps for the next send (at most two blocks, freed after 5 s idle). */
  stageKeptBytes: number;
}

interface StatsOf {
  stats(): ChunkStoreStats;
}

export class DedupTotals {
  readonly #mem: DedupMemory;
  readonly stores = new Set<StatsOf>();
  readonly sent: DedupSentTotals = { transfers: 0, failed: 0, bytes: 0, ...zeros(SENT_SUMMED) };
  readonly received: DedupReceivedTotals = { transfers: 0, refused: 0, helloRefused: 0, overLimit: 0, failed: 0, bytes: 0, ...zeros(RECEIVED_SUMMED) };

  constructor(mem: DedupMemory) {
    this.#mem = mem;
  }

  addSent(r: SendResult): void {
    const s = this.sent;
    s.transfers++;
    s.bytes += r.total;
    for (const k of SENT_SUMMED) s[k] += r[k];
  }

  addReceived(r: RecvStats): void {
    const t = this.received;
    t.transfers++;
    t.bytes += r.total;
    for (const k of RECEIVED_SUMMED) t[k] += r[k];
  }

  snapshot(): DedupDeviceStats {
    const store: DedupDeviceStats['store'] = {
      entries: 0, bytes: 0, copies: 0, storedBytes: 0, referenced: 0, referencedBytes: 0, budgetBytes: 0, maxEntries: 0, scopes: 0, pinned: 0,
      hits: 0, misses: 0, inserts: 0, duplicates: 0, sharedInserts: 0, sharedMismatches: 0, evictions: 0, evictedBytes: 0, refused: 0,
    };
    const acc = store as unknown as Record<string, number>;
    for (const st of this.stores) for (const [k, v] of Object.entries(st.stats())) if (typeof v === 'number') acc[k] = (acc[k] ?? 0) + v;
    return { stores: this.stores.size, store, sent: { ...this.sent }, received: { ...this.received }, stageKeptBytes: stageKeptBytes(this.#mem) };
  }
}

const totals = new WeakMap<object, DedupTotals>();

/** The totals of a device memory (created on first use). */
export function dedupTotals(mem: DedupMemory): DedupTotals {
  let t = totals.get(mem);
  if (!t) totals.set(mem, (t = new DedupTotals(mem)));
  return t;
}
