// Engine frames (src/core/frame.ts) in the payload of a UDP DATA datagram: the engine
// envelope (udpEnv, + udpEnvSeg for segments; layouts in src/wire/spec.ts, byte diagrams in
// docs/wire.md) followed by the DDP segment; several frames of one QP pair may share a payload,
// chained by udpEnv.len (./packer.ts builds such payloads, decodeFrames splits them). The QP numbers are not in the payload: they ride
// in the reliability header (dstQpn / srcQpn) and come back with each delivery.
//
// Decoding never throws: anything malformed is `undefined`, which the transport counts as a
// dropped frame. The decoded segment's hdr and payload are views into the datagram (no copy);
// the engine stages the payload into device memory when it places it.
import { DDP_T, TAGGED_HDR_LEN, UDP_ENV, UDP_ENV_SEG, UdpEnvFlag, UdpEnvKind, UNTAGGED_HDR_LEN } from '../../wire/spec.js';
import { rd32, wr32 } from '../../wire/codec.js';
import { carriesData } from '../../wire/rdmap.js';
import type { Frame, SegFrame } from '../../core/frame.js';

const E = UDP_ENV.fields;
const S = UDP_ENV_SEG.fields;
/** Bytes in front of the DDP segment of a seg frame. */
export const ENV_SEG_LEN = UDP_ENV.size + UDP_ENV_SEG.size;
export const ENV_CTL_LEN = UDP_ENV.size;

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
      const env = f.env;
      buf[off + E.kind.offset] = UdpEnvKind.Seg;
      buf[off + E.flags.offset] = env.ack !== undefined ? UdpEnvFlag.AckPresent : 0;
      buf[off + E.len.offset] = 0;
      buf[off + E.len.offset + 1] = 0;
      wr32(buf, off + E.ssn.offset, env.ssn);
      const s = off + UDP_ENV.size;
      wr32(buf, s + S.msgLen.offset, env.msgLen);
      wr32(buf, s + S.off.offset, env.off);
      wr32(buf, s + S.ack.offset, env.ack ?? 0);
      let p = s + UDP_ENV_SEG.size;
      buf.set(f.hdr, p);
      p += f.hdr.length;
      for (const v of f.payload) {
        buf.set(v, p);
        p += v.length;
      }
      return p - off;
    }
    case 'ack':
    case 'rnr':
    case 'hello':
      buf[off + E.kind.offset] = f.kind === 'ack' ? UdpEnvKind.Ack : f.kind === 'rnr' ? UdpEnvKind.Rnr : UdpEnvKind.Hello;
      buf[off + E.flags.offset] = f.kind === 'hello' && f.reply ? UdpEnvFlag.Reply : 0;
      buf[off + E.len.offset] = 0;
      buf[off + E.len.offset + 1] = 0;
      wr32(buf, off + E.ssn.offset, f.kind === 'hello' ? 0 : f.ssn);
      return ENV_CTL_LEN;
  }
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
  const kind = p[E.kind.offset]!;
  const flags = p[E.flags.offset]!;
  const ssn = rd32(p, E.ssn.offset);
  switch (kind) {
    case UdpEnvKind.Seg: {
      // Envelope + at least the DDP control byte pair; the engine's decodeDdp judges the rest.
      if (p.length < ENV_SEG_LEN + 2) return undefined;
      const s = UDP_ENV.size;
      const env: SegFrame['env'] = {
        srcQpn, dstQpn, ssn, msgLen: rd32(p, s + S.msgLen.offset), off: rd32(p, s + S.off.offset),
      };
      if (flags & UdpEnvFlag.AckPresent) env.ack = rd32(p, s + S.ack.offset);
      // Data segments: the DDP header alone in hdr, the data as one payload view (what the
      // engine stages). Control segments carry their RDMAP payload inside hdr (ctlFrame's shape).
      const tagged = (p[ENV_SEG_LEN]! & DDP_T) !== 0;
      const hlen = tagged ? TAGGED_HDR_LEN : UNTAGGED_HDR_LEN;
      const data = tagged || carriesData(p[ENV_SEG_LEN + 1]! & 0x0f);
      if (!data || p.length < ENV_SEG_LEN + hlen) return { kind: 'seg', env, hdr: p.subarray(ENV_SEG_LEN), payload: [] };
      const cut = ENV_SEG_LEN + hlen;
      return { kind: 'seg', env, hdr: p.subarray(ENV_SEG_LEN, cut), payload: cut < p.length ? [p.subarray(cut)] : [] };
    }
    case UdpEnvKind.Ack:
    case UdpEnvKind.Rnr:
      if (p.length !== ENV_CTL_LEN) return undefined;
      return { kind: kind === UdpEnvKind.Ack ? 'ack' : 'rnr', srcQpn, dstQpn, ssn };
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
    const len = (p[at + E.len.offset]! << 8) | p[at + E.len.offset + 1]!;
    if (len !== 0 && (len < ENV_CTL_LEN || len > n - at)) return bad + 1;
    const end = len === 0 ? n : at + len;
    const f = decodeFrame(at === 0 && end === n ? p : p.subarray(at, end), dstQpn, srcQpn);
    if (f === undefined) bad++;
    else out.push(f);
    at = end;
  }
  return bad;
}
