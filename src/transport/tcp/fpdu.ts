// FPDU framing for the TCP transport (RFC 5044 §4): the framer turns one DDP segment into the
// pieces that go on the wire, the deframer turns any segmentation of the received byte stream
// back into ULPDUs. Both are sans-I/O; the socket shell is connection.ts.
//
//   FPDU = [ULPDU Length u16][ULPDU][pad 0-3 zero bytes][CRC32C, least-significant byte first]
//
// CRC32C covers the length field, the ULPDU, the pad and every marker inside the FPDU. It is
// computed by the WASM kernel: directly on bytes that already live in the device's shared
// memory (the receive staging area, registered regions), through the kernel context's scratch
// window for the few small pieces the framer builds in ordinary buffers.
//
// Markers (when the peer asked for them): a 4-byte marker [u16 0][u16 FPDUPTR] sits at every
// stream position that is a multiple of 512, positions counted from the first octet of the
// first FPDU (after the MPA Request/Reply), markers included. A marker right before an FPDU's
// ULPDU Length field belongs to that FPDU and has FPDUPTR 0; any other marker has FPDUPTR =
// octets from the ULPDU Length field of the FPDU it sits in to the marker. (Wireshark's MPA
// dissector uses the same positions and CRC coverage; see docs/tcp-framing.md.)
import { crc32c as crc32cPlain } from '../../kernels/crc32c.js';
import { crc32cIn } from '../../kernels/crc32c-any.js';
import { CRC32C_SHORT_MAX, crc32cShort } from '../../kernels/crc32c-short.js';
import { MPA_CRC_LEN, MPA_MARKER_INTERVAL } from '../../wire/spec.js';
import { SabreError, ErrorCode } from '../../core/errors.js';
import { rd16, wr16, wr32le } from '../../wire/codec.js';
import * as W from '../../wire/fields.gen.js';
import { fpduLength, fpduPadLength as padLength } from '../../wire/mpa.js';
import { CRC_DESC_BYTES, crcDescLen, crcDescOut, crcDescPtr, writeCrcDesc } from '../../dataplane/descriptors.js';
import { TERM } from '../../wire/terminate.js';
import { fault, type TcpFault } from './fault.js';

/** The part of DeviceMemory (src/dataplane/device-memory.ts) the framing needs. */
export interface FramingMemory {
  u8(): Uint8Array;
  alloc(length: number, align?: number): number;
  dataView?(): DataView;
  free(addr: number): void;
  readonly kernels: {
    crc32c(ptr: number, len: number, previous: number): number;
    /** One call for many buffers: `count` crcBatchDesc records (src/wire/spec.ts). */
    crc32cBatch?(descPtr: number, count: number): void;
  };
}

export const MARKER_INTERVAL = MPA_MARKER_INTERVAL;
export const MARKER_LEN = W.MPA_MARKER_SIZE;
// The FPDU header and marker fields as this module's own consts: V8 folds those into optimised
// code but loads an imported binding at every use.
/** Bytes of the FPDU header (the ULPDU Length field) in front of the ULPDU. */
const HDR = W.MPA_FPDU_SIZE;
const LEN_AT = W.MPA_FPDU_ULPDU_LEN_OFF;
const M_RSVD = W.MPA_MARKER_RSVD_OFF;
const M_PTR = W.MPA_MARKER_FPDU_PTR_OFF;
export const MAX_ULPDU = 0xffff;
/** FPDUs per crc32cBatch call on receive. */
const CRC_BATCH = 128;
/** Free staging space below which rxSpace() compacts: a maximal FPDU (with markers) plus 64 KiB. */
const MIN_READ = 2 * 65536 + 1024;

/**
 * Maximum ULPDU for an EMSS (RFC 5044 §4.4): EMSS − (6 + EMSS mod 4) without markers,
 * EMSS − (6 + 4·⌈EMSS/512⌉ + EMSS mod 4) with markers; so one FPDU (markers included) fits in
 * one TCP segment. Capped at the 16-bit ULPDU Length.
 */
export function mulpdu(emss: number, markers: boolean): number {
  if (!Number.isInteger(emss) || emss < 64) throw new SabreError(ErrorCode.InvalidArgument, `EMSS must be an integer >= 64, got ${emss}`);
  const m = markers ? 4 * Math.ceil(emss / MARKER_INTERVAL) : 0;
  return Math.min(MAX_ULPDU, emss - (6 + m + (emss % 4)));
}

/** Node cannot read TCP_MAXSEG, so EMSS comes from the path: loopback MTU 65536, else Ethernet (MSS 1460 − 12 bytes of timestamps). */
export function defaultEmss(host: string): number {
  const loop = host === 'localhost' || host === '::1' || host.startsWith('127.') || host === '::ffff:127.0.0.1';
  return loop ? 65483 : 1448;
}

// The FPDU's length arithmetic is the wire codec's (src/wire/mpa.ts), which the RFC vectors test.
export { fpduLength } from '../../wire/mpa.js';


function wrMarker(b: Uint8Array, o: number, fpduPtr: number): void {
  wr16(b, o + M_RSVD, 0);
  wr16(b, o + M_PTR, fpduPtr);
}

/**
 * Where the framer writes (connection.ts): header, pad and CRC bytes go into `small()` space —
 * contiguous with the small FPDUs and headers framed before them in the same flush, so a
 * tick's worth of small FPDUs leaves as one chunk — and payload views as their own chunks.
 */
export interface TxSink {
  /** Reserve `n` contiguous bytes appended to the stream: returns their offset in `buf`. */
  small(n: number): number;
  /** The buffer the last small() reserved in. */
  readonly buf: Buffer;
  /** A payload view appended to the stream as is (not copied: unchanged until written). */
  view(v: Uint8Array): void;
}

/** CRC32C of b[from, to), continuing `prev`: byte-wise when tiny, else the kernel. */
function crcRange(b: Uint8Array, from: number, to: number, prev: number): number {
  return to - from <= CRC32C_SHORT_MAX ? crc32cShort(b, prev, from, to) : crc32cPlain(b.subarray(from, to), prev);
}

export interface FramerOptions {
  dp: FramingMemory;
  crc: boolean;
  /** Insert markers (the peer's MPA frame had M set). */
  markers: boolean;
  /** Largest ULPDU accepted (default: 65535, or mulpdu(65535, true) with markers). */
  mulpdu?: number;
}

export class FpduFramer {
  readonly #dp: FramingMemory;
  readonly #crc: boolean;
  readonly #markers: boolean;
  readonly mulpdu: number;
  /** Stream octets sent since the first FPDU (marker arithmetic). */
  streamPos = 0;

  constructor(o: FramerOptions) {
    this.#dp = o.dp;
    this.#crc = o.crc;
    this.#markers = o.markers;
    this.mulpdu = o.mulpdu ?? (o.markers ? mulpdu(65535, true) : MAX_ULPDU);
  }

  /**
   * Frame one DDP segment: `hdr` (DDP/RDMAP header and any RDMAP control payload) followed by
   * `payload`. Appends the wire pieces to `out` (payload views are referenced, not copied: keep
   * them unchanged until written) and returns the number of wire bytes.
   */
  frame(hdr: Uint8Array, payload: readonly Uint8Array[], out: Uint8Array[]): number {
    let ulpduLen = hdr.length;
    for (const p of payload) ulpduLen += p.length;
    if (ulpduLen > this.mulpdu) throw new SabreError(ErrorCode.InvalidArgument, `ULPDU of ${ulpduLen} bytes exceeds MULPDU ${this.mulpdu}`);
    return this.#markers ? this.#frameMarked(hdr, payload, ulpduLen, out) : this.#framePlain(hdr, payload, ulpduLen, out);
  }

  /**
   * Frame one DDP segment into `tx` (see TxSink). `hdr` is copied (the caller may reuse it on
   * return); `payload` views may be referenced. Same bytes as frame(); without markers the
   * header, pad and CRC land in the sink's small space and small segments are framed there
   * whole, with no allocation.
   */
  frameTo(hdr: Uint8Array, payload: readonly Uint8Array[], tx: TxSink): number {
    let ulpduLen = hdr.length;
    for (const p of payload) ulpduLen += p.length;
    if (ulpduLen > this.mulpdu) throw new SabreError(ErrorCode.InvalidArgument, `ULPDU of ${ulpduLen} bytes exceeds MULPDU ${this.mulpdu}`);
    if (this.#markers) {
      const pieces: Uint8Array[] = [];
      // The header is copied here as it is on the plain path (callers may reuse it at once):
      // the marked framing hands out views of what it is given.
      const n = this.#frameMarked(hdr.slice(), payload, ulpduLen, pieces);
      for (const p of pieces) tx.view(p);
      return n;
    }
    const pad = padLength(ulpduLen);
    const total = fpduLength(ulpduLen);
    const crcOn = this.#crc;
    this.streamPos += total;
    if (ulpduLen <= 2048) {
      const off = tx.small(total);
      const b = tx.buf;
      wr16(b, off + LEN_AT, ulpduLen);
      b.set(hdr, off + HDR);
      let o = off + HDR + hdr.length;
      for (const p of payload) {
        b.set(p, o);
        o += p.length;
      }
      for (let i = 0; i < pad; i++) b[o + i] = 0;
      o += pad;
      b.writeUInt32LE(crcOn ? crcRange(b, off, o, 0) : 0, o);
      return total;
    }
    const ho = tx.small(HDR + hdr.length);
    const h = tx.buf;
    wr16(h, ho + LEN_AT, ulpduLen);
    h.set(hdr, ho + HDR);
    let crc = crcOn ? crcRange(h, ho, ho + HDR + hdr.length, 0) : 0;
    const dp = this.#dp;
    for (const p of payload) {
      if (p.length === 0) continue;
      tx.view(p);
      if (crcOn) crc = crc32cIn(dp, p, crc);
    }
    const to = tx.small(pad + MPA_CRC_LEN);
    const t = tx.buf;
    for (let i = 0; i < pad; i++) t[to + i] = 0;
    if (crcOn && pad) crc = crc32cShort(t, crc, to, to + pad);
    t.writeUInt32LE(crc >>> 0, to + pad);
    return total;
  }

  #framePlain(hdr: Uint8Array, payload: readonly Uint8Array[], ulpduLen: number, out: Uint8Array[]): number {
    const pad = padLength(ulpduLen);
    const dp = this.#dp;
    // Small segments travel as one buffer: one write, one CRC call.
    if (ulpduLen <= 2048) {
      const total = fpduLength(ulpduLen);
      const b = Buffer.allocUnsafe(total);
      wr16(b, LEN_AT, ulpduLen);
      b.set(hdr, HDR);
      let o = HDR + hdr.length;
      for (const p of payload) {
        b.set(p, o);
        o += p.length;
      }
      for (let i = 0; i < pad; i++) b[o + i] = 0;
      o += pad;
      const crc = this.#crc ? crc32cPlain(b.subarray(0, o), 0) : 0;
      b.writeUInt32LE(crc, o);
      out.push(b);
      this.streamPos += total;
      return total;
    }
    const head = Buffer.allocUnsafe(HDR + hdr.length);
    wr16(head, LEN_AT, ulpduLen);
    head.set(hdr, HDR);
    const tail = Buffer.alloc(pad + MPA_CRC_LEN);
    out.push(head);
    let crc = 0;
    if (this.#crc) crc = crc32cIn(dp, head, 0);
    for (const p of payload) {
      if (p.length === 0) continue;
      out.push(p);
      if (this.#crc) crc = crc32cIn(dp, p, crc);
    }
    if (this.#crc && pad) crc = crc32cIn(dp, tail.subarray(0, pad), crc);
    tail.writeUInt32LE(crc >>> 0, pad);
    out.push(tail);
    const total = fpduLength(ulpduLen);
    this.streamPos += total;
    return total;
  }

  #frameMarked(hdr: Uint8Array, payload: readonly Uint8Array[], ulpduLen: number, out: Uint8Array[]): number {
    const dp = this.#dp;
    const start = this.streamPos;
    let pos = start;
    let crc = 0;
    const emit = (piece: Uint8Array): void => {
      out.push(piece);
      if (this.#crc) crc = crc32cIn(dp, piece, crc);
      pos += piece.length;
    };
    if (pos % MARKER_INTERVAL === 0) {
      const m = new Uint8Array(MARKER_LEN);
      wrMarker(m, 0, 0);
      emit(m);
    }
    const headerPos = pos;
    const data = (piece: Uint8Array): void => {
      let o = 0;
      while (o < piece.length) {
        if (pos % MARKER_INTERVAL === 0) {
          const m = new Uint8Array(MARKER_LEN);
          wrMarker(m, 0, pos - headerPos);
          emit(m);
        }
        const take = Math.min(piece.length - o, MARKER_INTERVAL - (pos % MARKER_INTERVAL));
        emit(piece.subarray(o, o + take));
        o += take;
      }
    };
    const lenField = new Uint8Array(HDR);
    wr16(lenField, LEN_AT, ulpduLen);
    data(lenField);
    data(hdr);
    for (const p of payload) data(p);
    const pad = padLength(ulpduLen);
    if (pad) data(new Uint8Array(pad));
    if (pos % MARKER_INTERVAL === 0) {
      const m = new Uint8Array(MARKER_LEN);
      wrMarker(m, 0, pos - headerPos);
      emit(m);
    }
    const c = new Uint8Array(MPA_CRC_LEN);
    const v = this.#crc ? crc >>> 0 : 0;
    wr32le(c, 0, v);
    out.push(c);
    pos += MPA_CRC_LEN;
    this.streamPos = pos;
    return pos - start;
  }
}

/** A received ULPDU: `len` bytes at absolute address `ptr` of the device memory (valid during the callback only). */
export interface RxUlpdu {
  ptr: number;
  len: number;
}

export interface DeframerOptions {
  dp: FramingMemory;
  crc: boolean;
  /** The peer inserts markers (our MPA frame had M set). */
  markers: boolean;
  /** Staging bytes in device memory (default 512 KiB, at least 128 KiB: one maximal FPDU plus a read). */
  capacity?: number;
  /** ULPDU lengths above this are a framing error (default 65535: any). */
  maxUlpdu?: number;
}

export interface DeframerSink {
  /** Whole ULPDUs, in stream order; `u8` is the device memory view to read them with. */
  ulpdus(batch: RxUlpdu[], u8: Uint8Array): void;
  /** The stream is unusable from here on; send a Terminate with these codes and close. */
  error(f: TcpFault): void;
}

export class FpduDeframer {
  readonly #dp: FramingMemory;
  readonly #crc: boolean;
  readonly #markers: boolean;
  readonly #maxUlpdu: number;
  readonly #sink: DeframerSink;
  readonly #cap: number;
  #base: number;
  #start = 0;
  #end = 0;
  /** Stream position of staging offset #start. */
  #pos = 0;
  #failed = false;
  #batch: RxUlpdu[] = [];
  /** crc32cBatch descriptors (device memory), one per whole FPDU found in a read; -1 without the batch kernel. */
  readonly #crcDesc: number;

  constructor(o: DeframerOptions, sink: DeframerSink) {
    this.#dp = o.dp;
    this.#crc = o.crc;
    this.#markers = o.markers;
    this.#maxUlpdu = o.maxUlpdu ?? MAX_ULPDU;
    this.#sink = sink;
    this.#cap = Math.max(o.capacity ?? 512 * 1024, 128 * 1024);
    this.#base = o.dp.alloc(this.#cap);
    try {
      this.#crcDesc = o.crc && !o.markers && o.dp.kernels.crc32cBatch ? o.dp.alloc(CRC_BATCH * CRC_DESC_BYTES) : -1;
    } catch (e) {
      // Out of device memory for the descriptors: give the staging back before the caller refuses.
      o.dp.free(this.#base);
      throw e;
    }
  }

  /**
   * Zero-copy receive (connection.ts reads the socket straight into device memory with
   * net's `onread`): the free staging space the next read should land in. Compacts first
   * when less than a maximal FPDU plus a good read is left.
   */
  rxSpace(): Uint8Array {
    if (this.#cap - this.#end < MIN_READ) this.#compact();
    return this.#dp.u8().subarray(this.#base + this.#end, this.#base + this.#cap);
  }

  /** `n` bytes landed at the start of the last rxSpace(): deframe them. Returns false once the stream has failed. */
  commit(n: number): boolean {
    if (this.#failed) return false;
    this.#end += n;
    this.#parse();
    return !this.#failed;
  }

  get failed(): boolean {
    return this.#failed;
  }

  /** Bytes received but not yet part of a whole FPDU. */
  get pending(): number {
    return this.#end - this.#start;
  }

  /** Feed bytes in stream order, any segmentation. Returns false once the stream has failed. */
  push(chunk: Uint8Array): boolean {
    let off = 0;
    while (off < chunk.length && !this.#failed) {
      if (this.#end === this.#cap) this.#compact();
      const n = Math.min(this.#cap - this.#end, chunk.length - off);
      this.#dp.u8().set(chunk.subarray(off, off + n), this.#base + this.#end);
      this.#end += n;
      off += n;
      this.#parse();
    }
    return !this.#failed;
  }

  /** The peer closed the stream: a partial FPDU is a lost stream. */
  end(): void {
    if (this.#failed || this.#start === this.#end) return;
    this.#fail(fault(TERM.streamLost, 'TRUNCATED', `stream ended inside an FPDU (${this.#end - this.#start} bytes pending)`));
  }

  dispose(): void {
    if (this.#base >= 0) this.#dp.free(this.#base);
    if (this.#crcDesc >= 0 && this.#base >= 0) this.#dp.free(this.#crcDesc);
    this.#base = -1;
    this.#failed = true;
  }

  #compact(): void {
    // Keep the bytes' address mod 8: V8 copies within shared memory word by word only when
    // source and destination are equally aligned (else byte by byte, ~5× slower).
    const to = this.#start & 7;
    if (this.#start === to) return;
    const u8 = this.#dp.u8();
    u8.copyWithin(this.#base + to, this.#base + this.#start, this.#base + this.#end);
    this.#end -= this.#start - to;
    this.#start = to;
  }

  #fail(f: TcpFault): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#sink.error(f);
  }

  #parse(): void {
    const u8 = this.#dp.u8();
    const base = this.#base;
    const batch = this.#batch;
    let bad: TcpFault | undefined;
    if (this.#crcDesc >= 0) bad = this.#parseBatched(u8, base, batch);
    else {
      while (!this.#failed) {
        const got = this.#markers ? this.#nextMarked(u8, base, batch) : this.#nextPlain(u8, base, batch);
        if (!got) break;
      }
    }
    // Everything before a bad FPDU is good: it goes up before the stream is failed.
    if (batch.length) {
      this.#batch = [];
      this.#sink.ulpdus(batch, u8);
    }
    if (bad) this.#fail(bad);
  }

  /**
   * No markers, CRC on: find every whole FPDU in the staged bytes, then check all their CRCs
   * with one crc32cBatch call per CRC_BATCH FPDUs (the kernel runs on the bytes where the
   * socket put them). Returns the fault of the first bad FPDU, if any.
   */
  #parseBatched(u8: Uint8Array, base: number, batch: RxUlpdu[]): TcpFault | undefined {
    const dv = this.#dp.dataView ? this.#dp.dataView() : new DataView(u8.buffer);
    const desc = this.#crcDesc;
    for (;;) {
      let n = 0;
      let at0 = this.#start;
      while (n < CRC_BATCH) {
        const avail = this.#end - at0;
        if (avail < 2) break;
        const at = base + at0;
        const ulen = rd16(u8, at + LEN_AT);
        if (ulen > this.#maxUlpdu) {
          if (n === 0) return fault(TERM.fpduStart, 'LENGTH', `ULPDU length ${ulen} exceeds ${this.#maxUlpdu}`);
          break; // check the FPDUs before it first
        }
        const total = fpduLength(ulen);
        if (avail < total) break;
        writeCrcDesc(dv, desc + n * CRC_DESC_BYTES, at, total - MPA_CRC_LEN, 0);
        n++;
        at0 += total;
      }
      if (n === 0) return undefined;
      this.#dp.kernels.crc32cBatch!(desc, n);
      for (let i = 0; i < n; i++) {
        const d = desc + i * CRC_DESC_BYTES;
        const at = crcDescPtr(dv, d);
        const len = crcDescLen(dv, d);
        const got = crcDescOut(dv, d);
        const wire = dv.getUint32(at + len, true);
        if (got !== wire) return fault(TERM.crc, 'CRC', `FPDU CRC32C mismatch: wire ${hex(wire)}, computed ${hex(got)}`);
        batch.push({ ptr: at + HDR, len: rd16(u8, at + LEN_AT) });
        this.#start += len + MPA_CRC_LEN;
        this.#pos += len + MPA_CRC_LEN;
      }
    }
  }

  #nextPlain(u8: Uint8Array, base: number, batch: RxUlpdu[]): boolean {
    const avail = this.#end - this.#start;
    if (avail < 2) return false;
    const at = base + this.#start;
    const ulen = rd16(u8, at + LEN_AT);
    if (ulen > this.#maxUlpdu) {
      this.#fail(fault(TERM.fpduStart, 'LENGTH', `ULPDU length ${ulen} exceeds ${this.#maxUlpdu}`));
      return false;
    }
    const total = fpduLength(ulen);
    if (avail < total) return false;
    if (this.#crc && !this.#checkCrc(u8, at, total - MPA_CRC_LEN)) return false;
    batch.push({ ptr: at + HDR, len: ulen });
    this.#start += total;
    this.#pos += total;
    return true;
  }

  #checkCrc(u8: Uint8Array, at: number, len: number): boolean {
    const got = this.#dp.kernels.crc32c(at, len, 0) >>> 0;
    const c = at + len;
    const wire = (u8[c]! | (u8[c + 1]! << 8) | (u8[c + 2]! << 16) | (u8[c + 3]! << 24)) >>> 0;
    if (got === wire) return true;
    this.#fail(fault(TERM.crc, 'CRC', `FPDU CRC32C mismatch: wire ${hex(wire)}, computed ${hex(got)}`));
    return false;
  }

  #nextMarked(u8: Uint8Array, base: number, batch: RxUlpdu[]): boolean {
    const avail = this.#end - this.#start;
    const at = base + this.#start;
    const pos = this.#pos;
    let lead = 0;
    if (pos % MARKER_INTERVAL === 0) {
      if (avail < MARKER_LEN) return false;
      if (markerPtr(u8, at) !== 0) {
        this.#fail(fault(TERM.fpduStart, 'MARKER', `marker before an FPDU at stream position ${pos} has FPDUPTR ${markerPtr(u8, at)}, expected 0`));
        return false;
      }
      lead = MARKER_LEN;
    }
    if (avail < lead + HDR) return false;
    const headerPos = pos + lead;
    const h = at + lead;
    const ulen = rd16(u8, h + LEN_AT);
    if (ulen > this.#maxUlpdu) {
      this.#fail(fault(TERM.fpduStart, 'LENGTH', `ULPDU length ${ulen} exceeds ${this.#maxUlpdu}`));
      return false;
    }
    const plain = fpduLength(ulen);
    // Raw end: plain bytes plus every marker that starts inside [headerPos, end).
    let end = headerPos + plain;
    for (;;) {
      const n = markersIn(headerPos, end);
      const next = headerPos + plain + MARKER_LEN * n;
      if (next === end) break;
      end = next;
    }
    const raw = end - pos;
    if (avail < raw) return false;
    for (let m = firstMarkerAtOrAfter(headerPos); m < end; m += MARKER_INTERVAL) {
      const ptr = markerPtr(u8, at + (m - pos));
      if (ptr !== m - headerPos) {
        this.#fail(fault(TERM.fpduStart, 'MARKER', `marker at stream position ${m} has FPDUPTR ${ptr}, expected ${m - headerPos}`));
        return false;
      }
    }
    if (this.#crc && !this.#checkCrc(u8, at, raw - MPA_CRC_LEN)) return false;
    // Close the marker gaps inside the ULPDU so it is contiguous for placement.
    const ulpduStart = h + HDR;
    const ulpduStreamStart = headerPos + HDR;
    let write = ulpduStart;
    let streamAt = ulpduStreamStart;
    let left = ulen;
    while (left > 0) {
      const toMarker = MARKER_INTERVAL - (streamAt % MARKER_INTERVAL);
      if (toMarker === MARKER_INTERVAL && streamAt !== ulpduStreamStart) {
        streamAt += MARKER_LEN;
        continue;
      }
      const take = Math.min(left, toMarker);
      const read = at + (streamAt - pos);
      if (read !== write) u8.copyWithin(write, read, read + take);
      write += take;
      streamAt += take;
      left -= take;
    }
    batch.push({ ptr: ulpduStart, len: ulen });
    this.#start += raw;
    this.#pos = end;
    return true;
  }
}

function markerPtr(u8: Uint8Array, at: number): number {
  return rd16(u8, at + M_PTR);
}

function firstMarkerAtOrAfter(p: number): number {
  return Math.ceil(p / MARKER_INTERVAL) * MARKER_INTERVAL;
}

/** Markers starting in [from, to). */
function markersIn(from: number, to: number): number {
  const first = firstMarkerAtOrAfter(from);
  return first >= to ? 0 : Math.floor((to - 1 - first) / MARKER_INTERVAL) + 1;
}

function hex(v: number): string {
  return `0x${v.toString(16).padStart(8, '0')}`;
}
