// The wire of dedup (M4): the in-band chunk hashing records (shared memory, little-endian) and the
// dedup transfer's control messages (a reliable message pipe, big-endian). src/dedup/ and
// assembly/chunkhash.ts (through scripts/gen-wire.mjs) read their offsets from here;
// docs/dedup.md explains the protocol, docs/wire.md shows these byte by byte.
import { layout, type LayoutSpec } from './layout.js';

/** Chunk map header magic ("DCM" + layout version 1). */
export const DEDUP_MAP_MAGIC = 0x014d4344;
/** Out-of-order intervals a chunk record remembers beyond its watermark. */
export const DEDUP_PEND_MAX = 8;
export const DedupChunkStatus = { Pending: 0, Ok: 1, Mismatch: 2 } as const;
export const DedupChunkFlag = { Overflow: 0x1, Tainted: 0x2 } as const;
/** chunkMapArm results. */
export const DedupArmStatus = { Ok: 0, BadMagic: 1, BadLayout: 2 } as const;

export const DEDUP_MAP_HDR = layout({
  name: 'dedupMapHdr',
  title: 'Chunk map header (a hash-tracked landing zone; shared memory, little-endian)',
  size: 64,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    magic: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'DEDUP_MAP_MAGIC; any other value and the kernel leaves the map alone' },
    lock: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'spin lock (0 free, 1 held): one thread at a time advances a map, so workers may share it' },
    zoneBase: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute address of the zone\'s first byte in the memory' },
    zoneLen: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes of the zone; segments are clipped to it' },
    chunkCount: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'chunk records that follow the header' },
    doneCount: { offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'chunks whose hash is final; the done list after the records holds their indices in completion order' },
    okCount: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'final chunks whose digest equals the expected hash' },
    mismatchCount: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'final chunks whose digest differs, or that were rewritten after hashing' },
    overflowCount: { offset: 32, size: 4, type: 'u32', ref: 'sabre', meaning: 'intervals dropped because a chunk\'s out-of-order record was full (chunkMapFinish completes such chunks)' },
    rewriteCount: { offset: 36, size: 4, type: 'u32', ref: 'sabre', meaning: 'segments that wrote bytes already hashed (the chunk is tainted: a mismatch, never a silent change)' },
    bytesHashed: { offset: 40, size: 8, type: 'u64', ref: 'sabre', meaning: 'bytes fed to chunk hashes' },
    segments: { offset: 48, size: 4, type: 'u32', ref: 'sabre', meaning: 'segments seen (inside the zone or not)' },
    outside: { offset: 52, size: 4, type: 'u32', ref: 'sabre', meaning: 'segments with no byte inside the zone' },
    seed: { offset: 56, size: 8, type: 'u64', ref: 'sabre', meaning: 'XXH3-128 seed of every chunk hash' },
  },
  tail: 'chunkCount dedupChunk records (768 bytes each, 64-aligned), then the done list: chunkCount u32 chunk indices',
});

export const DEDUP_CHUNK = layout({
  name: 'dedupChunk',
  title: 'Chunk record of a chunk map (shared memory, little-endian)',
  size: 768,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    state: { offset: 0, size: 640, type: 'bytes', ref: 'assembly/xxh3.ts', meaning: 'resumable XXH3-128 stream record: the chunk\'s hash so far (its first `mark` bytes)' },
    start: { offset: 640, size: 4, type: 'u32', ref: 'sabre', meaning: 'offset of the chunk in the zone (chunks are contiguous from 0)' },
    len: { offset: 644, size: 4, type: 'u32', ref: 'sabre', meaning: 'chunk length, > 0' },
    mark: { offset: 648, size: 4, type: 'u32', ref: 'sabre', meaning: 'watermark: bytes of the contiguous prefix already hashed' },
    status: { offset: 652, size: 4, type: 'u32', ref: 'sabre', meaning: 'DedupChunkStatus: 0 pending, 1 ok, 2 mismatch' },
    expected: { offset: 656, size: 16, type: 'bytes', ref: 'sabre', meaning: 'the hash the sender announced: XXH3-128 low64 then high64, LE' },
    digest: { offset: 672, size: 16, type: 'bytes', ref: 'sabre', meaning: 'the hash of the landed bytes, once final (same encoding)' },
    pendCount: { offset: 688, size: 4, type: 'u32', ref: 'sabre', meaning: 'intervals in pend (sorted, disjoint, all beyond mark)' },
    flags: {
      offset: 692, size: 4, type: 'u32', ref: 'sabre', meaning: 'flags',
      bits: {
        Overflow: { mask: 0x1, meaning: 'an interval was dropped: pend was full' },
        Tainted: { mask: 0x2, meaning: 'bytes were written again after being hashed' },
      },
    },
    landed: { offset: 696, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes recorded in pend' },
    rsvd: { offset: 700, size: 4, type: 'u32', ref: 'sabre', meaning: '0' },
    pend: { offset: 704, size: 64, type: 'bytes', ref: 'sabre', meaning: 'DEDUP_PEND_MAX {start u32, end u32} intervals (chunk-relative) landed beyond mark' },
  },
});

export const DEDUP_HASH_DESC = layout({
  name: 'dedupHashDesc',
  title: 'chunkHashBatch input descriptor: one placed segment (shared memory, little-endian)',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    map: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'address of the chunk map (dedupMapHdr)' },
    to: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute address of the segment\'s first placed byte (the PlaceDesc TO)' },
    len: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes placed' },
    rsvd: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: '0' },
  },
});

/** Landing-zone directory magic ("DZD" + layout version 1). */
export const DEDUP_ZONE_MAGIC = 0x01445a44;

export const DEDUP_ZONE_DIR = layout({
  name: 'dedupZoneDir',
  title: 'Landing-zone directory: the chunk map of each slot of a hash-tracked region (shared memory, little-endian)',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    magic: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'DEDUP_ZONE_MAGIC; any other value and the kernel does nothing' },
    slots: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'slots in the zone (1..64)' },
    slotLen: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes per slot' },
    zoneBase: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute address of slot 0' },
  },
  tail: 'slots u32 chunk-map addresses (dedupMapHdr), 0 for a slot not armed: its bytes are placed but not hashed',
});

export const DEDUP_COPY_DESC = layout({
  name: 'dedupCopyDesc',
  title: 'copyBatch descriptor: one assembly copy (shared memory, little-endian)',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    dst: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute destination address' },
    src: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute source address (a store entry, a landing-zone chunk)' },
    len: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes' },
    rsvd: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: '0' },
  },
});

/** Dedup transfer messages (docs/dedup.md): one per pipe message, dedupMsg first. */
export const DEDUP_VERSION = 1;
export const DedupKind = { Hello: 1, Offer: 2, Need: 3, Round: 4, Grant: 5, End: 6, Abort: 7 } as const;
export const DedupHashAlg = { Xxh3_128: 1, Sha256: 2 } as const;
/** Hash bytes in a dedupEntry (a 16-byte XXH3-128 leaves the last 16 zero). */
export const DEDUP_HASH_BYTES = 32;
/**
 * Why a transfer ended (END, ABORT). HelloRefused only in an ABORT of the sender with xfer 0: it
 * cannot use the receiver's HELLO, so no transfer will run on that pipe (the receiver learns it
 * instead of waiting for ever).
 */
export const DedupEndStatus = { Ok: 0, Mismatch: 1, Malformed: 2, TooLarge: 3, Aborted: 4, HelloRefused: 5 } as const;
/** For docs/wire.md. */
export const DEDUP_KINDS = Object.entries(DedupKind).map(([k, v]) => `${v} ${k.toUpperCase()}`).join(', ');

export const DEDUP_MSG = layout({
  name: 'dedupMsg',
  title: 'Dedup transfer message header (every message on the pipe)',
  size: 8,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'DedupKind: 1 HELLO, 2 OFFER, 3 NEED, 4 ROUND, 5 GRANT, 6 END, 7 ABORT' },
    version: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'DEDUP_VERSION, 1' },
    flags: {
      offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'flags',
      bits: {
        Last: { mask: 0x0001, meaning: 'OFFER: the last page of the manifest' },
        Rsvd: { mask: 0xfffe, meaning: 'reserved, 0' },
      },
    },
    xfer: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'transfer id chosen by the sender (HELLO: 0)' },
  },
  tail: 'the kind\'s body: dedupHello, dedupOffer, dedupNeed, dedupRound, dedupGrant, dedupEnd or dedupAbort',
});

export const DEDUP_FLAG_LAST = DEDUP_MSG.fields.flags.bits!.Last.mask;

export const DEDUP_HELLO = layout({
  name: 'dedupHello',
  title: 'HELLO (receiver → sender, once per pipe): how to chunk and hash, and where to write',
  size: 64,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    hashAlg: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'DedupHashAlg of the receiver\'s store: 1 XXH3-128, 2 SHA-256' },
    normalization: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'FastCDC normalization level, 0..3' },
    rsvd: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: '0' },
    avg: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'average chunk size (power of two)' },
    min: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'minimum chunk size' },
    max: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'maximum chunk size; also the largest chunk the receiver accepts' },
    zoneAddr: { offset: 16, size: 8, type: 'u64', ref: 'sabre', meaning: 'landing zone: remote address for RDMA WRITEs of chunk data' },
    zoneRkey: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'landing zone rkey' },
    slotLen: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'the zone is `slots` slots of slotLen bytes (≥ max), each holding one ROUND' },
    slots: { offset: 32, size: 4, type: 'u32', ref: 'sabre', meaning: 'slots in the zone; all start granted' },
    maxEntries: { offset: 36, size: 4, type: 'u32', ref: 'sabre', meaning: 'most dedupEntry records one OFFER may carry' },
    maxChunks: { offset: 40, size: 4, type: 'u32', ref: 'sabre', meaning: 'most chunks one transfer may have' },
    seedHi: { offset: 44, size: 4, type: 'u32', ref: 'sabre', meaning: 'XXH3-128 seed, high word (chunk hashes of this scope)' },
    seedLo: { offset: 48, size: 4, type: 'u32', ref: 'sabre', meaning: 'XXH3-128 seed, low word' },
    rsvd2: { offset: 52, size: 12, type: 'bytes', ref: 'sabre', meaning: '0' },
  },
  tail: '32 bytes: the chunking key (the sender derives its gear table from it; docs/dedup.md)',
});

export const DEDUP_OFFER = layout({
  name: 'dedupOffer',
  title: 'OFFER (sender → receiver): one page of the manifest',
  size: 20,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    total: { offset: 0, size: 8, type: 'u64', ref: 'sabre', meaning: 'bytes of the whole object' },
    chunks: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'on the last page (flags.Last): the object\'s chunk count, first + count; else 0' },
    first: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'index of the first entry of this page (pages come in order)' },
    count: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'dedupEntry records that follow (1..maxEntries)' },
  },
  tail: 'count dedupEntry records',
});

export const DEDUP_ENTRY = layout({
  name: 'dedupEntry',
  title: 'Manifest entry: one chunk',
  size: 36,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    len: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'chunk length, 1..max' },
    hash: { offset: 4, size: 32, type: 'bytes', ref: 'sabre', meaning: 'chunk hash: XXH3-128 as low64 then high64, little-endian, then 16 zero bytes; or SHA-256' },
  },
});

export const DEDUP_NEED = layout({
  name: 'dedupNeed',
  title: 'NEED (receiver → sender): which chunks of an OFFER page to send',
  size: 8,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    first: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'the page\'s first entry index' },
    count: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'entries the bitmap covers (the page\'s count)' },
  },
  tail: 'ceil(count / 8) bytes of bitmap, entry first + i at bit (i & 7) of byte i >> 3: 1 = send it, 0 = the receiver holds it',
});

export const DEDUP_ROUND = layout({
  name: 'dedupRound',
  title: 'ROUND (sender → receiver): a slot of the landing zone holds the next needed chunks',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    slot: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'slot written (granted, not yet returned)' },
    first: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'manifest index of the first chunk in the slot' },
    count: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'needed chunks in the slot, packed in manifest order from the slot\'s start' },
    bytes: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes written (the sum of their lengths)' },
  },
});

export const DEDUP_GRANT = layout({
  name: 'dedupGrant',
  title: 'GRANT (receiver → sender): a slot is free again',
  size: 4,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    slot: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'slot the receiver has verified and copied out' },
  },
});

export const DEDUP_END = layout({
  name: 'dedupEnd',
  title: 'END (receiver → sender): the object is assembled (or why not)',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    status: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'DedupEndStatus: 0 ok, 1 a chunk did not match its hash, 2 malformed message, 3 over a limit, 4 aborted' },
    detail: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'status 1: the chunk index; else 0' },
    total: { offset: 8, size: 8, type: 'u64', ref: 'sabre', meaning: 'bytes assembled' },
  },
});

export const DEDUP_ABORT = layout({
  name: 'dedupAbort',
  title: 'ABORT (either way): the transfer is abandoned',
  size: 4,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    status: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'DedupEndStatus saying why; from the sender with xfer 0, 5 = it refused the receiver\'s HELLO (no transfer will run on this pipe)' },
  },
});

/** Dedup's layouts in document order: the in-band records, then the messages (the generator walks this). */
export const DEDUP_LAYOUTS: readonly LayoutSpec[] = [
  DEDUP_MAP_HDR, DEDUP_CHUNK, DEDUP_HASH_DESC, DEDUP_ZONE_DIR, DEDUP_COPY_DESC,
  DEDUP_MSG, DEDUP_HELLO, DEDUP_OFFER, DEDUP_ENTRY, DEDUP_NEED, DEDUP_ROUND, DEDUP_GRANT, DEDUP_END, DEDUP_ABORT,
];
