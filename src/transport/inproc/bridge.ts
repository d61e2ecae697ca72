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
// is the wire. One record per send() call (a batch of frames to one device).
import { ErrorCode, SabreError } from '../../core/errors.js';
import type { DeviceAddress } from '../../core/address.js';
import type { Frame } from '../../core/frame.js';
import { addRemoteThread, deliverLocal, type InprocRoute, removeRemoteThread, threadPrefix } from './fabric.js';

const HDR = 64; // header bytes per ring: i32 [0] write, [4] read, [8] notify counter, [12] closed
const W = 0;
const R = 1;
const N = 2;
const CLOSED = 3;
const WRAP = 0xffffffff;

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
    const need = 4 + ((rec.length + 3) & ~3);
    if (need + 4 > this.size) throw new SabreError(ErrorCode.LimitExceeded, `frame batch of ${rec.length} bytes exceeds the bridge ring`);
    const w = Atomics.load(this.i32, W);
    const r = Atomics.load(this.i32, R);
    const used = w - r;
    let pos = w % this.size;
    let pad = 0;
    if (pos + need > this.size) pad = this.size - pos;
    if (used + pad + need > this.size) return false;
    if (pad) {
      if (pad >= 4) this.dv.setUint32(pos, WRAP, true);
      pos = 0;
    }
    this.dv.setUint32(pos, rec.length, true);
    this.u8.set(rec, pos + 4);
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
      if (this.size - pos < 4 || this.dv.getUint32(pos, true) === WRAP) {
        r += this.size - pos;
        pos = 0;
      }
      const len = this.dv.getUint32(pos, true);
      each(this.u8.slice(pos + 4, pos + 4 + len));
      r += 4 + ((len + 3) & ~3);
    }
    Atomics.store(this.i32, R, r);
  }
}

function encodeBatch(to: string, from: DeviceAddress, frames: Frame[]): Uint8Array {
  const toB = enc.encode(to);
  const fromB = enc.encode(JSON.stringify(from));
  let n = 1 + 2 + toB.length + 2 + fromB.length + 4;
  for (const f of frames) {
    n += 1 + 8;
    if (f.kind === 'seg') {
      n += 8 + 4 + 4 + 8 + 2 + f.hdr.length + 4;
      for (const p of f.payload) n += p.length;
    } else n += 8;
  }
  const out = new Uint8Array(n);
  const dv = new DataView(out.buffer);
  let o = 0;
  out[o++] = 1; // batch record
  dv.setUint16(o, toB.length, true); out.set(toB, o + 2); o += 2 + toB.length;
  dv.setUint16(o, fromB.length, true); out.set(fromB, o + 2); o += 2 + fromB.length;
  dv.setUint32(o, frames.length, true); o += 4;
  for (const f of frames) {
    out[o++] = f.kind === 'seg' ? 0 : f.kind === 'ack' ? 1 : f.kind === 'rnr' ? 2 : 3;
    const src = f.kind === 'seg' ? f.env.srcQpn : f.srcQpn;
    const dst = f.kind === 'seg' ? f.env.dstQpn : f.dstQpn;
    dv.setUint32(o, src, true); dv.setUint32(o + 4, dst, true); o += 8;
    if (f.kind === 'seg') {
      dv.setFloat64(o, f.env.ssn, true);
      dv.setUint32(o + 8, f.env.msgLen, true);
      dv.setUint32(o + 12, f.env.off, true);
      dv.setFloat64(o + 16, f.env.ack ?? -1, true);
      dv.setUint16(o + 24, f.hdr.length, true);
      o += 26;
      out.set(f.hdr, o); o += f.hdr.length;
      let pl = 0;
      for (const p of f.payload) pl += p.length;
      dv.setUint32(o, pl, true); o += 4;
      for (const p of f.payload) { out.set(p, o); o += p.length; }
    } else if (f.kind === 'hello') {
      dv.setFloat64(o, f.reply ? 1 : 0, true); o += 8;
    } else {
      dv.setFloat64(o, f.ssn, true); o += 8;
    }
  }
  return out;
}

function decodeBatch(rec: Uint8Array): { to: string; from: DeviceAddress; frames: Frame[] } {
  const dv = new DataView(rec.buffer, rec.byteOffset, rec.length);
  let o = 1;
  const tl = dv.getUint16(o, true);
  const to = dec.decode(rec.subarray(o + 2, o + 2 + tl)); o += 2 + tl;
  const fl = dv.getUint16(o, true);
  const from = JSON.parse(dec.decode(rec.subarray(o + 2, o + 2 + fl))) as DeviceAddress; o += 2 + fl;
  const count = dv.getUint32(o, true); o += 4;
  const frames: Frame[] = [];
  for (let i = 0; i < count; i++) {
    const k = rec[o++];
    const srcQpn = dv.getUint32(o, true);
    const dstQpn = dv.getUint32(o + 4, true);
    o += 8;
    if (k === 0) {
      const ssn = dv.getFloat64(o, true);
      const msgLen = dv.getUint32(o + 8, true);
      const off = dv.getUint32(o + 12, true);
      const ack = dv.getFloat64(o + 16, true);
      const hl = dv.getUint16(o + 24, true);
      o += 26;
      const hdr = rec.subarray(o, o + hl); o += hl;
      const pl = dv.getUint32(o, true); o += 4;
      const payload = pl > 0 ? [rec.subarray(o, o + pl)] : [];
      o += pl;
      frames.push({ kind: 'seg', env: { srcQpn, dstQpn, ssn, msgLen, off, ...(ack >= 0 ? { ack } : {}) }, hdr, payload });
    } else {
      const v = dv.getFloat64(o, true); o += 8;
      if (k === 3) frames.push({ kind: 'hello', srcQpn, dstQpn, reply: v === 1 });
      else frames.push({ kind: k === 1 ? 'ack' : 'rnr', srcQpn, dstQpn, ssn: v });
    }
  }
  return { to, from, frames };
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
    this.#put(Uint8Array.of(0, ...enc.encode(threadPrefix())));
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
    if (rec[0] === 0) {
      this.#peerPrefix = dec.decode(rec.subarray(1));
      addRemoteThread(this.#peerPrefix, this);
      this.#readyResolve();
      return;
    }
    try {
      const { to, from, frames } = decodeBatch(rec);
      deliverLocal(to, from, frames);
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
