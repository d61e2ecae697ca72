// In-band de-duplication (M4): what channels, the file service and applications use. The
// kernels' own wrappers (chunk maps, chunker, hasher) are exported for the placement hookup and
// tools; docs/dedup.md explains how the pieces fit.
export { DedupSender, DedupReceiver, type DedupSenderInit, type DedupReceiverInit, type MessagePipe, type RdmaWritePath, type Received } from './endpoint.js';
export { QpLink, qpLinkQpInit, regLandingZone, QP_LINK_CQ_DEPTH, type QpLinkOptions } from './qp-link.js';
export { ChunkStore, type ChunkStoreOptions, type ChunkRef } from './store.js';
export { DedupSendCore, DedupRecvCore, type LandingZone, type DedupRecvOptions, type DedupSendOptions } from './transfer.js';
export { ChunkMap, ChunkStatus, chunkMapBytes, type ExpectedChunk, type ChunkMapStats } from './chunk-map.js';
export { DeviceChunker, type KernelRunner } from './chunker.js';
export { ChunkHasher, xxhBytes, xxhValue, type HashAlgName } from './hash.js';
export { dedupMemoryOf } from './memory.js';
export type { DedupMemory, SendResult, RecvStats, ChunkStoreStats } from './types.js';
export { dedupTotals, type DedupDeviceStats, type DedupSentTotals, type DedupReceivedTotals } from './stats.js';
