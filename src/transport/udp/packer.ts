// Frame packing: the engine frames one event-loop turn produced for one peer become as few DATA
// payloads as fit (udpEnv.len chains the frames of a payload; layout in docs/wire.md). node:dgram
// has a real cost per datagram and an idle vCPU is slow to wake, so an engine ack, an RDMA
// Write and its ImmediateData, or a Read's response data and its ReadComplete, travel together.
//
// Tagged segments (RDMA Write, Read Response) are cut here, and only here: the udp link says
// `cutsTagged`, so the engine hands each tagged message over as one segment, and the packer
// cuts it at payload boundaries so that a stream of messages fills every datagram (two 64 KiB
// writes in ~2.02 datagrams instead of 4). That is safe only because the engine hands each
// tagged segment to the link exactly once (it never re-emits them; the reliability layer
// resends the same payload bytes), so every copy the receiver can see has the same offset and
// length and its duplicate check by offset holds. Untagged segments are cut by the engine's
// segmenter at the mss and never here: an RNR retry re-emits a Send's frames, and a different
// cut the second time would defeat that check.
//
// Frames of one payload share the QP pair in the reliability header; a change of QP pair starts
// a new payload. Sans-I/O: frames in, (payload, dstQpn, srcQpn) out.
import type { Frame, SegFrame } from '../../core/frame.js';
import { appendViews, copyViews } from '../../core/gather.js';
import { rdSafe64, wr16, wr32, wrSafe64 } from '../../wire/codec.js';
import * as W from '../../wire/fields.gen.js';
import { encodeFrame, encodeSegHead, ENV_CTL_LEN, ENV_SEG_LEN } from './frame-codec.js';
import { ByteSlab } from './slab.js';

/** Below this many data bytes a piece is copied into the payload's head buffer: cheaper than a gather part. */
const GATHER_MIN = 1024;
/** A tagged segment is cut to fill a payload only if at least this much data fits in the room left. */
const MIN_CUT = 4096;
// Offsets as this module's own consts (V8 folds those into optimised code, not imported ones).
const LEN_OFF = W.UDP_ENV_LEN_OFF;
const SEG_OFF_OFF = W.UDP_ENV_SIZE + W.UDP_ENV_SEG_OFF_OFF;
const DDP_CTRL = W.TAGGED_DDP_CTRL_OFF;
const TO_OFF = W.TAGGED_TO_OFF;
const TAGGED_LEN = W.TAGGED_SIZE;
const DDP_T = W.DDP_CTRL_DDP_T;
const DDP_L = W.DDP_CTRL_DDP_L;

export type EmitPayload = (payload: Uint8Array | Uint8Array[], dstQpn: number, srcQpn: number) => void;

export class FramePacker {
  /** Largest payload (what the reliability layer accepts per datagram). */
  readonly room: number;
  // The pieces of the payload being built, as parallel arrays (no object per piece).
  #frames: Frame[] = [];
  #dataOff: number[] = [];
  #dataLen: number[] = [];
  #size = 0;
  #dst = -1;
  #src = -1;
  #slab = new ByteSlab();
  readonly counters = { payloads: 0, frames: 0, cuts: 0 };

  constructor(room: number) {
    this.room = room;
  }

  /** Pack `frames` (in order) into payloads, handing each to `emit` as it is completed. */
  pack(frames: readonly Frame[], emit: EmitPayload): void {
    const room = this.room;
    for (let i = 0; i < frames.length; i++) {
      const f = frames[i]!;
      this.counters.frames++;
      const dst = f.kind === 'seg' ? f.env.dstQpn : f.dstQpn;
      const src = f.kind === 'seg' ? f.env.srcQpn : f.srcQpn;
      if (this.#frames.length > 0 && (dst !== this.#dst || src !== this.#src)) this.#emit(emit);
      this.#dst = dst;
      this.#src = src;
      if (f.kind !== 'seg') {
        if (this.#size + ENV_CTL_LEN > room) this.#emit(emit);
        this.#push(f, 0, 0, ENV_CTL_LEN);
        continue;
      }
      const head = ENV_SEG_LEN + f.hdr.length;
      let data = 0;
      for (const v of f.payload) data += v.length;
      const cuttable = data > 0 && f.hdr.length === TAGGED_LEN && (f.hdr[DDP_CTRL]! & DDP_T) !== 0;
      if (!cuttable) {
        if (this.#size + head + data > room) this.#emit(emit);
        this.#push(f, 0, data, head + data);
        continue;
      }
      let off = 0;
      while (off < data) {
        let avail = room - this.#size - head;
        if (avail < data - off && avail < MIN_CUT) {
          this.#emit(emit);
          avail = room - head;
        }
        const take = Math.min(avail, data - off);
        if (take < data) this.counters.cuts++;
        this.#push(f, off, take, head + take);
        off += take;
      }
    }
    if (this.#frames.length > 0) this.#emit(emit);
  }

  #push(f: Frame, dataOff: number, dataLen: number, bytes: number): void {
    this.#frames.push(f);
    this.#dataOff.push(dataOff);
    this.#dataLen.push(dataLen);
    this.#size += bytes;
  }

  /** Build the payload of the pieces collected so far: one head buffer, data views gathered. */
  #emit(emit: EmitPayload): void {
    const n = this.#frames.length;
    if (n === 0) return;
    let headBytes = 0;
    for (let k = 0; k < n; k++) {
      const f = this.#frames[k]!;
      if (f.kind !== 'seg') headBytes += ENV_CTL_LEN;
      else {
        headBytes += ENV_SEG_LEN + f.hdr.length;
        if (this.#dataLen[k]! < GATHER_MIN) headBytes += this.#dataLen[k]!;
      }
    }
    const buf = this.#slab.take(headBytes);
    const parts: Uint8Array[] = [];
    let p = 0;
    let cut = 0;
    for (let k = 0; k < n; k++) {
      const f = this.#frames[k]!;
      const at = p;
      if (f.kind !== 'seg') {
        p += encodeFrame(f, buf, p);
      } else {
        const dataOff = this.#dataOff[k]!;
        const dataLen = this.#dataLen[k]!;
        p += writeSegHead(f, dataOff, dataLen, buf, p);
        if (dataLen > 0) {
          if (dataLen < GATHER_MIN) {
            p = copyViews(f.payload, dataOff, dataLen, buf, p);
          } else {
            if (p > cut) parts.push(buf.subarray(cut, p));
            cut = p;
            appendViews(f.payload, dataOff, dataLen, parts);
          }
        }
      }
      if (k < n - 1) {
        // This frame's length (envelope included) chains to the next one; the last stays 0.
        let len = p - at;
        if (f.kind === 'seg' && this.#dataLen[k]! >= GATHER_MIN) len += this.#dataLen[k]!;
        wr16(buf, at + LEN_OFF, len);
      }
    }
    if (p > cut) parts.push(buf.subarray(cut, p));
    const dst = this.#dst;
    const src = this.#src;
    this.#frames.length = 0;
    this.#dataOff.length = 0;
    this.#dataLen.length = 0;
    this.#size = 0;
    this.counters.payloads++;
    emit(parts.length === 1 ? parts[0]! : parts, dst, src);
  }
}

/**
 * udpEnv + udpEnvSeg + DDP header of a piece [dataOff, dataOff + dataLen) of seg frame `f` at
 * buf[off…]; returns the bytes written. A piece that is not the whole segment gets its own
 * offsets: envelope off and TO advanced by dataOff, L only on the segment's last piece.
 */
function writeSegHead(f: SegFrame, dataOff: number, dataLen: number, buf: Uint8Array, off: number): number {
  encodeSegHead(f, buf, off);
  let total = 0;
  for (const v of f.payload) total += v.length;
  if (dataOff === 0 && dataLen === total) return ENV_SEG_LEN + f.hdr.length;
  // Cut piece of a tagged segment (the only kind cut).
  wr32(buf, off + SEG_OFF_OFF, f.env.off + dataOff);
  const h = off + ENV_SEG_LEN;
  if (dataOff + dataLen < total) buf[h + DDP_CTRL] = buf[h + DDP_CTRL]! & ~DDP_L;
  // TO < 2^53 (spec MAX_SAFE_TO): a safe integer, carried across the 32-bit word boundary.
  wrSafe64(buf, h + TO_OFF, rdSafe64(buf, h + TO_OFF) + dataOff);
  return ENV_SEG_LEN + f.hdr.length;
}
