// The engine's view of its device's memory: the registered regions (a TypeScript mirror of the
// region table, for local-key checks and the indirect path), and the placement batch that
// feeds the WASM place() kernel (M3).
//
// Direct path: a segment's payload is staged in device memory (on inproc, that copy is the
// "wire"), a PlaceDesc names it, and ONE place() call per batch checks key / PD / access /
// bounds against the region table and memory.copy's it into the region. The kernel writes an
// amended-metadata record per descriptor into the completion ring (`out`), which the engine
// consumes to count segments, complete messages and acknowledge them.
// Indirect path: regions outside device memory (regMr(Uint8Array)) pass the same checks in the
// kernel, which reports INDIRECT instead of copying; TypeScript then copies the bytes.
import type { DeviceMemory } from '../dataplane/device-memory.js';
import { PLACE_DESC_BYTES, PLACE_OUT_BYTES, PlaceStatus, placeDescSrc, placeOutStatus, placeOutTag, putPlaceDesc } from '../dataplane/descriptors.js';
import { ErrorCode, SabreError } from '../core/errors.js';

export { PlaceStatus };

export interface MrRecord {
  stag: number;
  addr: number;
  length: number;
  pd: number;
  access: number;
  /** Memory outside the device (indirect path); addr is then a virtual address of sabre's own. */
  ext?: Uint8Array;
  /**
   * Send work requests on some send queue whose local segments are in this region (counted at
   * post, uncounted as each leaves its queue): their frames are views of the region's memory.
   */
  busy?: number;
  /** Set by a deregister while `busy`: runs when the last such request leaves (frees the memory). */
  onIdle?: () => void;
  /**
   * Some such request left its queue without its peer having its bytes (flushed: its QP in
   * error or destroyed): the link may still hold views of this memory, to be detached before
   * the memory is reused (core/detach.ts).
   */
  unsettled?: boolean;
}

/** A send work request that names `pieces` was posted: their regions are busy until it leaves. */
export function holdPieces(pieces: readonly { rec: MrRecord }[]): void {
  for (const p of pieces) p.rec.busy = (p.rec.busy ?? 0) + 1;
}

/** It left its send queue (completed, or `flushed`): a region deregistered meanwhile is let go. */
export function releasePieces(pieces: readonly { rec: MrRecord }[], flushed: boolean): void {
  for (const p of pieces) {
    const r = p.rec;
    if (flushed) r.unsettled = true;
    if (r.busy !== undefined && --r.busy === 0 && r.onIdle) {
      const f = r.onIdle;
      r.onIdle = undefined;
      f();
    }
  }
}

export interface DeviceCounters {
  /** Segments / bytes the WASM kernel placed straight into device-memory regions. */
  directSegments: number;
  directBytes: number;
  /** Segments / bytes placed by TypeScript (external regions). */
  indirectSegments: number;
  indirectBytes: number;
  /** place() calls (one per batch). */
  placeBatches: number;
  /** Segments dropped: undecodable, unknown QP, duplicate, QP not ready. */
  drops: number;
  duplicates: number;
  terminatesSent: number;
  terminatesReceived: number;
  rnrNaksSent: number;
  rnrRetries: number;
  /** Requester watchdog expiries (peer engine silent past timeoutMs with requests out). */
  timeouts: number;
  /** Bytes copied from the link into device memory before placement. */
  stagedBytes: number;
  /** Segments refused for the out-of-order budget per QP (rc: and the QP Terminated). */
  oooRefused: number;
  /** srd: segments refused because their flow's QP (or peer) had no room for a new flow; idle flows evicted; flows restarted at ssn 1. */
  srdFlowsRefused: number;
  srdFlowsEvicted: number;
  srdEpochs: number;
  /** srd: flows dropped for a protocol error with their peer QP (that flow's work failed; the QP kept running). */
  srdFlowsFailed: number;
  /** rc: the peer's RDMA Reads past the IRD (bounds.ts maxIrd), each a Terminate. */
  readsRefused: number;
  /** Times a read waited for earlier answers to be acked (bounds.ts maxAnswerBytes). */
  readsDeferred: number;
  /** rc: segments of a write that arrived after a later write placed some of their bytes, placed around them (write-order.ts). */
  lateWrites: number;
  /** Device-wide not-ready words sent while the device held its input (not-ready.ts): one per peer end each NOT_READY_MS. */
  notReadySent: number;
  /** Not-ready words from a peer end this device has no flow to, ignored; remembered peer ends forgotten past the bound, least recently heard first (not-ready.ts). */
  notReadyRefused: number;
  notReadyEvicted: number;
  /** Deregistered regions whose memory was kept for good: views of it stayed in the system's send queue past the fence's retries (nic/region-fence.ts). */
  regionsKept: number;
}

export const newCounters = (): DeviceCounters => ({
  directSegments: 0, directBytes: 0, indirectSegments: 0, indirectBytes: 0, placeBatches: 0,
  drops: 0, duplicates: 0, terminatesSent: 0, terminatesReceived: 0, rnrNaksSent: 0, rnrRetries: 0, timeouts: 0, stagedBytes: 0,
  oooRefused: 0, srdFlowsRefused: 0, srdFlowsEvicted: 0, srdEpochs: 0, srdFlowsFailed: 0, readsRefused: 0, readsDeferred: 0, lateWrites: 0,
  notReadySent: 0, notReadyRefused: 0, notReadyEvicted: 0, regionsKept: 0,
});

const MAX_BATCH = 1024;
const STAGE_BYTES = 4 * 1024 * 1024;
/** Heap slab the read-response copies are cut from (a new one when full; views keep old ones alive). */
const SNAP_SLAB = 4 * 1024 * 1024;

export class EngineMemory {
  readonly dm: DeviceMemory;
  readonly #mrs = new Map<number, MrRecord>();
  /** Virtual addresses for external regions: above everything device memory can ever reach. */
  #extNext: number;
  readonly descBase: number;
  readonly outBase: number;
  readonly stageBase: number;
  readonly stageBytes: number;
  count = 0;
  stageUsed = 0;
  /**
   * Told of every write into a region outside the device (the indirect path): a NIC thread
   * writes into its shadow of such a region and has the application's thread copy the range
   * into the caller's memory (M3's amended-metadata records).
   */
  onExtWrite: ((rec: MrRecord, addr: number, len: number) => void) | undefined;
  #snap = Buffer.allocUnsafeSlow(0);
  #snapOff = 0;

  constructor(dm: DeviceMemory) {
    this.dm = dm;
    this.#extNext = Math.ceil(dm.maximumBytes / 65536) * 65536;
    this.descBase = dm.alloc(MAX_BATCH * PLACE_DESC_BYTES);
    this.outBase = dm.alloc(MAX_BATCH * PLACE_OUT_BYTES);
    this.stageBytes = STAGE_BYTES;
    this.stageBase = dm.alloc(STAGE_BYTES);
  }

  // ---- regions ------------------------------------------------------------------------------

  register(r: Omit<MrRecord, 'stag' | 'addr'> & { addr?: number }): MrRecord {
    const t = this.dm.regions;
    const idx = t.allocIndex();
    const stag = t.nextStag(idx);
    let addr = r.addr;
    if (r.ext) {
      // Over shared memory, which NIC threads reach directly, the address keeps the memory's
      // alignment mod 8: an atomic's 8-byte alignment is checked on the address, and must be
      // the memory's for the atomic to be one Atomics operation (responder.ts rmw64).
      const skew = r.ext.buffer instanceof SharedArrayBuffer ? r.ext.byteOffset & 7 : 0;
      const len = Math.max(64, Math.ceil((skew + r.length) / 64) * 64);
      if (this.#extNext + len > 2 ** 32) {
        t.freeIndex(idx);
        throw new SabreError(ErrorCode.NoMemory, 'no address space left for external regions (lower maximumMemoryBytes)');
      }
      addr = this.#extNext + skew;
      this.#extNext += len;
    }
    const rec: MrRecord = { stag, addr: addr!, length: r.length, pd: r.pd, access: r.access, ...(r.ext ? { ext: r.ext } : {}) };
    t.write(idx, { base: rec.addr, length: rec.length, stag, pd: rec.pd, access: rec.access, external: !!r.ext });
    this.#mrs.set(idx, rec);
    return rec;
  }

  deregister(stag: number): void {
    const idx = stag >>> 8;
    const rec = this.#mrs.get(idx);
    if (!rec || rec.stag !== stag) return;
    this.#mrs.delete(idx);
    this.dm.regions.freeIndex(idx);
  }

  /**
   * A region another thread registered in this shared memory (its region table entry is written
   * already): this thread's engine takes the same keys. The table stays the registering thread's.
   */
  adopt(rec: Omit<MrRecord, 'busy' | 'onIdle'>): MrRecord {
    const own: MrRecord = { ...rec };
    this.#mrs.set(rec.stag >>> 8, own);
    return own;
  }

  /** An adopted region's keys stop working on this thread (the table entry is the registering thread's to clear). */
  forget(stag: number): MrRecord | undefined {
    const rec = this.lookup(stag);
    if (rec) this.#mrs.delete(stag >>> 8);
    return rec;
  }

  lookup(stag: number): MrRecord | undefined {
    const rec = this.#mrs.get(stag >>> 8);
    return rec && rec.stag === stag ? rec : undefined;
  }

  /** The kernel's checks, in the kernel's order, for the TypeScript paths. */
  check(stag: number, pd: number, addr: number, len: number, access: number): number {
    return checkRegion(this.lookup(stag), pd, addr, len, access);
  }

  /** [addr, addr+len) of external region `rec` was just written. */
  extWritten(rec: MrRecord, addr: number, len: number): void {
    this.onExtWrite?.(rec, addr, len);
  }

  /** View of [addr, addr+len) of a region already checked. */
  view(r: MrRecord, addr: number, len: number): Uint8Array {
    if (r.ext) return r.ext.subarray(addr - r.addr, addr - r.addr + len);
    return this.dm.u8().subarray(addr, addr + len);
  }

  /**
   * A copy of `v` that no later change of the memory reaches (a read response: the region may be deregistered and reused before it is sent).
   * Cut from a heap slab: copying out of the shared device memory into a fresh allocation is
   * several times slower (slice() copies a shared buffer byte by byte, and a new 256 KiB
   * buffer costs its page faults) than into a slab already mapped. The garbage collector
   * owns the copy's lifetime: it lives as long as a queue, a socket or a retransmission holds it.
   */
  snapshot(v: Uint8Array): Uint8Array {
    const n = v.length;
    if (n > SNAP_SLAB / 4) {
      const b = Buffer.allocUnsafeSlow(n);
      b.set(v);
      return b;
    }
    if (this.#snapOff + n > this.#snap.length) {
      this.#snap = Buffer.allocUnsafeSlow(SNAP_SLAB);
      this.#snapOff = 0;
    }
    const out = this.#snap.subarray(this.#snapOff, this.#snapOff + n);
    out.set(v);
    this.#snapOff += (n + 7) & ~7;
    return out;
  }

  // ---- placement batch ----------------------------------------------------------------------

  /** Room for one more descriptor with `len` staged bytes (and the up to 7 that align them)? */
  hasRoom(len: number): boolean {
    return this.count < MAX_BATCH && this.stageUsed + (len > 0 ? len + 7 : 0) <= this.stageBytes;
  }

  /**
   * A payload that is one view into this device's memory (a TCP deframer's receive buffer, a
   * source region of the same device) is placed from where it lies: its address, or -1 when it
   * must be staged. The view must stay valid until the batch runs (the engine's receive step).
   */
  inDevice(parts: Uint8Array[]): number {
    if (parts.length !== 1) return -1;
    const v = parts[0]!;
    return v.buffer === this.dm.u8().buffer ? v.byteOffset : -1;
  }

  /**
   * Copy payload views into the staging area; returns the staged address. The copy starts at
   * the first view's alignment: V8 copies into shared memory a word at a time only between
   * equally aligned addresses, byte by byte otherwise (several times slower: bench/copy.bench.mjs); the kernel's memory.copy on to the target is fast at any alignment.
   */
  stage(parts: Uint8Array[], len: number): number {
    const free = this.stageBase + this.stageUsed;
    // (Never past what an unaligned start would use: a caller that found no room stages anyway.)
    const skew = parts.length > 0 && this.stageUsed + len + 7 <= this.stageBytes ? (parts[0]!.byteOffset - free) & 7 : 0;
    const at = free + skew;
    const u8 = this.dm.u8();
    let p = at;
    for (const v of parts) {
      u8.set(v, p);
      p += v.length;
    }
    this.stageUsed += (skew + len + 7) & ~7;
    return at;
  }

  addDesc(src: number, len: number, stag: number, pd: number, to: number, access: number, tag: number): void {
    putPlaceDesc(this.dm.dataView(), this.descBase + this.count * PLACE_DESC_BYTES, src, len, stag, pd, to, access, tag);
    this.count++;
  }

  /** After copying a CallerCopiesHashed descriptor's payload to [to, to+len): the landing zone's hashes advance over it. */
  placedHash(stag: number, to: number, len: number): void {
    this.dm.kernels.placedHash(this.dm.regions.base, this.dm.regions.capacity, stag, to, len);
  }

  /** One place() call for the whole batch; returns the descriptor count (records at outBase). */
  run(): number {
    const n = this.count;
    if (n > 0) this.dm.kernels.place(this.descBase, n, this.dm.regions.base, this.dm.regions.capacity, this.outBase);
    return n;
  }

  outTag(i: number): number {
    return placeOutTag(this.dm.dataView(), this.outBase + i * PLACE_OUT_BYTES);
  }

  outStatus(i: number): number {
    return placeOutStatus(this.dm.dataView(), this.outBase + i * PLACE_OUT_BYTES);
  }

  /** Source address of descriptor i (for the indirect path). */
  descSrc(i: number): number {
    return placeDescSrc(this.dm.dataView(), this.descBase + i * PLACE_DESC_BYTES);
  }

  reset(): void {
    this.count = 0;
    this.stageUsed = 0;
  }
}

/** The kernel's checks of a region found by its key (undefined: none), in the kernel's order. */
export function checkRegion(r: { pd: number; access: number; addr: number; length: number } | undefined, pd: number, addr: number, len: number, access: number): number {
  if (!r) return PlaceStatus.InvalidStag;
  if (r.pd !== pd) return PlaceStatus.PdMismatch;
  if ((r.access & access) !== access) return PlaceStatus.Access;
  if (!(addr >= r.addr) || addr - r.addr > r.length || len > r.length - (addr - r.addr)) return PlaceStatus.Bounds;
  return PlaceStatus.Placed;
}
