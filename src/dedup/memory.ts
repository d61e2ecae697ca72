// A device's dedup memory (the DedupMemory of types.ts: a DeviceMemory) and its chunk stores.
//
// Reaching it from the public API only (dedup sits above verbs, DESIGN §2): a MemoryRegion's
// `buffer` is a view into device memory, and DeviceMemory.of(view) names the memory it lies in.
import { DeviceMemory } from '../dataplane/device-memory.js';
import { Access } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { Device } from '../verbs/device.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import { dedupTotals } from './stats.js';
import { ChunkStore } from './store.js';
import type { DedupMemory } from './types.js';

const cache = new WeakMap<Device, DedupMemory>();

/** The device memory of the device `pd` belongs to. */
export function dedupMemoryOf(pd: ProtectionDomain): DedupMemory {
  const dev = pd.device;
  let m = cache.get(dev);
  if (m) return m;
  const probe = pd.regMr(64, Access.LocalWrite);
  try {
    m = DeviceMemory.of(probe.buffer);
  } finally {
    probe.deregister();
  }
  if (!m) throw new SabreError(ErrorCode.NotSupported, 'dedup: this device has no WebAssembly data plane memory');
  cache.set(dev, m);
  const mem = m;
  dev.addStatsSource('dedup', () => dedupTotals(mem).snapshot() as unknown as Record<string, unknown>);
  return m;
}

const stores = new WeakMap<Device, ChunkStore>();

/**
 * The device's chunk store, shared by the features that receive dedup transfers on it (channels,
 * the file service); each peer is its own scope. Made on first use with the default budget
 * (64 MiB of device memory, 2^20 entries); in dev.stats().dedup like any other store.
 */
export function dedupStoreOf(pd: ProtectionDomain): ChunkStore {
  let s = stores.get(pd.device);
  if (!s) stores.set(pd.device, (s = new ChunkStore(dedupMemoryOf(pd))));
  return s;
}
