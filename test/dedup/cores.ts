// A deterministic harness around the dedup transfer cores (src/dedup/transfer.ts), with no
// sockets: messages are handed across in order, and a "write" action copies the object's bytes
// into the receiver's landing zone the way RDMA WRITE placement does (segment by segment, each
// advancing the slot's chunk map — the call place() makes for a hooked zone). Shared by the
// transfer tests and the shared-store tests.
import type { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { ChunkHasher, hashAlgName } from '../../src/dedup/hash.js';
import { DeviceChunker } from '../../src/dedup/chunker.js';
import { decode } from '../../src/dedup/messages.js';
import type { RdmaWritePath } from '../../src/dedup/endpoint.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DedupRecvCore, DedupSendCore, type RecvAction, type RecvStats, type SendAction, type SendResult } from '../../src/dedup/transfer.js';
import type { SabreError } from '../../src/core/errors.js';
import { pollAll, type PollsActions, type Tagged } from '../../src/core/sans-io.js';

export const SLOTS = 3;
export const SLOT_LEN = 256 * 1024;
export const KEY = new Uint8Array(32).fill(5);

/** Byte equality without vitest's element-by-element deep compare (seconds on megabytes). */
export const same = (x: Uint8Array | undefined, y: Uint8Array): boolean => x !== undefined && Buffer.compare(x, y) === 0;

export interface SendOpts {
  /** Flip this byte of the object as it is placed. */
  corrupt?: number;
  mtu?: number;
  tamper?: (m: Uint8Array) => Uint8Array;
  /** Place one segment per piece a second time after it was hashed: the same bytes or a flipped one. */
  replay?: 'same' | 'flipped';
  /** Chunk lengths to offer instead of the chunker's (a sender naming chunks of its choice). */
  lens?: number[];
  /**
   * An ordered write path (rc order on one QP): each write is placed when it is posted and its
   * ROUND goes right behind it (handleWritePosted); its completion comes only once no message
   * is left to hand across, so GRANTs arrive before completions.
   */
  ordered?: boolean;
}

export interface Sent {
  result?: SendResult;
  error?: SabreError;
  got?: Uint8Array;
  stats?: RecvStats;
  rxError?: SabreError;
  /** Kinds of the messages the receiver got, in order. */
  msgs: number[];
  /** Every message the receiver sent during the transfer: all a sender ever learns from it. */
  answers: Uint8Array[];
  /** With progress: each prefix reported final, and whether the object held the right bytes there then. */
  progress: Array<{ done: number; exact: boolean }>;
}

export interface Harness {
  tx: DedupSendCore;
  rx: DedupRecvCore;
  store: ChunkStore;
  send(bytes: Uint8Array, opts?: SendOpts): Sent;
}

export interface HarnessOpts {
  maxEntries?: number;
  maxTotal?: number;
  maxChunks?: number;
  scope?: string;
  key?: Uint8Array;
  keepReceived?: boolean;
  progress?: boolean;
}

export function harness(dm: DeviceMemory, store = new ChunkStore(dm), o: HarnessOpts = {}): Harness {
  const zoneAddr = dm.alloc(SLOTS * SLOT_LEN);
  const { scope = 'peer', key = KEY, ...lim } = o;
  const rx = new DedupRecvCore({ mem: dm, store, scope, zone: { addr: zoneAddr, rkey: 0x1234, length: SLOTS * SLOT_LEN }, slots: SLOTS, avg: 8192, key, ...lim });
  const tx = new DedupSendCore({ window: 2 });
  const toTx: Uint8Array[] = [];
  const toRx: Uint8Array[] = [];
  let sending: Uint8Array | undefined;
  const pushRx = (as: RecvAction[], sink: { got?: Uint8Array; stats?: RecvStats; rxError?: SabreError; answers?: Uint8Array[]; progress?: Sent['progress'] }): void => {
    for (const a of as) {
      if (a.kind === 'send') {
        toTx.push(a.bytes);
        sink.answers?.push(a.bytes);
      } else if (a.kind === 'progress') {
        sink.progress?.push({ done: a.done, exact: !!sending && Buffer.compare(a.bytes.subarray(0, a.done), sending.subarray(0, a.done)) === 0 });
      } else if (a.kind === 'delivered') {
        sink.got = a.bytes;
        sink.stats = a.stats;
      } else sink.rxError = a.error;
    }
  };
  rx.start();
  pushRx(pollAll(rx), {});
  for (const m of toTx.splice(0)) tx.handleMessage(m, 0);
  return {
    tx, rx, store,
    send(bytes, opt = {}) {
      const out: Sent = { msgs: [], answers: [], progress: [] };
      sending = bytes;
      const src = dm.alloc(Math.max(1, bytes.length));
      dm.u8().set(bytes, src);
      const h = tx.hello!;
      const chunker = new DeviceChunker(dm, { avg: h.avg, min: h.min, max: h.max, normalization: h.normalization, key: h.key });
      const lens = opt.lens ?? chunker.chunkAll(src, bytes.length);
      const hasher = new ChunkHasher(dm, hashAlgName(h.hashAlg)!, h.seed);
      const hashes = hasher.hashRun(src, lens);
      const writes: Array<Extract<SendAction, { kind: 'write' }>> = [];
      const completions: number[] = [];
      const mtu = opt.mtu ?? 1400;
      const place = (w: Extract<SendAction, { kind: 'write' }>): void => {
        // RDMA WRITE placement: segments of `mtu`, reversed within each piece (out of order),
        // each placed into the zone and then handed to chunkHashZone(directory, to, len) —
        // the call the engine's place() makes once hooked (docs/dedup.md).
        for (const p of w.pieces) {
          const segs: Array<[number, number]> = [];
          for (let off = 0; off < p.len; off += mtu) segs.push([off, Math.min(mtu, p.len - off)]);
          for (const [off, len] of segs.reverse()) {
            dm.u8().copyWithin(p.remoteAddr + off, src + p.off + off, src + p.off + off + len);
            if (opt.corrupt !== undefined && p.off + off <= opt.corrupt && opt.corrupt < p.off + off + len) dm.u8()[p.remoteAddr + opt.corrupt - p.off]! ^= 1;
            dm.kernels.chunkHashZone(rx.zoneDirectory, p.remoteAddr + off, len);
          }
          // A retransmitted segment placed again after it was hashed: the same bytes (udp
          // retransmit) or, from a hostile peer, different ones.
          if (opt.replay && p.len > 0) {
            if (opt.replay === 'flipped') dm.u8()[p.remoteAddr]! ^= 1;
            dm.kernels.chunkHashZone(rx.zoneDirectory, p.remoteAddr, Math.min(mtu, p.len));
          }
        }
      };
      const pushTx = (as: SendAction[]): void => {
        for (const a of as) {
          if (a.kind === 'send') toRx.push(opt.tamper ? opt.tamper(a.bytes) : a.bytes);
          else if (a.kind === 'write' && opt.ordered) {
            place(a);
            completions.push(a.slot);
            tx.handleWritePosted(a.slot, 0);
            pushTx(pollAll(tx));
          } else if (a.kind === 'write') writes.push(a);
          else if (a.kind === 'done') out.result = a.result;
          else out.error = a.error;
        }
      };
      tx.begin(bytes.length);
      // The manifest in three steps, as the shell streams it.
      const third = Math.max(1, Math.ceil(lens.length / 3));
      for (let i = 0; i < lens.length; i += third) {
        tx.addChunks(lens.slice(i, i + third), hashes.subarray(i * 32, (i + third) * 32));
        pushTx(pollAll(tx));
      }
      tx.endChunks();
      pushTx(pollAll(tx));
      for (let guard = 0; guard < 100_000 && (toRx.length || toTx.length || writes.length || completions.length); guard++) {
        const m = toRx.shift();
        if (m) {
          out.msgs.push(decode(m).kind);
          rx.handleMessage(m, 0);
          pushRx(pollAll(rx), out);
        }
        const b = toTx.shift();
        if (b) {
          tx.handleMessage(b, 0);
          pushTx(pollAll(tx));
        }
        const w = writes.shift();
        if (w) {
          place(w);
          tx.handleWriteDone(w.slot, 0);
          pushTx(pollAll(tx));
        }
        if (!m && !b && !w && completions.length) {
          tx.handleWriteDone(completions.shift()!, 0);
          pushTx(pollAll(tx));
        }
      }
      hasher.free();
      chunker.free();
      dm.free(src);
      return out;
    },
  };
}

/** Hand a core one message and take every action it queued for it. */
export function feed<A extends Tagged>(core: PollsActions<A> & { handleMessage(b: Uint8Array, now: number): void }, b: Uint8Array): A[] {
  core.handleMessage(b, 0);
  return pollAll(core);
}

/** RDMA WRITE as a copy inside the device memory `dm` (staged bytes kept until the next stage or free()). */
export function copyWriter(dm: DeviceMemory): RdmaWritePath & { free(): void } {
  let src = 0;
  return {
    stage(bytes) {
      if (src) dm.free(src);
      src = dm.alloc(Math.max(1, bytes.length));
      dm.u8().set(bytes, src);
      return src;
    },
    async write(pieces) {
      for (const p of pieces) dm.u8().copyWithin(p.remoteAddr, p.src, p.src + p.len);
    },
    free: () => void (src && dm.free(src)),
  };
}
