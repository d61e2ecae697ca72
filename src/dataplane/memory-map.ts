// The device memory map. The module's allocator is a stub and every instance would hand out
// the same addresses, so TypeScript decides where everything lives, once, at device creation:
//
//   0 ............ heapBase      kernel statics (constant tables; rewritten by every instantiation)
//   scratchBase .. +slots*bytes  per-worker scratch areas (worker i owns scratchBase + i*scratchBytes)
//   ringBase ..... +slots*2*ring request and completion ring of each worker slot
//   tableBase .... +entries*32   the region table (placement keys)
//   arenaBase .... end of memory the region arena (regMr, rings and buffers of the engine); the
//                                only part that grows, so everything below keeps its address
//                                and views made over the initial buffer stay valid for it.
// Every boundary is 64-byte aligned so no two owners share a cache line.
import { JOB_CPL_SIZE, JOB_REQ_SIZE } from '../wire/host-fields.gen.js';
import { RING_HEADER_BYTES } from './ring.js';

export const LINE = 64;

/** Region table entries when the device names none (openDevice's maxMr default is one less). */
export const DEFAULT_REGION_ENTRIES = 1 << 16;

/** A ring slot holds one job (jobReq) or one completion (jobCpl): a smaller one would spill into the next. */
export const MIN_RING_SLOT_BYTES = Math.max(JOB_REQ_SIZE, JOB_CPL_SIZE);

export interface MemoryMapOptions {
  /** How many workers the device may start (each gets scratch and two rings). Default 4. */
  workerSlots?: number;
  /** Scratch bytes per worker. Default 64 KiB. */
  scratchBytes?: number;
  /** Slots per worker ring (power of two). Default 1024. */
  ringSlots?: number;
  /** Bytes per ring slot (power of two, ≥ MIN_RING_SLOT_BYTES). Default 32. */
  ringSlotBytes?: number;
  /**
   * Region table entries (entry 0 is never used). Default 65536 (2 MiB of address space: an
   * entry's page becomes resident only once a region uses it), enough for 32,767 idle channels
   * at two regions each; at most 2^24.
   */
  regionEntries?: number;
}

export interface MemoryMap {
  readonly heapBase: number;
  readonly workerSlots: number;
  readonly scratchBase: number;
  readonly scratchBytes: number;
  readonly ringBase: number;
  readonly ringSlots: number;
  readonly ringSlotBytes: number;
  /** Bytes of one ring (header + slots); worker i's request ring is at ringBase + 2*i*ringBytes, its completion ring right after. */
  readonly ringBytes: number;
  readonly tableBase: number;
  readonly tableEntries: number;
  readonly arenaBase: number;
}

export const alignUp = (n: number, a: number): number => Math.ceil(n / a) * a;

const isPow2 = (n: number): boolean => Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;

export function planMemoryMap(heapBase: number, o: MemoryMapOptions = {}): MemoryMap {
  const workerSlots = o.workerSlots ?? 4;
  const scratchBytes = alignUp(o.scratchBytes ?? 64 * 1024, LINE);
  const ringSlots = o.ringSlots ?? 1024;
  const ringSlotBytes = o.ringSlotBytes ?? 32;
  const tableEntries = o.regionEntries ?? DEFAULT_REGION_ENTRIES;
  if (!Number.isInteger(workerSlots) || workerSlots < 0 || workerSlots > 256) throw new RangeError('workerSlots must be 0..256');
  if (!isPow2(ringSlots)) throw new RangeError('ringSlots must be a power of two');
  if (!isPow2(ringSlotBytes) || ringSlotBytes < MIN_RING_SLOT_BYTES) throw new RangeError(`ringSlotBytes must be a power of two ≥ ${MIN_RING_SLOT_BYTES} (a job slot)`);
  if (!Number.isInteger(tableEntries) || tableEntries < 2 || tableEntries > 1 << 24) throw new RangeError('regionEntries must be 2..2^24');
  const scratchBase = alignUp(heapBase, LINE);
  const ringBase = scratchBase + workerSlots * scratchBytes;
  const ringBytes = alignUp(RING_HEADER_BYTES + ringSlots * ringSlotBytes, LINE);
  const tableBase = ringBase + workerSlots * 2 * ringBytes;
  const arenaBase = alignUp(tableBase + tableEntries * 32, LINE);
  return { heapBase, workerSlots, scratchBase, scratchBytes, ringBase, ringSlots, ringSlotBytes, ringBytes, tableBase, tableEntries, arenaBase };
}
