// Staging memory of dedup senders (the object, read or copied into device memory so the chunker
// runs where it lies and the RDMA WRITEs read from it), kept for the next send on the same
// device memory. A region registered for each send (regMr of the object's size) costs the NIC
// thread a zero fill of all of it and this thread a blocking call while that runs: tens of
// milliseconds per object, more than the chunking. A kept block is only allocated arena memory;
// a send registers a view of it (an external region over the shared memory, no fill), which is
// cheap, so the block can serve sends of any channel whatever its protection domain.
//
// Bounded: at most MAX_KEPT blocks per memory, dropped (freed) after IDLE_MS without a take;
// counted in dev.stats().dedup.stageKeptBytes.
// A taken block's bytes are whatever its last send left: every sender writes each byte of its
// object before the chunker or a write reads it (DedupSender stages whole objects, or for a
// source reads each needed run into its slot's part before that slot's writes are posted).
import type { DedupMemory } from './types.js';

export interface StageBlock {
  readonly addr: number;
  readonly length: number;
}

const MAX_KEPT = 2;
const IDLE_MS = 5000;

interface Pool {
  kept: StageBlock[];
  idle: ReturnType<typeof setTimeout> | undefined;
}

const pools = new WeakMap<DedupMemory, Pool>();

function poolOf(mem: DedupMemory): Pool {
  let p = pools.get(mem);
  if (!p) pools.set(mem, (p = { kept: [], idle: undefined }));
  return p;
}

function dropLater(mem: DedupMemory, p: Pool): void {
  if (p.idle) clearTimeout(p.idle);
  p.idle = p.kept.length > 0
    ? setTimeout(() => {
      p.idle = undefined;
      for (const b of p.kept.splice(0)) freeQuietly(mem, b);
    }, IDLE_MS)
    : undefined;
  p.idle?.unref();
}

function freeQuietly(mem: DedupMemory, b: StageBlock): void {
  try {
    mem.free(b.addr);
  } catch {
    // The device closed meanwhile: its memory went with it.
  }
}

/**
 * `length` bytes of device memory (64-aligned): the smallest kept block that holds them and is not
 * far larger, else fresh (throws as alloc does). A small send does not take a large block: a
 * large send at the same time would allocate a second one, and the kept bytes would double.
 */
export function takeStage(mem: DedupMemory, length: number): StageBlock {
  const p = poolOf(mem);
  const most = Math.max(2 * length, length + (1 << 20));
  let best = -1;
  for (let i = 0; i < p.kept.length; i++) {
    const n = p.kept[i]!.length;
    if (n >= length && n <= most && (best < 0 || n < p.kept[best]!.length)) best = i;
  }
  if (best >= 0) {
    const [b] = p.kept.splice(best, 1);
    dropLater(mem, p);
    return b!;
  }
  return { addr: mem.alloc(length, 64), length };
}

/** A block no region and no read refers to any more: kept for a later take, or freed. */
export function returnStage(mem: DedupMemory, b: StageBlock): void {
  const p = poolOf(mem);
  if (p.kept.length >= MAX_KEPT) {
    // Keep the larger ones: they serve every smaller take as well.
    let small = 0;
    for (let i = 1; i < p.kept.length; i++) if (p.kept[i]!.length < p.kept[small]!.length) small = i;
    if (p.kept[small]!.length >= b.length) return freeQuietly(mem, b);
    freeQuietly(mem, p.kept.splice(small, 1)[0]!);
  }
  p.kept.push(b);
  dropLater(mem, p);
}

/** Bytes kept now for `mem` (dev.stats().dedup.stageKeptBytes). */
export function stageKeptBytes(mem: DedupMemory): number {
  let n = 0;
  for (const b of pools.get(mem)?.kept ?? []) n += b.length;
  return n;
}
