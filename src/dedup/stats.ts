// Dedup totals per device memory (so per device): the chunk stores over it and every transfer
// its senders and receivers finished, for dev.stats().dedup. Verbs cannot import dedup (layers),
// so dedupMemoryOf(pd) registers these totals with the device's generic hook
// (Device.addStatsSource) the first time dedup touches that device.
import type { ChunkStoreStats, DedupMemory, RecvStats, SendResult } from './types.js';

export interface DedupSentTotals {
  transfers: number;
  failed: number;
  bytes: number;
  chunks: number;
  chunksSent: number;
  bytesSent: number;
  rounds: number;
}

export interface DedupReceivedTotals {
  transfers: number;
  /** Dedup sends refused before they began: the receiver takes none (dedup: false) or had no device memory for a landing zone. */
  refused: number;
  failed: number;
  bytes: number;
  chunks: number;
  chunksFromStore: number;
  bytesFromStore: number;
  chunksRepeated: number;
  chunksReceived: number;
  bytesReceived: number;
  rounds: number;
  hashedInBand: number;
  rehashedRounds: number;
}

/** dev.stats().dedup */
export interface DedupDeviceStats {
  /** Chunk stores open on the device; `store` sums them. */
  stores: number;
  store: ChunkStoreStats;
  sent: DedupSentTotals;
  received: DedupReceivedTotals;
}

interface StatsOf {
  stats(): ChunkStoreStats;
}

export class DedupTotals {
  readonly stores = new Set<StatsOf>();
  readonly sent: DedupSentTotals = { transfers: 0, failed: 0, bytes: 0, chunks: 0, chunksSent: 0, bytesSent: 0, rounds: 0 };
  readonly received: DedupReceivedTotals = {
    transfers: 0, refused: 0, failed: 0, bytes: 0, chunks: 0, chunksFromStore: 0, bytesFromStore: 0, chunksRepeated: 0,
    chunksReceived: 0, bytesReceived: 0, rounds: 0, hashedInBand: 0, rehashedRounds: 0,
  };

  addSent(r: SendResult): void {
    const s = this.sent;
    s.transfers++;
    s.bytes += r.total;
    s.chunks += r.chunks;
    s.chunksSent += r.chunksSent;
    s.bytesSent += r.bytesSent;
    s.rounds += r.rounds;
  }

  addReceived(r: RecvStats): void {
    const t = this.received;
    t.transfers++;
    t.bytes += r.total;
    t.chunks += r.chunks;
    t.chunksFromStore += r.chunksFromStore;
    t.bytesFromStore += r.bytesFromStore;
    t.chunksRepeated += r.chunksRepeated;
    t.chunksReceived += r.chunksReceived;
    t.bytesReceived += r.bytesReceived;
    t.rounds += r.rounds;
    t.hashedInBand += r.hashedInBand;
    t.rehashedRounds += r.rehashedRounds;
  }

  snapshot(): DedupDeviceStats {
    const store: DedupDeviceStats['store'] = {
      entries: 0, bytes: 0, budgetBytes: 0, maxEntries: 0, scopes: 0, pinned: 0,
      hits: 0, misses: 0, inserts: 0, duplicates: 0, evictions: 0, evictedBytes: 0, refused: 0,
    };
    const acc = store as unknown as Record<string, number>;
    for (const st of this.stores) for (const [k, v] of Object.entries(st.stats())) if (typeof v === 'number') acc[k] = (acc[k] ?? 0) + v;
    return { stores: this.stores.size, store, sent: { ...this.sent }, received: { ...this.received } };
  }
}

const totals = new WeakMap<object, DedupTotals>();

/** The totals of a device memory (created on first use). */
export function dedupTotals(mem: DedupMemory): DedupTotals {
  let t = totals.get(mem);
  if (!t) totals.set(mem, (t = new DedupTotals()));
  return t;
}
