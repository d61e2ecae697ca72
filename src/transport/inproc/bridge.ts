// Inproc across worker threads: two single-producer/single-consumer byte rings in one
// SharedArrayBuffer (one per direction), woken with Atomics.notify / Atomics.waitAsync (no
// polling loop, no postMessage on the data path). Each thread's devices reach the other
// thread's devices by address id prefix (`<pid>:<threadId>:`), announced by a hello record.
//
//   main:   const bridge = createInprocBridge();  new Worker(url, { workerData: bridge.init });
//           await bridge.ready;                   // the worker joined
//   worker: const bridge = joinInprocBridge(workerData);
//
// Frames are serialised into the ring (header, envelope, payload bytes) and copied out again on
// the other side: a device in another thread lives in another WebAssembly.Memory, so a copy
// is the wire. One record per send() call (a batch of frames to one device). The ring header,
// slot, record and frame layouts are in src/wire/inproc-spec.ts.
import { ErrorCode, SabreError } from '../../core/errors.js';
import type { DeviceAddress } from '../../core/address.js';
import type { Frame } from '../../core/frame.js';
import * as H from '../../wire/host-fields.gen.js';
import { INPROC_WRAP, InprocFrameKind, InprocRecordKind } from '../../wire/inproc-spec.js';
import { addRemoteThread, deliverLocal, type InprocRoute, removeRemoteThread, threadPrefix } from './fabric.js';

// Offsets as this module's own consts: V8 folds those into optimised code but loads an imported
// binding at every use (bench/wire-codec.bench.mjs).
const HDR = H.INPROC_RING_SIZE;
// The ring header is read as i32 words (Atomics): word index = byte offset / 4.
const W = H.INPROC_RING_WRITE_OFF >>> 2;
const R = H.INPROC_RING_READ_OFF >>> 2;
const N = H.INPROC_RING_NOTIFY_OFF >>> 2;
const CLOSED = H.INPROC_RING_CLOSED_OFF >>> 2;
const WRAP = INPROC_WRAP;
const SLOT = H.INPROC_SLOT_SIZE;
const SLOT_LEN = H.INPROC_SLOT_LEN_OFF;
const REC = H.INPROC_RECORD_SIZE;
const REC_KIND = H.INPROC_RECORD_KIND_OFF;
const REC_TO_LEN = H.INPROC_RECORD_TO_LEN_OFF;
const REC_FROM_LEN = H.INPROC_RECORD_FROM_LEN_OFF;
const REC_COUNT = H.INPROC_RECORD_COUNT_OFF;
const FRAME = H.INPROC_FRAME_SIZE;
const FRAME_KIND = H.INPROC_FRAME_KIND_OFF;
const FRAME_EPOCH = H.INPROC_FRAME_EPOCH_OFF;
const FRAME_SRC = H.INPROC_FRAME_SRC_QPN_OFF;
const FRAME_DST = H.INPROC_FRAME_DST_QPN_OFF;
const SEG = H.INPROC_SEG_SIZE;
const SEG_SSN = H.INPROC_SEG_SSN_OFF;
const SEG_ACK = H.INPROC_SEG_ACK_OFF;
const SEG_MSG_LEN = H.INPROC_SEG_MSG_LEN_OFF;
const SEG_OFF = H.INPROC_SEG_OFF_OFF;
const SEG_HDR_LEN = H.INPROC_SEG_HDR_LEN_OFF;
const SEG_PAYLOAD_LEN = H.INPROC_SEG_PAYLOAD_LEN_OFF;
const CTRL = H.INPROC_CTRL_SIZE;
const CTRL_VALUE = H.INPROC_CTRL_VALUE_OFF;
const K_SEG = InprocFrameKind.Seg;
const K_ACK = InprocFrameKind.Ack;
const K_RNR = InprocFrameKind.Rnr;
const K_HELLO = InprocFrameKind.Hello;

export interface BridgeInit {
  readonly sab: SharedArrayBuffer;
  readonly ringBytes: number;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

class Ring {
  readonly i32: Int32Array;
  readonly u8: Uint8Array;
  readonly dv: DataView;
  readonly size: number;
  constructor(sab: SharedArrayBuffer, base: number, size: number) {
    this.i32 = new Int32Array(sab, base, HDR / 4);
    this.u8 = new Uint8Array(sab, base + HDR, size);
    this.dv = new DataView(sab, base + HDR, size);
    this.size = size;
  }

  /** Write one record; false if it does not fit now. */
  put(rec: Uint8Array): boolean {
    const need = SLOT + ((rec.length + 3) & ~3);
    if (need + SLOT > this.size) throw new SabreError(ErrorCode.LimitExceeded, `frame batch of ${rec.length} bytes exceeds the bridge ring`);
    const w = Atomics.load(this.i32, W);
    const r = Atomics.load(this.i32, R);
    const used = w - r;
    let pos = w % this.size;
    let pad = 0;
    if (pos + need > this.size) pad = this.size - pos;
    if (used + pad + need > this.size) return false;
    if (pad) {
      if (pad >= SLOT) this.dv.setUint32(pos + SLOT_LEN, WRAP, true);
      pos = 0;
    }
    this.dv.setUint32(pos + SLOT_LEN, rec.length, true);
    this.u8.set(rec, pos + SLOT);
    Atomics.store(this.i32, W, w + pad + need);
    Atomics.add(this.i32, N, 1);
    Atomics.notify(this.i32, N);
    return true;
  }

  /** Take every record available. */
  drain(each: (rec: Uint8Array) => void): void {
    let r = Atomics.load(this.i32, R);
    const w = Atomics.load(this.i32, W);
    while (r < w) {
      let pos = r % this.size;
      if (this.size - pos < SLOT || this.dv.getUint32(pos + SLOT_LEN, true) === WRAP) {
        r += this.size - pos;
        pos = 0;
      }
      const len = this.dv.getUint32(pos + SLOT_LEN, true);
      each(this.u8.slice(pos + SLOT, pos + SLOT + len));
      r += SLOT + ((len + 3) & ~3);
    }
    Atomics.store(this.i32, R, r);
  }
}

/** A record: its head, the destination and source texts, then `frames` (none for a hello). */
function encodeRecord(kind: number, toB: Uint8Array, fromB: Uint8Array, frames: readonly Frame[]): Uint8Array {
  let n = REC + toB.length + fromB.length;
  for (const f of frames) {
    n += FRAME;
    if (f.kind === 'seg') {
      n += SEG + f.hdr.length;
      for (const p of f.payload) n += p.length;
    } else n += CTRL;
  }
  const out = new Uint8Array(n);
  const dv = new DataView(out.buffer);
  out[REC_KIND] = kind;
  dv.setUint16(REC_TO_LEN, toB.length, true);
  dv.setUint16(REC_FROM_LEN, fromB.length, true);
  dv.setUint32(REC_COUNT, frames.length, true);
  let o = REC;
  out.set(toB, o); o += toB.length;
  out.set(fromB, o); o += fromB.length;
  for (const f of frames) {
    const seg = f.kind === 'seg';
    out[o + FRAME_KIND] = seg ? K_SEG : f.kind === 'ack' ? K_ACK : f.kind === 'rnr' ? K_RNR : K_HELLO;
    out[o + FRAME_EPOCH] = (seg ? f.env.epoch : f.kind === 'hello' ? 0 : f.epoch) ?? 0;
    dv.setUint32(o + FRAME_SRC, seg ? f.env.srcQpn : f.srcQpn, true);
    dv.setUint32(o + FRAME_DST, seg ? f.env.dstQpn : f.dstQpn, true);
    o += FRAME;
    if (seg) {
      let pl = 0;
      for (const p of f.payload) pl += p.length;
      dv.setFloat64(o + SEG_SSN, f.env.ssn, true);
      dv.setFloat64(o + SEG_ACK, f.env.ack ?? -1, true);
      dv.setUint32(o + SEG_MSG_LEN, f.env.msgLen, true);
      dv.setUint32(o + SEG_OFF, f.env.off, true);
      dv.setUint16(o + SEG_HDR_LEN, f.hdr.length, true);
      dv.setUint32(o + SEG_PAYLOAD_LEN, pl, true);
      o += SEG;
      out.set(f.hdr, o); o += f.hdr.length;
      for (const p of f.payload) { out.set(p, o); o += p.length; }
    } else {
      dv.setFloat64(o + CTRL_VALUE, f.kind === 'hello' ? (f.reply ? 1 : 0) : f.ssn, true);
      o += CTRL;
    }
  }
  return out;
}

function encodeBatch(to: string, from: DeviceAddress, frames: Frame[]): Uint8Array {
  return encodeRecord(InprocRecordKind.Batch, enc.encode(to), enc.encode(JSON.stringify(from)), frames);
}

/** The hello: this thread's address prefix, in the source's place. */
function encodeHello(prefix: string): Uint8Array {
  return encodeRecord(InprocRecordKind.Hello, new Uint8Array(0), enc.encode(prefix), []);
}

/** The record's kind and texts, and where its frames start. */
function recordHead(rec: Uint8Array, dv: DataView): { kind: number; to: Uint8Array; from: Uint8Array; count: number; at: number } {
  const tl = dv.getUint16(REC_TO_LEN, true);
  const fl = dv.getUint16(REC_FROM_LEN, true);
  return {
    kind: rec[REC_KIND]!,
    to: rec.subarray(REC, REC + tl),
    from: rec.subarray(REC + tl, REC + tl + fl),
    count: dv.getUint32(REC_COUNT, true),
    at: REC + tl + fl,
  };
}

function decodeFrames(rec: Uint8Array, dv: DataView, count: number, at: number): Frame[] {
  const frames: Frame[] = [];
  let o = at;
  for (let i = 0; i < count; i++) {
    const k = rec[o + FRAME_KIND];
    const epoch = rec[o + FRAME_EPOCH]!;
    const srcQpn = dv.getUint32(o + FRAME_SRC, true);
    const dstQpn = dv.getUint32(o + FRAME_DST, true);
    o += FRAME;
    if (k === K_SEG) {
      const ssn = dv.getFloat64(o + SEG_SSN, true);
      const ack = dv.getFloat64(o + SEG_ACK, true);
      const msgLen = dv.getUint32(o + SEG_MSG_LEN, true);
      const off = dv.getUint32(o + SEG_OFF, true);
      const hl = dv.getUint16(o + SEG_HDR_LEN, true);
      const pl = dv.getUint32(o + SEG_PAYLOAD_LEN, true);
      o += SEG;
      const hdr = rec.subarray(o, o + hl); o += hl;
      const payload = pl > 0 ? [rec.subarray(o, o + pl)] : [];
      o += pl;
      frames.push({ kind: 'seg', env: { srcQpn, dstQpn, ssn, msgLen, off, epoch, ...(ack >= 0 ? { ack } : {}) }, hdr, payload });
    } else {
      const v = dv.getFloat64(o + CTRL_VALUE, true);
      o += CTRL;
      if (k === K_HELLO) frames.push({ kind: 'hello', srcQpn, dstQpn, reply: v === 1 });
      else frames.push({ kind: k === K_ACK ? 'ack' : 'rnr', srcQpn, dstQpn, ssn: v, epoch });
    }
  }
  return frames;
}

export class InprocBridge implements InprocRoute {
  /** Pass this to the other thread (workerData / postMessage). */
  readonly init: BridgeInit;
  /** Resolves when the other side has joined. */
  readonly ready: Promise<void>;
  #out: Ring;
  #in: Ring;
  #backlog: Uint8Array[] = [];
  #peerPrefix?: string;
  #closed = false;
  #readyResolve!: () => void;
  #retry?: ReturnType<typeof setTimeout>;
  // An open bridge keeps its thread alive (a pending Atomics.waitAsync does not).
  #keepAlive = setInterval(() => {}, 1 << 30);

  /** @internal use createInprocBridge / joinInprocBridge */
  constructor(init: BridgeInit, side: 0 | 1) {
    this.init = init;
    const size = init.ringBytes;
    const a = new Ring(init.sab, 0, size);
    const b = new Ring(init.sab, HDR + size, size);
    this.#out = side === 0 ? a : b;
    this.#in = side === 0 ? b : a;
    this.ready = new Promise((r) => (this.#readyResolve = r));
    this.#put(encodeHello(threadPrefix()));
    void this.#listen();
  }

  /** @internal the fabric routes frames for the other thread's devices here: one record per batch. */
  deliver(to: string, from: DeviceAddress, frames: Frame[]): void {
    if (this.#closed || frames.length === 0) return;
    this.#put(encodeBatch(to, from, frames));
  }

  #put(rec: Uint8Array): void {
    if (this.#backlog.length > 0 || !this.#out.put(rec)) {
      this.#backlog.push(rec);
      this.#retry ??= setTimeout(this.#flushBacklog, 0);
    }
  }

  #flushBacklog = (): void => {
    this.#retry = undefined;
    while (this.#backlog.length > 0 && this.#out.put(this.#backlog[0]!)) this.#backlog.shift();
    if (this.#backlog.length > 0 && !this.#closed) this.#retry = setTimeout(this.#flushBacklog, 0);
  };

  async #listen(): Promise<void> {
    const i32 = this.#in.i32;
    while (!this.#closed) {
      const seen = Atomics.load(i32, N);
      this.#in.drain((rec) => this.#onRecord(rec));
      if (Atomics.load(i32, CLOSED) || this.#closed) break;
      const w = (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number): { async: boolean; value: Promise<string> | string } }).waitAsync(i32, N, seen);
      if (w.async) await w.value;
    }
  }

  #onRecord(rec: Uint8Array): void {
    const dv = new DataView(rec.buffer, rec.byteOffset, rec.length);
    const h = recordHead(rec, dv);
    if (h.kind === InprocRecordKind.Hello) {
      this.#peerPrefix = dec.decode(h.from);
      addRemoteThread(this.#peerPrefix, this);
      this.#readyResolve();
      return;
    }
    try {
      const from = JSON.parse(dec.decode(h.from)) as DeviceAddress;
      deliverLocal(dec.decode(h.to), from, decodeFrames(rec, dv, h.count, h.at));
    } catch {
      // A record we cannot decode is dropped; the rings are ours on both ends, so this is a bug, not input.
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#keepAlive);
    if (this.#retry) clearTimeout(this.#retry);
    if (this.#peerPrefix) removeRemoteThread(this.#peerPrefix);
    for (const r of [this.#in, this.#out]) {
      Atomics.store(r.i32, CLOSED, 1);
      Atomics.add(r.i32, N, 1);
      Atomics.notify(r.i32, N);
    }
  }
}

/** Main side: make a bridge; hand `bridge.init` to the worker. */
export function createInprocBridge(opts: { ringBytes?: number } = {}): InprocBridge {
  const ringBytes = opts.ringBytes ?? 16 * 1024 * 1024;
  const sab = new SharedArrayBuffer(2 * (HDR + ringBytes));
  return new InprocBridge({ sab, ringBytes }, 0);
}

/** Worker side: join the bridge the other thread created. */
export function joinInprocBridge(init: BridgeInit): InprocBridge {
  if (!init || !(init.sab instanceof SharedArrayBuffer)) throw new SabreError(ErrorCode.InvalidArgument, 'joinInprocBridge needs the init object of createInprocBridge');
  return new InprocBridge(init, 1);
}
