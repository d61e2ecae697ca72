// Data-plane records (host order = little-endian; in device memory, not on a wire). The WASM
// kernels read them through the accessors generated into assembly/wire.gen.ts; TypeScript
// writes them through these offsets (src/dataplane/descriptors.ts, region-table.ts): one
// definition for both sides of the boundary. Re-exported by spec.ts, which lists these layouts
// in LAYOUTS.
import { layout } from './layout.js';

export const REGION_ENTRY = layout({
  name: 'regionEntry',
  title: 'Region table entry (device memory; entry index = STag >>> 8)',
  size: 32,
  ref: 'sabre data plane (M3)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    base: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'first address of the region (device memory; for EXTERNAL regions an address of sabre\'s own)' },
    length: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes in the region' },
    stag: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'index << 8 | key byte; 0 = free or invalidated (written first and published last, atomically)' },
    pd: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'protection domain handle (nonzero)' },
    access: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'Access bits granted (LocalWrite 1, RemoteWrite 2, RemoteRead 4, RemoteAtomic 8)' },
    flags: {
      offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'flags',
      bits: {
        External: { mask: 0x00000001, meaning: 'memory outside the device: place() reports INDIRECT, TypeScript copies' },
        Rsvd: { mask: 0xfffffffe, meaning: 'reserved, 0' },
      },
    },
    iova: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'reserved, 0' },
    hashDir: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'address of the dedup zone directory (dedupZoneDir) of a hash-tracked landing zone, 0 = none: place() advances its chunk maps after each copy (RegionTable.setHashDir; zeroed by write)' },
  },
});

export const PLACE_DESC = layout({
  name: 'placeDesc',
  title: 'Placement descriptor: one received tagged segment (or receive piece) for place()',
  size: 32,
  ref: 'sabre data plane (M3)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    src: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'address of the payload in device memory; PLACE_SRC_CALLER (0xffffffff): the payload is outside it, place() only checks and the caller copies (PlaceStatus.CallerCopies)' },
    len: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'payload bytes' },
    stag: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'STag naming the target region' },
    pd: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'PD of the QP the segment arrived on (must equal the region\'s)' },
    to: { offset: 16, size: 8, type: 'u64', ref: 'sabre', meaning: 'absolute target address (TO)' },
    access: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'Access bits the placement needs' },
    tag: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'caller\'s tag, echoed in the amended-metadata record' },
  },
});

export const PLACE_OUT = layout({
  name: 'placeOut',
  title: 'Amended-metadata record written by place(), one per descriptor (M3)',
  size: 16,
  ref: 'sabre data plane (M3)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    tag: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'the descriptor\'s tag' },
    status: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'PlaceStatus' },
    len: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes of the descriptor' },
    stag: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'the descriptor\'s STag' },
  },
});

export const SG_DESC = layout({
  name: 'sgDesc',
  title: 'Scatter/gather copy descriptor for sgCopy (between registered regions)',
  size: 32,
  ref: 'sabre data plane',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    src: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'source address (inside region table entry srcIdx)' },
    dst: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'destination address (inside entry dstIdx)' },
    len: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes to copy (overlap copies as memmove)' },
    srcIdx: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'region table index of the source' },
    dstIdx: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'region table index of the destination' },
    rsvd: { offset: 20, size: 12, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0' },
  },
  tail: 'one u32 SgStatus per descriptor at the status pointer',
});

export const CRC_BATCH_DESC = layout({
  name: 'crcBatchDesc',
  title: 'CRC32C batch descriptor for crc32cBatch (one buffer in device memory)',
  size: 16,
  ref: 'sabre data plane',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    ptr: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'address of the bytes' },
    len: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'byte count' },
    previous: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'CRC32C to continue from (0 to start)' },
    out: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'result, written by the kernel' },
  },
});

// The worker data plane's ring slots (src/dataplane/workers.ts posts, worker-main.ts answers):
// read by TypeScript on both sides, never by the kernels, so spec.ts lists them in HOST_LAYOUTS.
export const JOB_REQ = layout({
  name: 'jobReq',
  title: 'Data-plane job: one request-ring slot (event loop → worker)',
  size: 32,
  ref: 'sabre data plane',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    op: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'JobOp (src/dataplane/jobs.ts): which kernel runs' },
    id: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'the submitter\'s id of the job (1 … 2^31-1), echoed in the completion' },
    a0: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'first argument (per JobOp: a pointer into device memory, usually)' },
    a1: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'second argument' },
    a2: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'third argument' },
    a3: { offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'fourth argument' },
    a4: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'fifth argument' },
    a5: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'sixth argument' },
  },
});

export const JOB_CPL = layout({
  name: 'jobCpl',
  title: 'Data-plane job completion: one completion-ring slot (worker → event loop)',
  size: 16,
  ref: 'sabre data plane',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    id: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'the job\'s id' },
    status: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'JobStatus: 0 ok, 1 unsupported, 2 the kernel trapped' },
    result: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'the kernel\'s result (per JobOp)' },
    op: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'the job\'s JobOp' },
  },
});

/** Statuses place() writes into PLACE_OUT.status; checks run in this order. */
export const PlaceStatus = {
  Placed: 0,
  /** Index out of range, entry free, or STag (key byte) mismatch. */
  InvalidStag: 1,
  PdMismatch: 2,
  /** The region lacks a required Access bit. */
  Access: 3,
  /** [to, to+len) not inside the region. */
  Bounds: 4,
  /** Valid, but the region is EXTERNAL (outside device memory): the caller places it in software. */
  Indirect: 5,
  /** The payload range [src, src+len) lies outside the memory (caller bug; nothing written). */
  SrcFault: 6,
  /**
   * Every check passed for a descriptor whose src is PLACE_SRC_CALLER (a payload outside device
   * memory, e.g. node's datagram buffer): nothing was written, the caller copies the payload to
   * `to` now (one copy instead of staging it and copying again).
   */
  CallerCopies: 7,
  /** As CallerCopies, into a hash-tracked landing zone: after its copy the caller runs placedHash(). */
  CallerCopiesHashed: 8,
} as const;

/** PLACE_DESC.src of a payload outside device memory: place() checks the target, the caller copies. */
export const PLACE_SRC_CALLER = 0xffff_ffff;

/** Statuses sgCopy writes, one u32 per SG_DESC. */
export const SgStatus = {
  Ok: 0,
  SrcEntry: 1,
  DstEntry: 2,
  SrcBounds: 3,
  DstBounds: 4,
} as const;
