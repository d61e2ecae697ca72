// `put --dedup` / `get --dedup`: rsync over RDMA (docs/files.md "Dedup transfers", docs/dedup.md).
// The version of the file the other side already has is the chunk source: before a put the
// server ingests its current file into a chunk-store scope of this transfer; before a get the
// client ingests its local copy. The new version then moves as one dedup send over a channel
// (src/channel/dedup.ts), so only the chunks the receiver lacks cross the wire.
//
// The channel is a second connection of the file session, on FILE_DEDUP_SERVICE of the same
// device, authenticated exactly like an RDMA connection (docs/files.md step 5): the client
// negotiates a fresh single-use key on its pipe and its first channel message proves it —
//   { resumeKey, keyId, nonce, op, path, fsync, mac = HMAC(K_auth, "authenticate" ‖ resumeKey ‖
//     keyId ‖ nonce ‖ "sabre-files/1 dedup " op path fsync) }
// — the session table consumes the key whatever the outcome. Nothing touches the file system
// before that check; the path goes through the same checks and jail as every other request.
//
//   client                                  server
//   AUTH{op: put, path}            →        ingest the current file (if any) into the scope
//                                  ←        { ok, basis: bytes ingested }
//   dedup send of the new bytes    →        verified chunk by chunk, written (Replace: a
//                                           temporary renamed over the name)
//                                  ←        { ok, bytes }
//
//   client ingests its local copy, then
//   AUTH{op: get, path}            →
//                                  ←        { ok, size }, then a dedup send of the file
//
// A file larger than maxBytes (default 256 MiB: the object is assembled in memory) is refused.
import { randomBytes } from 'node:crypto';
import { peerDeadline } from '../core/deadline.js';
import { busiestSource, oldestOf } from '../core/busiest.js';
import { performance } from 'node:perf_hooks';
import type { Channel } from '../channel/channel.js';
import { channelSource, connectChannel } from '../channel/listen.js';
import type { DeviceAddress } from '../core/address.js';
import type { Device } from '../verbs/device.js';
import { dedupMemoryOf, dedupMemoryOfDevice, dedupStoreOf, dedupStoreOfDevice } from '../dedup/memory.js';
import { type DedupTotals, dedupTotals } from '../dedup/stats.js';
import type { ChunkStore } from '../dedup/store.js';
import type { DedupSource } from '../dedup/endpoint.js';
import { giveBack } from '../dedup/buffers.js';
import { type BasisFile, basisOf, readPieces } from './dedup-basis.js';
import { FILE_DEDUP_SERVICE, FileAccess, FileStatus } from '../wire/files-spec.js';
import { connectionProof } from './auth.js';
import { PrefixWriter } from './dedup-writer.js';
import { type Jail, JailFile } from './jail.js';
import type { OpenFileBudget } from './open-files.js';
import { checkPath } from './paths.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { Session, SessionTable } from './sessions.js';
import { isFileStatus, statusText } from './status.js';

export { FILE_DEDUP_SERVICE };
export type { BasisFile } from './dedup-basis.js';
/** Largest file a dedup transfer moves (the object is assembled in memory). */
export const DEDUP_MAX_BYTES = 256 << 20;
/**
 * Average chunk of file transfers: 4 KiB, a quarter of the channel default — an edit of a file
 * costs the chunks it touches, so smaller chunks move less around each edit (36 bytes of
 * manifest per ~4.7 KiB chunk: 0.8%). Measured, 4 MiB with 20 scattered 20 KiB edits: 8 KiB
 * chunks moved 0.175-0.222x of the file on the wire, 4 KiB chunks 0.140-0.168x.
 */
export const FILE_DEDUP_AVG = 4096;
/**
 * The average chunk for a basis of `size` bytes: FILE_DEDUP_AVG up to 16 MiB, four times that
 * above. Each chunk costs both ends a fixed amount of work (an index entry, a manifest entry,
 * an OFFER entry to look up, its share of the hashing calls) whatever its size: on a 48 MiB
 * file the per-chunk work at 4 KiB was a third of the receiver's CPU, and 16 KiB still costs
 * a put less CPU than 8 KiB did, for slightly more bytes on the wire (docs/benchmarks.md).
 * Larger chunks cost a few more bytes around each edit, a small share of a large file.
 */
export const fileDedupAvg = (size: number): number => (size <= 16 << 20 ? FILE_DEDUP_AVG : FILE_DEDUP_AVG * 4);
/**
 * How long the server waits for the client's AUTH, the channel's first message. Long enough that
 * a client whose event loop stalls a few seconds right after connecting is not refused; what a
 * silent channel holds meanwhile is bounded by the per-source caps and eviction, not by this.
 */
export const DEDUP_AUTH_TIMEOUT_MS = 5000;
/** How long the server waits for a put's bytes once it answered the AUTH. */
const BYTES_TIMEOUT_MS = 60_000;
/**
 * How long the server waits for the client to take an answer it goes on from ({ ok, basis },
 * { ok, size }, { ok, bytes }): ch.send resolves once the answer is placed, which needs room in
 * the client's channel window, and a client that never reads never gives it. As for the AUTH,
 * an honest client is waiting for the answer when it is sent, so a few seconds allow for a
 * stalled event loop; past them the transfer ends and its slot, temporary and basis are freed
 * (the close after it has the channel's own deadline). Refusals are not waited for at all.
 */
export const DEDUP_REPLY_TIMEOUT_MS = 5000;
/**
 * Largest message the dedup service takes before the AUTH is proven (the listener's preauth):
 * the AUTH itself, a path of up to 4096 bytes and its fixed fields. Nothing bigger is received,
 * decoded or staged for a stranger.
 */
export const DEDUP_AUTH_MAX = 8192;
/** ServeOptions' dedup limits, checked where they are given: a NaN or negative one would make its cap compare false (no cap). */
export function checkDedupLimits(o: { dedupMaxBytes?: number; dedupMaxTransfers?: number }): void {
  for (const k of ['dedupMaxBytes', 'dedupMaxTransfers'] as const) {
    const v = o[k];
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= 1)) throw new SabreError(ErrorCode.InvalidArgument, `${k} must be a positive integer, not ${String(v)}`);
  }
}

/**
 * Dedup transfers under way at once, all sessions together (ServeOptions.dedupMaxTransfers). Each
 * may hold its basis and its object in memory, up to dedupMaxBytes each, from its AUTH until it
 * ends (a put waits up to a minute for its bytes): the per-session cap alone would let one token
 * holder make the server hold sessions × channels of those.
 */
export const DEDUP_MAX_TRANSFERS = 8;

const te = new TextEncoder();

export type DedupOp = 'put' | 'get';

export interface DedupAuth {
  resumeKey: Uint8Array;
  keyId: Uint8Array;
  nonce: Uint8Array;
  mac: Uint8Array;
  op: DedupOp;
  path: string;
  fsync: boolean;
}

const params = (op: DedupOp, path: string, fsync: boolean): Uint8Array => te.encode(`sabre-files/1 dedup ${op} ${fsync ? 1 : 0} ${path}`);

/** The client's first message on the channel. */
export function dedupAuth(neg: Negotiated, op: DedupOp, path: string, fsync: boolean): DedupAuth {
  const nonce = new Uint8Array(randomBytes(16));
  return { resumeKey: neg.resumeKey, keyId: neg.keyId, nonce, op, path, fsync, mac: connectionProof(neg.kAuth, neg.resumeKey, neg.keyId, nonce, params(op, path, fsync)) };
}

const isBytes = (v: unknown, n: number): v is Uint8Array => v instanceof Uint8Array && v.length === n;

function parseAuth(v: unknown): DedupAuth | undefined {
  if (!v || typeof v !== 'object') return undefined;
  const a = v as Record<string, unknown>;
  if (!isBytes(a.resumeKey, 24) || !isBytes(a.keyId, 16) || !isBytes(a.nonce, 16) || !isBytes(a.mac, 32)) return undefined;
  if ((a.op !== 'put' && a.op !== 'get') || typeof a.path !== 'string' || a.path.length > 4096 || typeof a.fsync !== 'boolean') return undefined;
  return a as unknown as DedupAuth;
}

/** A reply of the server: { ok: true, … } or { ok: false, status, why }. */
export type DedupReply = { ok: true; basis?: number; size?: number; bytes?: number } | { ok: false; status: number; why: string };

export interface DedupCounters {
  dedupPuts: number;
  dedupGets: number;
  /** Channels refused: a bad, missing or late AUTH, a limit, or evicted before their AUTH. */
  dedupRefused: number;
  /** Of those, channels whose AUTH did not come within DEDUP_AUTH_TIMEOUT_MS. */
  dedupAuthTimeouts: number;
  /** Of those, channels closed unauthenticated to make room for a newer one (maxPending). */
  dedupEvicted: number;
  dedupBasisBytes: number;
  /** Authenticated transfers refused because dedupMaxTransfers were under way (SessionLimit). */
  dedupBusy: number;
  /** Transfers under way now (authenticated, not yet ended): at most dedupMaxTransfers. */
  dedupTransfers: number;
  /** Transfers ended because the client did not take an answer within DEDUP_REPLY_TIMEOUT_MS (it does not read its channel). */
  dedupReplyTimeouts: number;
}

export const newDedupCounters = (): DedupCounters => ({
  dedupPuts: 0, dedupGets: 0, dedupRefused: 0, dedupAuthTimeouts: 0, dedupEvicted: 0, dedupBasisBytes: 0, dedupBusy: 0, dedupTransfers: 0, dedupReplyTimeouts: 0,
});

export interface DedupServerContext {
  sessions: SessionTable;
  jail: Jail;
  readOnly: boolean;
  fsync: boolean;
  maxBytes: number;
  counters: DedupCounters;
  /** Channels waiting for their AUTH, oldest first, with their source; at most maxPending (past it the oldest of the source holding the most is closed). */
  pending: Map<Channel, string>;
  maxPending: number;
  /** Transfers under way at once, all sessions (default DEDUP_MAX_TRANSFERS); past it refused, counted. */
  maxTransfers?: number;
  authTimeoutMs?: number;
  /** Default DEDUP_REPLY_TIMEOUT_MS. */
  replyTimeoutMs?: number;
  /** The server's open files (ServeOptions.maxOpenFilesTotal): a transfer holds DEDUP_FILES of them from its AUTH to its end. */
  openFiles?: OpenFileBudget;
}

/** Files a transfer may hold at once: a put's current file (its basis) and its temporary; a get, one. */
const DEDUP_FILES = 2;

class Late extends Error {}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let d: { clear(): void } | undefined;
  return Promise.race([p, new Promise<T>((_, rej) => (d = peerDeadline(ms, () => rej(new Late(`${what} did not come within ${ms} ms`)))))]).finally(() => d?.clear());
}

/** Open a file through the jail for reading whole (undefined: it does not exist). */
async function openWhole(jail: Jail, parts: string[], maxBytes: number): Promise<JailFile | { status: number; why: string } | undefined> {
  const o = await jail.open(parts, FileAccess.Read, 0, false);
  if (o.status !== FileStatus.Success) return o.status === FileStatus.NotFound ? undefined : { status: o.status, why: (o as { why: string }).why };
  const f = (o as { file: JailFile }).file;
  if (f.size > maxBytes) {
    await f.close(false).catch(() => undefined);
    return { status: FileStatus.InvalidParameter, why: `the file is ${f.size} bytes, more than a dedup transfer moves (${maxBytes})` };
  }
  return f;
}

/** Serve one dedup channel of the file service; always ends by closing it. */
export async function serveDedupChannel(ch: Channel, ctx: DedupServerContext): Promise<void> {
  let session: Session | undefined;
  let scope: string | undefined;
  let basisRead: ReturnType<typeof readPieces> | undefined;
  let filled: Promise<number> = Promise.resolve(0);
  let proven = false;
  let running = false;
  let out: JailFile | undefined; // a put's temporary, until it is renamed into place
  let writer: PrefixWriter | undefined;
  let replyLate = false;
  // An answer the transfer goes on from: waited for until it is placed, within a deadline.
  const reply = (r: DedupReply): Promise<void> =>
    within(ch.send(r), ctx.replyTimeoutMs ?? DEDUP_REPLY_TIMEOUT_MS, 'the client taking a dedup answer').catch((e: unknown) => {
      if (e instanceof Late) {
        replyLate = true;
        ctx.counters.dedupReplyTimeouts++;
      }
      throw e;
    });
  // The slot and the files go when the transfer's files are closed (its basis's read stopped).
  const ended = (): void => {
    ctx.counters.dedupTransfers--;
    ctx.openFiles?.give(DEDUP_FILES);
  };
  // A refusal ends the transfer: queued, not waited for. Its resources are released at once; the
  // graceful close below places it (or gives up at the channel's own deadline).
  const refuse = (r: DedupReply & { ok: false }): void => void ch.send(r).catch(() => undefined);
  // Few channels wait for their AUTH at once: one of them makes room for a newer one.
  ctx.pending.set(ch, channelSource(ch));
  if (ctx.pending.size > ctx.maxPending) {
    // The oldest of the source holding the most (core/busiest.ts): a stranger opening channels
    // churns its own, never an honest client's whose AUTH is on its way.
    const old = oldestOf(ctx.pending, busiestSource(ctx.pending).most!)!;
    ctx.pending.delete(old);
    ctx.counters.dedupEvicted++;
    void old.close().catch(() => undefined);
  }
  try {
    // The channel is untrusted (the listener's preauth) until the AUTH's MAC is verified: it takes
    // only a small message, no rendezvous and no dedup send, and registers little.
    const first = await within(ch.next(), ctx.authTimeoutMs ?? DEDUP_AUTH_TIMEOUT_MS, 'the dedup AUTH');
    const a = first.done ? undefined : parseAuth(first.value);
    if (!a) {
      ctx.counters.dedupRefused++;
      return refuse({ ok: false, status: FileStatus.Malformed, why: 'the first message is not a dedup AUTH' });
    }
    const auth = ctx.sessions.authenticate({ resumeKey: a.resumeKey, keyId: a.keyId, nonce: a.nonce, mac: a.mac, params: params(a.op, a.path, a.fsync) }, performance.now());
    if (!auth.ok) {
      ctx.counters.dedupRefused++;
      return refuse({ ok: false, status: auth.status, why: auth.why });
    }
    if (!ctx.sessions.bind(auth.session, ch)) {
      ctx.counters.dedupRefused++;
      return refuse({ ok: false, status: FileStatus.SessionLimit, why: 'the session has all the connections it may have' });
    }
    session = auth.session;
    proven = true;
    ctx.pending.delete(ch);
    ch.authorize();
    // Before any file is opened or read: what a transfer may hold is bounded across sessions.
    if (ctx.counters.dedupTransfers >= (ctx.maxTransfers ?? DEDUP_MAX_TRANSFERS)) {
      ctx.counters.dedupBusy++;
      return refuse({ ok: false, status: FileStatus.SessionLimit, why: `the server has ${ctx.counters.dedupTransfers} dedup transfers under way, the most it runs at once: try later` });
    }
    // Likewise the server's open files, all connections and transfers (./open-files.ts).
    if (ctx.openFiles && !ctx.openFiles.take(DEDUP_FILES)) {
      return refuse({ ok: false, status: FileStatus.TooManyOpenFiles, why: `the server has ${ctx.openFiles.open} files open, the most it holds at once: try later` });
    }
    running = true;
    ctx.counters.dedupTransfers++;
    const path = checkPath(a.path, { allowRoot: false });
    if (!path.ok) return refuse({ ok: false, status: path.status, why: path.why });
    if (a.op === 'get') {
      const f = await openWhole(ctx.jail, path.parts, ctx.maxBytes);
      if (!f) return refuse({ ok: false, status: FileStatus.NotFound, why: `${a.path} does not exist` });
      if (!(f instanceof JailFile)) return refuse({ ok: false, ...f });
      try {
        ctx.counters.dedupGets++;
        await reply({ ok: true, size: f.size });
        // Read straight into the sender's staging memory, each piece chunked as it is in. A file
        // that shrinks meanwhile ends the transfer (ABORT): the client gets an error, not the bytes.
        await ch.sendDedupFrom({ length: f.size, read: (into, at) => f.read(into, into.length, at) });
      } finally {
        await f.close(false).catch(() => undefined);
      }
      return;
    }
    if (ctx.readOnly) return refuse({ ok: false, status: FileStatus.ReadOnly, why: 'the server is read-only' });
    // put: the file as it is now is the basis, under this transfer's own scope and key. It is
    // read a piece at a time and each piece ingested while the next is read, as the client
    // stages, chunks and hashes (store.fill: the receiver answers no OFFER until it is in). By
    // reference: the read is this function's own copy, unchanged until the scope is dropped.
    const old = await openWhole(ctx.jail, path.parts, ctx.maxBytes);
    if (old && !(old instanceof JailFile)) return refuse({ ok: false, ...old });
    // The new version goes to a temporary (Replace) opened now, so the object's verified prefix
    // is written while the rest still arrives; renamed over the name once it is all in.
    const access = FileAccess.Write | FileAccess.Create | FileAccess.Replace | (a.fsync || ctx.fsync ? FileAccess.Fsync : 0);
    const o = await ctx.jail.open(path.parts, access, 0o644, a.fsync || ctx.fsync);
    if (o.status !== FileStatus.Success) {
      await old?.close(false).catch(() => undefined);
      return refuse({ ok: false, status: o.status, why: (o as { why: string }).why });
    }
    out = (o as { file: JailFile }).file;
    const file = out;
    writer = new PrefixWriter((b, at) => file.write(b, at));
    scope = `files:${Buffer.from(randomBytes(12)).toString('hex')}`;
    const key = new Uint8Array(randomBytes(32));
    const avg = fileDedupAvg(old?.size ?? 0);
    ch.dedupBasis(scope, key, avg, writer.progress);
    // A basis that cannot be read costs bytes on the wire, not the put.
    const pieces = old && readPieces(basisOf(old), dedupMemoryOf(ch.pd));
    basisRead = pieces;
    // inPlace: the new version is assembled in this copy of the old one (a held chunk already
    // where it belongs is not copied; no object-sized buffer); it is ours until released below.
    filled = dedupStoreOf(ch.pd).fill(scope, pieces?.source, { key, avg }, { reference: true, inPlace: true }).catch(() => 0);
    ctx.counters.dedupBasisBytes += old?.size ?? 0;
    await reply({ ok: true, basis: old?.size ?? 0 });
    const got = await within(ch.next(), BYTES_TIMEOUT_MS, 'the dedup bytes');
    if (got.done || !(got.value instanceof Uint8Array)) return refuse({ ok: false, status: FileStatus.Malformed, why: 'expected the file\'s bytes' });
    const bytes = got.value;
    await writer.finish(bytes);
    const st = await file.close(true);
    out = undefined;
    if (st !== FileStatus.Success) return refuse({ ok: false, status: st, why: statusText(st) });
    ctx.counters.dedupPuts++;
    // In the file: the next transfer's object can use its pages (one assembled in the basis goes
    // back with the basis, below).
    if (bytes.buffer !== pieces?.source.bytes.buffer) giveBack(bytes);
    await reply({ ok: true, bytes: bytes.length });
  } catch (e) {
    if (!proven) {
      // No AUTH in time, a message the untrusted channel refused, or closed for a newer one.
      ctx.counters.dedupRefused++;
      if (e instanceof Late) ctx.counters.dedupAuthTimeouts++;
    }
    // Not to a client that does not take its answers: it would only wait for the close.
    if (!replyLate) refuse({ ok: false, status: FileStatus.IoError, why: e instanceof Error ? e.message : String(e) });
  } finally {
    if (out) {
      // Not committed: no write of it is left in flight, then the temporary is dropped.
      await writer?.stop();
      await out.close(false).catch(() => undefined);
    }
    ctx.pending.delete(ch);
    if (session) ctx.sessions.unbind(session, ch);
    if (scope) dedupStoreOf(ch.pd).dropScope(scope);
    // The receiver may still be assembling the object in the basis (inPlace) until its channel
    // has torn down: ROUNDs in flight are placed until then, whatever the scope. Only then is
    // the basis released (its read stopped, its file closed) for a later transfer's pages.
    await ch.close().catch(() => undefined);
    if (basisRead) {
      const r = basisRead;
      // The transfer's slot goes with its basis: only then is that memory free for another.
      void filled.then(() => r.stop()).then(() => r.release()).catch(() => undefined).then(() => void (running && ended()));
    } else if (running) ended();
  }
}

// ---- the client half ---------------------------------------------------------------------------

/** What a dedup transfer moved (from dev.stats().dedup of the client's device). */
export interface DedupTransferStats {
  /** Bytes of the other side's basis (put: the server's old file; get: the local copy). */
  basisBytes: number;
  chunks: number;
  /** Chunks that crossed the wire, and their bytes (the rest came from the basis). */
  chunksMoved: number;
  bytesMoved: number;
}

/** A single-use key of the session, for one dedup channel's AUTH. */
type Negotiated = { resumeKey: Uint8Array; keyId: Uint8Array; kAuth: Uint8Array };

export interface DedupClientSide {
  dev: Device;
  address: DeviceAddress;
  negotiate(): Promise<Negotiated>;
  timeoutMs: number;
}

async function openDedupChannel(c: DedupClientSide): Promise<Channel> {
  return connectChannel(c.dev, c.address, { service: FILE_DEDUP_SERVICE, maxMessage: DEDUP_MAX_BYTES, connectTimeoutMs: c.timeoutMs });
}

/**
 * The transfer's key (a round trip on the control pipe) and its channel (a connect of the RDMA
 * device) at once: neither needs the other until the AUTH. A channel whose key was refused is
 * closed.
 */
async function keyAndChannel(c: DedupClientSide): Promise<[Negotiated, Channel]> {
  const opening = openDedupChannel(c);
  // Observed now: a connect that fails before the key comes is thrown below, not left unhandled.
  opening.catch(() => undefined);
  try {
    const neg = await c.negotiate();
    return [neg, await opening];
  } catch (e) {
    void opening.then((ch) => ch.close()).catch(() => undefined);
    throw e;
  }
}

/** A refusal's status: one of the table's, not Success. */
const isRefusal = (n: unknown): boolean => n !== FileStatus.Success && isFileStatus(n);

async function answer(ch: Channel, ms: number): Promise<DedupReply> {
  const r = await within(ch.next(), ms, 'the server\'s answer');
  if (r.done) throw Object.assign(new Error('the server closed the dedup channel'), { status: FileStatus.IoError });
  const v = r.value as DedupReply;
  // The server's word: a refusal's status must be a status number and its reason a string
  // (msgpack decodes maps: String() of {"toString": 1} throws), the counts of an acceptance
  // non-negative integers, or the answer is malformed.
  const count = (n: unknown): boolean => n === undefined || (Number.isSafeInteger(n) && (n as number) >= 0);
  if (!v || typeof v !== 'object' || typeof v.ok !== 'boolean' || (!v.ok && (!isRefusal(v.status) || typeof v.why !== 'string'))
    || (v.ok && !(count(v.basis) && count(v.size) && count(v.bytes)))) {
    throw Object.assign(new Error('a malformed dedup answer'), { status: FileStatus.Malformed });
  }
  if (!v.ok) throw Object.assign(new Error(v.why), { status: v.status });
  return v;
}

/**
 * The dedup totals of the channel's device memory, read where they are kept: dev.stats() would
 * be a blocking call to the device's NIC thread, twice per transfer, while it is busy.
 */
const totalsOf = (ch: Channel): DedupTotals => dedupTotals(dedupMemoryOf(ch.pd));

/**
 * put --dedup: `bytes` replace `path` on the server, its current version the basis. A source
 * (a local file) is read straight into the sending channel's staging memory.
 */
export async function dedupPut(c: DedupClientSide, bytes: Uint8Array | DedupSource, path: string, fsync: boolean): Promise<DedupTransferStats> {
  if (bytes.length > DEDUP_MAX_BYTES) throw Object.assign(new Error(`a dedup put moves at most ${DEDUP_MAX_BYTES} bytes`), { status: FileStatus.InvalidParameter });
  const [neg, ch] = await keyAndChannel(c);
  try {
    await ch.send(dedupAuth(neg, 'put', path, fsync));
    const ready = await answer(ch, c.timeoutMs);
    const before = { ...totalsOf(ch).sent };
    await (bytes instanceof Uint8Array ? ch.send(bytes, { dedup: true }) : ch.sendDedupFrom(bytes));
    const after = totalsOf(ch).sent;
    const done = await answer(ch, Math.max(c.timeoutMs, 60_000));
    if (done.ok && done.bytes !== bytes.length) throw Object.assign(new Error(`the server wrote ${done.bytes} of ${bytes.length} bytes`), { status: FileStatus.IoError });
    return { basisBytes: (ready.ok && ready.basis) || 0, chunks: after.chunks - before.chunks, chunksMoved: after.chunksSent - before.chunksSent, bytesMoved: after.bytesSent - before.bytesSent };
  } finally {
    await ch.close().catch(() => undefined);
  }
}

/**
 * get --dedup: the server's `path`, the local `basis` (the old copy, if any) the chunk source.
 * The call takes `basis` over and closes it: it is read a piece at a time (into device memory
 * where there is room, chunked in place) while the AUTH goes out. `onProgress`: told as the
 * object's verified prefix grows (DedupReceiverInit.onProgress).
 */
/** A get's file: `release()` once done with `bytes` (they may be the local basis's memory, assembled in place). */
export interface DedupGot {
  bytes: Uint8Array;
  stats: DedupTransferStats;
  release(): void;
  /** The channel's close, under way while the caller writes the object out: await it before the device closes. */
  closed(): Promise<void>;
}

export async function dedupGet(c: DedupClientSide, path: string, basisFile: BasisFile | undefined, onProgress?: (bytes: Uint8Array, done: number) => void): Promise<DedupGot> {
  // The local copy is read and filled first, while the key is negotiated and the channel
  // connects (the receiver answers no OFFER until it is in: it is what the transfer waits for).
  // By reference: this call's own copy of the local file, unchanged until the scope is dropped;
  // inPlace: the file is assembled in it (see the put above).
  const scope = `files-get:${Buffer.from(randomBytes(12)).toString('hex')}`;
  const key = new Uint8Array(randomBytes(32));
  const avg = fileDedupAvg(basisFile?.size ?? 0);
  let store: ChunkStore;
  let basis: ReturnType<typeof readPieces> | undefined;
  try {
    store = dedupStoreOfDevice(c.dev);
    basis = basisFile && basisFile.size > 0 ? readPieces(basisFile, dedupMemoryOfDevice(c.dev)) : undefined;
  } catch (e) {
    await basisFile?.close().catch(() => undefined); // the call closes it, whatever happens
    throw e;
  }
  if (basisFile && !basis) await basisFile.close().catch(() => undefined);
  const filled = basis ? store.fill(scope, basis.source, { key, avg }, { reference: true, inPlace: true }).catch(() => 0) : Promise.resolve(0);
  // Out of the store, and its read has stopped (the file closed): its memory serves a later transfer.
  const releaseBasis = (): void => void (basis && filled.then(() => basis.stop()).then(() => basis.release()));
  let handedOver = false;
  let ch: Channel | undefined;
  let closing: Promise<void> = Promise.resolve();
  try {
    let neg: Negotiated;
    [neg, ch] = await keyAndChannel(c);
    ch.dedupBasis(scope, key, avg, onProgress);
    const before = { ...totalsOf(ch).received };
    await ch.send(dedupAuth(neg, 'get', path, false));
    const head = await answer(ch, c.timeoutMs);
    const r = await within(ch.next(), Math.max(c.timeoutMs, 60_000), 'the file');
    if (r.done || !(r.value instanceof Uint8Array)) throw Object.assign(new Error('expected the file\'s bytes'), { status: FileStatus.Malformed });
    if (head.ok && head.size !== r.value.length) throw Object.assign(new Error(`announced ${head.size} bytes, got ${r.value.length}`), { status: FileStatus.Malformed });
    const after = totalsOf(ch).received;
    const bytes = r.value;
    const inBasis = basis !== undefined && bytes.buffer === basis.source.bytes.buffer;
    handedOver = true;
    return {
      bytes, stats: { basisBytes: basisFile?.size ?? 0, chunks: after.chunks - before.chunks, chunksMoved: after.chunksReceived - before.chunksReceived, bytesMoved: after.bytesReceived - before.bytesReceived },
      release: () => (inBasis ? releaseBasis() : (giveBack(bytes), releaseBasis())),
      closed: () => closing,
    };
  } finally {
    store.dropScope(scope); // stops a fill still running
    // Handed over: the close overlaps the caller's writing of the object (it waits on closed()).
    closing = ch ? ch.close().catch(() => undefined) : closing;
    if (!handedOver) {
      // A basis the object is assembled in is the receiver's until the channel has torn down
      // (ROUNDs in flight are still placed): closed first, released after.
      await closing;
      releaseBasis();
    }
  }
}
