// The NIC thread's side of regions shared by several NIC threads of one device (./multi-port.ts):
// the first thread registers a region (it alone writes the region table, so keys are chosen
// once) and the others adopt it, so the same keys work on every thread. A deregister reaches
// every thread; the region's memory returns to the device once the last of them has no queued
// send naming it (a count in device memory, the fence word, each thread taking one off).
// Keys: the region table entry is shared (every thread's placement kernel checks it), each
// thread's own record serves its reads and atomics; each thread's deregister ends both.
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import type { DeviceMemory } from '../dataplane/device-memory.js';
import type { MrRecord } from '../rdmap/memory.js';
import type { InlinePort } from './inline-port.js';

/** An adopt request: the region's facts; `ext`: its memory comes on the buffers port (shared memory outside the device, or a shadow). */
export interface AdoptArgs {
  stag: number;
  addr: number;
  length: number;
  pd: number;
  access: number;
  ext: boolean;
}

export function adoptRegion(port: InlinePort, a: AdoptArgs, buffers: MessagePort): void {
  let ext: Uint8Array | undefined;
  if (a.ext) {
    ext = (receiveMessageOnPort(buffers)?.message as { buf: Uint8Array } | undefined)?.buf;
    if (!ext) throw new Error('the region\'s memory did not arrive');
  }
  // The first thread's allocation may have grown the memory: this thread's views must reach it.
  port.memory.dm.refresh();
  port.memory.adopt({ stag: a.stag, addr: a.addr, length: a.length, pd: a.pd, access: a.access, ...(ext ? { ext } : {}) });
}

/** A deregister request: `adopted` on every thread but the first; `fence`, for a region of device memory, the count word. */
export interface DeregArgs {
  stag: number;
  adopted?: boolean;
  fence?: number;
}

export function deregisterShared(port: InlinePort, a: DeregArgs): void {
  const rec = (a.adopted ? port.memory.forget(a.stag) : port.lookup(a.stag)) as MrRecord | undefined;
  const fence = a.fence;
  const release = fence === undefined ? undefined : (): void => lastFrees(port.memory.dm, fence, rec?.addr);
  if (!a.adopted) {
    if (rec) port.deregister(rec, release);
    else release?.();
    return;
  }
  // The table entry too, still this region's (the first thread, told first, has cleared it
  // already): a first thread that is gone (a device-fatal) is skipped, and the other threads
  // run on until the device's close ends them, their kernels placing under the keys it left.
  // A clear, not a free: the index stays the first thread's to hand out.
  const idx = a.stag >>> 8;
  const table = port.memory.dm.regions;
  if (idx > 0 && idx < table.capacity && table.read(idx).stag === a.stag) table.clear(idx);
  // A region of the caller's memory has no fence word: the caller has it back now.
  if (rec) port.fence.letGo(rec, release);
  else release?.();
}

/** One thread is done with the region: the last one gives its memory (and the fence word) back. */
function lastFrees(dm: DeviceMemory, fence: number, addr: number | undefined): void {
  dm.refresh();
  if (Atomics.sub(new Int32Array(dm.buffer(), fence, 1), 0, 1) !== 1) return;
  if (addr !== undefined) dm.free(addr);
  dm.free(fence);
}
