// Engine frames (src/core/frame.ts) in the payload of a UDP DATA datagram: the engine
// envelope (udpEnv, + udpEnvSeg for segments; layouts in src/wire/spec.ts, byte diagrams in
// docs/wire.md) followed by the DDP segment; several frames of one QP pair may share a payload,
// chained by udpEnv.len (./packer.ts builds such payloads, decodeFrames splits them). The QP numbers are not in the payload: they ride
// in the reliability header (dstQpn / srcQpn) and come back with each delivery.
//
// Decoding never throws: anything malformed is `undefined`, which the transport counts as a
// dropped frame. The decoded segment's hdr and payload are views into the datagram (no copy);
// the engine stages the payload into device memory when it places it.
import { UdpEnvFlag, UdpEnvKind } from '../../wire/spec.js';
import { rd16, rd32, wr16, wr32 } from '../../wire/codec.js';
import * as W from '../../wire/fields.gen.js';
import { carriesData } from '../../wire/rdmap.js';
import type { Frame, SegFrame } from '../../core/frame.js';

// Offsets and bits as this module's own consts: V8 folds those into optimised code but loads an
// imported binding at every use (bench/wire-codec.bench.mjs).
const E_KIND = W.UDP_ENV_KIND_OFF;
const E_FLAGS = W.UDP_ENV_FLAGS_OFF;
const E_LEN = W.UDP_ENV_LEN_OFF;
const E_SSN = W.UDP_ENV_SSN_OFF;
const E_SIZE = W.UDP_ENV_SIZE;
const EPOCH_SHIFT = W.UDP_ENV_FLAGS_EPOCH_SHIFT;
/** An srd flow's epoch in udpEnv.flags (rc frames carry 0). */
const epochBits = (epoch: number | undefined): number => ((epoch ?? 0) << EPOCH_SHIFT) & W.UDP_ENV_FLAGS_EPOCH;
const S_MSG_LEN = W.UDP_ENV_SEG_MSG_LEN_OFF;
const S_OFF = W.UDP_ENV_SEG_OFF_OFF;
const S_ACK = W.UDP_ENV_SEG_ACK_OFF;
const S_SIZE = W.UDP_ENV_SEG_SIZE;
const DDP_CTRL = W.DDP_CTRL_DDP_OFF;
const RDMAP_CTRL = W.DDP_CTRL_RDMAP_OFF;
const DDP_T = W.DDP_CTRL_DDP_T;
const OPCODE = W.DDP_CTRL_RDMAP_OPCODE;
const TAGGED_LEN = W.TAGGED_SIZE;
const UNTAGGED_LEN = W.UNTAGGED_SIZE;
/** Bytes in front of the DDP segment of a seg frame. */
export const ENV_SEG_LEN = E_SIZE + S_SIZE;
export const ENV_CTL_LEN = E_SIZE;

/** Bytes the payload of `f` takes. */
export function frameLength(f: Frame): number {
  if (f.kind !== 'seg') return ENV_CTL_LEN;
  let n = ENV_SEG_LEN + f.hdr.length;
  for (const p of f.payload) n += p.length;
  return n;
}

/**
 * Write frame `f` at buf[off…]; returns the bytes written (frameLength(f)). The segment's data
 * views are copied in: the datagram must own its bytes, since the reliability layer may send it
 * again long after the engine moved on.
 */
export function encodeFrame(f: Frame, buf: Uint8Array, off: number): number {
  switch (f.kind) {
    case 'seg': {
      let p = off + encodeSegHead(f, buf, off);
      for (const v of f.payload) {
        buf.set(v, p);
        p += v.length;
      }
      return p - off;
    }
    case 'ack':
    case 'rnr':
    case 'hello':
      buf[off + E_KIND] = f.kind === 'ack' ? UdpEnvKind.Ack : f.kind === 'rnr' ? UdpEnvKind.Rnr : UdpEnvKind.Hello;
      buf[off + E_FLAGS] = f.kind === 'hello' ? (f.reply ? UdpEnvFlag.Reply : 0) : epochBits(f.epoch);
      wr16(buf, off + E_LEN, 0);
      wr32(buf, off + E_SSN, f.kind === 'hello' ? 0 : f.ssn);
      return ENV_CTL_LEN;
  }
}

/**
 * The envelope and DDP header of seg frame `f` at buf[off…], without its data; returns the
 * bytes written (ENV_SEG_LEN + hdr). The packer writes the data itself (copied or gathered).
 */
export function encodeSegHead(f: SegFrame, buf: Uint8Array, off: number): number {
  const env = f.env;
  buf[off + E_KIND] = UdpEnvKind.Seg;
  buf[off + E_FLAGS] = (env.ack !== undefined ? UdpEnvFlag.AckPresent : 0) | epochBits(env.epoch);
  wr16(buf, off + E_LEN, 0);
  wr32(buf, off + E_SSN, env.ssn);
  const s = off + E_SIZE;
  wr32(buf, s + S_MSG_LEN, env.msgLen);
  wr32(buf, s + S_OFF, env.off);
  wr32(buf, s + S_ACK, env.ack ?? 0);
  buf.set(f.hdr, s + S_SIZE);
  return ENV_SEG_LEN + f.hdr.length;
}

/** One frame as a fresh datagram payload. */
export function frameBytes(f: Frame): Uint8Array {
  const b = new Uint8Array(frameLength(f));
  encodeFrame(f, b, 0);
  return b;
}

/**
 * The frame in a delivered payload, or undefined when it is malformed. `dstQpn`/`srcQpn` come
 * from the reliability header. Never throws.
 */
export function decodeFrame(p: Uint8Array, dstQpn: number, srcQpn: number): Frame | undefined {
  if (!(p instanceof Uint8Array) || p.length < ENV_CTL_LEN || dstQpn === 0 || srcQpn === 0) return undefined;
  const kind = p[E_KIND]!;
  const flags = p[E_FLAGS]!;
  const ssn = rd32(p, E_SSN);
  switch (kind) {
    case UdpEnvKind.Seg: {
      // Envelope + at least the DDP control byte pair; the engine's decodeDdp judges the rest.
      if (p.length < ENV_SEG_LEN + 2) return undefined;
      const s = E_SIZE;
      const env: SegFrame['env'] = {
        srcQpn, dstQpn, ssn, msgLen: rd32(p, s + S_MSG_LEN), off: rd32(p, s + S_OFF), epoch: flags >> EPOCH_SHIFT,
      };
      if (flags & UdpEnvFlag.AckPresent) env.ack = rd32(p, s + S_ACK);
      // Data segments: the DDP header alone in hdr, the data as one payload view (what the
      // engine stages). Control segments carry their RDMAP payload inside hdr (ctlFrame's shape).
      const tagged = (p[ENV_SEG_LEN + DDP_CTRL]! & DDP_T) !== 0;
      const hlen = tagged ? TAGGED_LEN : UNTAGGED_LEN;
      const data = tagged || carriesData(p[ENV_SEG_LEN + RDMAP_CTRL]! & OPCODE);
      if (!data || p.length < ENV_SEG_LEN + hlen) return { kind: 'seg', env, hdr: p.subarray(ENV_SEG_LEN), payload: [] };
      const cut = ENV_SEG_LEN + hlen;
      return { kind: 'seg', env, hdr: p.subarray(ENV_SEG_LEN, cut), payload: cut < p.length ? [p.subarray(cut)] : [] };
    }
    case UdpEnvKind.Ack:
    case UdpEnvKind.Rnr:
      if (p.length !== ENV_CTL_LEN) return undefined;
      return { kind: kind === UdpEnvKind.Ack ? 'ack' : 'rnr', srcQpn, dstQpn, ssn, epoch: flags >> EPOCH_SHIFT };
    case UdpEnvKind.Hello:
      if (p.length !== ENV_CTL_LEN) return undefined;
      return { kind: 'hello', srcQpn, dstQpn, reply: (flags & UdpEnvFlag.Reply) !== 0 };
    default:
      return undefined;
  }
}

/**
 * Every frame of a (possibly packed) payload, appended to `out`; returns how many frames were
 * malformed (dropped). A bad `len` drops the rest of the payload. Never throws.
 */
export function decodeFrames(p: Uint8Array, dstQpn: number, srcQpn: number, out: Frame[]): number {
  let bad = 0;
  let at = 0;
  const n = p.length;
  while (at < n) {
    if (n - at < ENV_CTL_LEN) return bad + 1;
    const len = rd16(p, at + E_LEN);
    if (len !== 0 && (len < ENV_CTL_LEN || len > n - at)) return bad + 1;
    const end = len === 0 ? n : at + len;
    const f = decodeFrame(at === 0 && end === n ? p : p.subarray(at, end), dstQpn, srcQpn);
    if (f === undefined) bad++;
    else out.push(f);
    at = end;
  }
  return bad;
}
