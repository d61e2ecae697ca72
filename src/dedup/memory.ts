// A device's dedup memory (the DedupMemory of types.ts: a DeviceMemory) and its chunk stores.
//
// The device hands it over itself (dev.dataPlane: the device memory as this thread reaches it —
// the device's own, or, when its NIC runs on a thread, the same shared memory with this
// thread's kernels and the NIC's allocator behind it).
import { ErrorCode, SabreError } from '../core/errors.js';
import type { Device } from '../verbs/device.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import { dedupTotals } from './stats.js';
import { ChunkStore, type ChunkStoreOptions, STORE_DEFAULTS } from './store.js';
import type { DedupMemory } from './types.js';

const cache = new WeakMap<Device, DedupMemory>();

/** The device memory of the device `pd` belongs to. */
export const dedupMemoryOf = (pd: ProtectionDomain): DedupMemory => dedupMemoryOfDevice(pd.device);

/** The device memory of `dev` (a file client fills its basis before its dedup channel exists). */
export function dedupMemoryOfDevice(dev: Device): DedupMemory {
  let m = cache.get(dev);
  if (m) return m;
  m = dev.dataPlane;
  if (!m) throw new SabreError(ErrorCode.NotSupported, 'dedup: this device has no WebAssembly data plane memory');
  cache.set(dev, m);
  const mem = m;
  dev.addStatsSource('dedup', () => dedupTotals(mem).snapshot() as unknown as Record<string, unknown>);
  return m;
}

/** A device's stores, by their configuration (storeKey): the default one and any a channel asked for. */
const stores = new WeakMap<Device, Map<string, ChunkStore>>();

/** The configuration a store is found by: equal options, the same store. */
const storeKey = (o: ChunkStoreOptions): string =>
  `${o.hash ?? STORE_DEFAULTS.hash}|${o.shared ?? STORE_DEFAULTS.shared}|${o.budgetBytes ?? STORE_DEFAULTS.budgetBytes}|${o.maxEntries ?? STORE_DEFAULTS.maxEntries}`;

/**
 * The device's chunk store with these options, used by the features that receive dedup
 * transfers on it (channels, the file service); each peer is its own scope, and sees only the
 * chunks it sent or named as its basis. Made on first use; the default (no options) keys chunks
 * by XXH3-128 with 64 MiB of device memory and 2^20 entries. A channel's `dedupStore` option
 * names another one (SHA-256 keys, bytes kept once across peers with `shared`, another budget):
 * channels asking for equal options share it. Every store
 * shows in dev.stats().dedup. The options are checked by the ChunkStore (ERR_INVALID_ARGUMENT).
 */
export const dedupStoreOf = (pd: ProtectionDomain, o: ChunkStoreOptions = {}): ChunkStore => dedupStoreOfDevice(pd.device, o);

/** dedupStoreOf by the device itself. */
export function dedupStoreOfDevice(dev: Device, o: ChunkStoreOptions = {}): ChunkStore {
  let m = stores.get(dev);
  if (!m) stores.set(dev, (m = new Map()));
  const key = storeKey(o);
  let s = m.get(key);
  if (!s) m.set(key, (s = new ChunkStore(dedupMemoryOfDevice(dev), o)));
  return s;
}
