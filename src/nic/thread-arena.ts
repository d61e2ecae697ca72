// One device memory for several NIC threads (openDevice `workers` ≥ 2, ./multi-port.ts): the
// first thread creates it and owns its one allocator; every other thread attaches to the same
// shared memory (its placement kernels, region table and arena are the same bytes) and makes
// its allocations through a mailbox the first thread serves, as the application's thread does.
// Allocations off the first thread are rare (a thread's staging areas when it opens, a tcp
// connection's receive buffer, a region's memory given back by the last thread done with it).
import type { AllocatorStats } from '../dataplane/allocator.js';
import { type Arena, DeviceMemory } from '../dataplane/device-memory.js';
import type { MemoryMap } from '../dataplane/memory-map.js';
import { createMailbox, MailboxClient, MailboxServer, markMailboxGone, wasUnanswered } from './mailbox.js';

/** What a closed device's memory reports: nothing allocated, nothing free. */
const CLOSED_ARENA: AllocatorStats = { used: 0, free: 0, capacity: 0, largestFree: 0, grows: 0 };

/**
 * The application thread's side of a NIC thread's device memory: allocations are that thread's
 * slow-path calls (`ask`, which fails the device when nobody answers). Once `gone` (the device
 * closing or failed), the memory went with the thread: a free is nothing to do.
 */
export function applicationArena(ask: (op: string, a: Record<string, unknown>) => unknown, gone: { readonly yes: boolean }): Arena {
  return {
    alloc: (length, align) => ask('alloc', { length, align }) as number,
    free: (addr) => void (gone.yes ? undefined : ask('free', { addr })),
    sizeOf: (addr) => (gone.yes ? undefined : ((ask('sizeOf', { addr }) as number | null) ?? undefined)),
    stats: () => (gone.yes ? { ...CLOSED_ARENA } : (ask('memStats', {}) as AllocatorStats)),
    freeBlocks: () => (gone.yes ? [] : (ask('freeBlocks', {}) as Array<[number, number]>)),
  };
}

/** What a NIC thread that attaches to another's device memory is started with. */
export interface SharedMemoryInit {
  memory: WebAssembly.Memory;
  module: WebAssembly.Module;
  map: MemoryMap;
  maximumBytes: number;
  /** The mailbox its allocations go through (served by the memory's owner). */
  arena: SharedArrayBuffer;
}

/** The mailboxes of `n` attaching threads (handed to the owner as NicThreadInit.arenas). */
export function arenaMailboxes(n: number): SharedArrayBuffer[] {
  return Array.from({ length: n }, () => createMailbox(64 * 1024));
}

/** The owner's side: serve the attached threads' allocations from `dm` until the thread ends. */
export function serveArenas(dm: DeviceMemory, sabs: readonly SharedArrayBuffer[]): () => void {
  const servers = sabs.map((sab) => new MailboxServer(sab, (op: string, a: any): unknown => {
    switch (op) {
      case 'alloc':
        return dm.alloc(a.length, a.align);
      case 'free':
        dm.free(a.addr);
        return null;
      case 'sizeOf':
        return dm.sizeOf(a.addr) ?? null;
      case 'memStats':
        return dm.stats();
      case 'freeBlocks':
        return dm.freeBlocks();
      default:
        throw new Error(`unknown arena request ${op}`);
    }
  }));
  for (const s of servers) s.start();
  // However this thread ends, an attached thread blocked in an allocation fails now.
  process.on('exit', () => {
    for (const sab of sabs) markMailboxGone(sab);
  });
  return () => {
    for (const s of servers) s.stop();
  };
}

/** An attaching thread's side: the shared memory, its allocations made by the owner. */
export async function attachShared(init: SharedMemoryInit): Promise<DeviceMemory> {
  const client = new MailboxClient(init.arena);
  const arena: Arena = {
    alloc: (length, align) => client.call('alloc', { length, align }) as number,
    free: (addr) => {
      // The owner gone (the device failing): the memory went with it.
      try {
        client.call('free', { addr });
      } catch (e) {
        if (!wasUnanswered(e)) throw e;
      }
    },
    sizeOf: (addr) => (client.call('sizeOf', { addr }) as number | null) ?? undefined,
    stats: () => client.call('memStats', {}) as AllocatorStats,
    freeBlocks: () => client.call('freeBlocks', {}) as Array<[number, number]>,
  };
  return DeviceMemory.attach(init.memory, init.module, init.map, init.maximumBytes, arena);
}
