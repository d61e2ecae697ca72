// The dedup transfer (M4), LBFS pattern, as two sans-I/O cores in the shape of
// src/core/sans-io.ts: fed messages and completions (handleMessage, handleWriteDone,
// handleFailure, each with the time), they queue actions tagged `kind` (messages to send, RDMA
// writes to post, the result) that the shell takes with pollAction() until undefined. The shells
// (src/dedup/endpoint.ts) carry them out over any reliable message pipe plus an RDMA write path;
// tests drive the cores directly.
//
//   receiver                                   sender
//   HELLO (chunking params + key, hash, zone) →
//                                             ← OFFER pages (chunk lengths + hashes), windowed
//   NEED (bitmap: which chunks it lacks)      →
//                                               RDMA WRITE needed chunks into a granted slot
//                                             ← ROUND (slot, first, count, bytes)
//   verify, copy out, GRANT slot              →
//   END (status, bytes)                       →
//
// Chunks the receiver holds are copied from its store into the object when their OFFER page
// arrives; the others arrive in slots of its landing zone. Which chunks go into which slot is a
// function of the NEED bitmaps and the slot length alone (needed chunks in manifest order, a slot
// filled until the next chunk does not fit, a partial slot only once the last NEED is out; slots
// used in the order they were granted), so the receiver arms a slot's chunk map — the record the
// placement kernel advances in-band — before the sender can write into it, and checks that ROUND
// says what it predicted. Every chunk that arrives is verified against its announced hash before a
// byte of it is used; a mismatch ends the transfer with an error on both sides.
//
// The two cores live in ./send-core.ts and ./recv-core.ts; this module is their common name.
export type { RecvStats, SendResult } from './types.js';
export { DedupEndStatus } from '../wire/dedup-spec.js';
export { DedupSendCore, type DedupSendOptions, type SendAction, type WritePiece } from './send-core.js';
export { DedupRecvCore, type DedupRecvOptions, type LandingZone, type RecvAction } from './recv-core.js';
