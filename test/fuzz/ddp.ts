// Hostile DDP/RDMAP segments (RFC 5041 / RFC 5040 / RFC 7306 and sabre's opcodes 12–15), shared
// by the udp and tcp campaigns: structurally valid headers (the right length for the buffer
// model, DV/RV 1 most of the time) whose fields are chosen to hurt — STags guessed, learned from
// another protection domain, deregistered, or our own with offsets at and past the region's
// edges; MSNs and MOs at the edges of what the receiver expects; control payloads (Read Request,
// vectored Read Request, Atomic, Terminate, Immediate Data, sabre control) with counts and sizes
// that disagree with the bytes that follow. Each segment carries a class label, so a campaign
// can count what it sent by kind.
import type { Gen } from './rng.js';

export interface Region { stag: number; addr: number; length: number }

/** What the attacker knows when it builds a segment. */
export interface Targets {
  /** Regions granted to the attacker's own QP (same protection domain): valid keys. */
  own: Region[];
  /** STags (and an offset seen with them) learned by watching the real connection: another PD. */
  learned: { stag: number; to: number }[];
  /** STags of regions deregistered since they were granted. */
  dead: number[];
  /** Next MSN per QN the receiver expects from us, as far as we know (0..3). */
  msn: number[];
  /** Largest DDP payload per segment (the receiving side's MSS-ish). */
  maxData: number;
}

export interface HostileSegment {
  /** DDP header + RDMAP control payload + data. */
  bytes: Uint8Array;
  /** The header's length within bytes (14 tagged, 18 untagged, or the truncated length). */
  hdrLen: number;
  cls: string;
  opcode: number;
  tagged: boolean;
  last: boolean;
  /** Bytes after the header (control payload or data). */
  dataLen: number;
}

const OPS = {
  Write: 0, ReadReq: 1, ReadResp: 2, Send: 3, SendInv: 4, SendSe: 5, SendSeInv: 6, Terminate: 7,
  Imm: 8, ImmSe: 9, AtomicReq: 10, AtomicResp: 11, SendImm: 12, ReadReqV: 13, ReadComplete: 14, Control: 15,
} as const;
const TAGGED_OPS = new Set<number>([OPS.Write, OPS.ReadResp]);
const QN_OF: Record<number, number> = { 1: 1, 3: 0, 4: 0, 5: 0, 6: 0, 7: 2, 8: 0, 9: 0, 10: 1, 11: 3, 12: 0, 13: 1, 14: 0, 15: 0 };

const put32 = (b: Uint8Array, o: number, v: number): void => {
  b[o] = v >>> 24;
  b[o + 1] = v >>> 16;
  b[o + 2] = v >>> 8;
  b[o + 3] = v;
};
/** A 64-bit big-endian field from a JS number (exact below 2^53; above it the high word carries the excess). */
const put64 = (b: Uint8Array, o: number, v: number): void => {
  const hi = Math.floor(v / 0x1_0000_0000);
  put32(b, o, hi >>> 0);
  put32(b, o + 4, (v - hi * 0x1_0000_0000) >>> 0);
};

/** A key: valid own, learned (other PD), deregistered, guessed, or a near miss of a valid one. */
export function pickStag(g: Gen, t: Targets): { stag: number; kind: string; region?: Region; to?: number } {
  const k = g.int(10);
  if (k <= 3 && t.own.length) {
    const r = g.pick(t.own);
    return { stag: r.stag, kind: 'own', region: r };
  }
  if (k <= 5 && t.learned.length) {
    const l = g.pick(t.learned);
    return { stag: l.stag, kind: 'learned', to: l.to };
  }
  if (k === 6 && t.dead.length) return { stag: g.pick(t.dead), kind: 'dead' };
  if (k === 7 && t.own.length) {
    // The same index with another key byte, or the neighbouring index with the same key.
    const r = g.pick(t.own);
    const near = g.chance(0.5) ? ((r.stag & ~0xff) | ((r.stag + 1 + g.int(255)) & 0xff)) >>> 0 : (r.stag + 0x100 * g.pick([1, -1, 2])) >>> 0;
    return { stag: near, kind: 'near' };
  }
  if (k === 8) return { stag: g.pick([0, 0xffffffff, 1, 0x100]), kind: 'edge' };
  return { stag: g.u32(), kind: 'guess' };
}

/** An offset for `len` bytes: inside, straddling either edge, just past the end, or far away. */
export function pickTo(g: Gen, s: { region?: Region; to?: number }, len: number): number {
  const base = s.region?.addr ?? s.to ?? g.int(1 << 24);
  const size = s.region?.length ?? 65536;
  switch (g.int(9)) {
    case 0: return base;
    case 1: return base + Math.max(0, size - len);
    case 2: return base + size - len + 1;
    case 3: return base + size;
    case 4: return Math.max(0, base - 1);
    case 5: return g.pick([0, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, 2 ** 53 - len]);
    case 6: return base + g.int(Math.max(1, size));
    case 7: return base + size - 1;
    default: return g.int(2 ** 31) * 2 + g.int(2);
  }
}

function dataLen(g: Gen, max: number): number {
  return g.pick([0, 1, 7, 8, 64, g.int(max + 1), max, Math.min(max, 512)]);
}

/** One hostile segment. */
export function hostileSegment(g: Gen, t: Targets): HostileSegment {
  let opcode = g.chance(0.08) ? g.int(16) : g.pick([0, 0, 1, 3, 3, 8, 10, 12, 13, 14, 2, 11, 7, 4, 15, 5]);
  let tagged = TAGGED_OPS.has(opcode);
  let cls = `op${opcode}`;
  if (g.chance(0.04)) {
    tagged = !tagged;
    cls += '/t-flip';
  }
  const last = g.chance(0.75);
  const hdrLen = tagged ? 14 : 18;
  let body: Uint8Array;
  let stagKind = '';
  if (tagged) {
    const n = dataLen(g, t.maxData);
    body = g.bytes(n);
    const s = pickStag(g, t);
    stagKind = s.kind;
    const to = pickTo(g, s, n);
    const b = new Uint8Array(hdrLen + n);
    put32(b, 2, s.stag);
    put64(b, 6, to);
    b.set(body, hdrLen);
    body = b;
  } else {
    const payload = controlPayload(g, t, opcode);
    stagKind = payload.kind;
    const b = new Uint8Array(hdrLen + payload.bytes.length);
    const qn = g.chance(0.9) ? (QN_OF[opcode] ?? 0) : g.pick([0, 1, 2, 3, 4, 0xffffffff, g.u32()]);
    const expect = t.msn[qn] ?? 1;
    const msn = g.chance(0.6) ? expect : g.edge32(expect, 64);
    const mo = g.chance(0.7) ? 0 : g.pick([1, payload.bytes.length, 0xffffffff, t.maxData, g.u32()]);
    // ulp: the STag a Send-with-Invalidate names, the immediate of SendWithImm; else reserved.
    const ulp = opcode === OPS.SendInv || opcode === OPS.SendSeInv ? pickStag(g, t).stag : g.chance(0.8) ? 0 : g.u32();
    put32(b, 2, ulp);
    put32(b, 6, qn >>> 0);
    put32(b, 10, msn >>> 0);
    put32(b, 14, mo >>> 0);
    b.set(payload.bytes, hdrLen);
    body = b;
    cls += `/${payload.kind}`;
  }
  if (stagKind && tagged) cls += `/${stagKind}`;
  // DDP control: T, L, reserved bits, DV; RDMAP control: RV, reserved, opcode.
  let dv = 1;
  let rv = 1;
  if (g.chance(0.03)) {
    dv = g.pick([0, 2, 3]);
    cls += '/dv';
  }
  if (g.chance(0.03)) {
    rv = g.pick([0, 2, 3]);
    cls += '/rv';
  }
  const rsvd = g.chance(0.05) ? g.int(16) << 2 : 0;
  body[0] = (tagged ? 0x80 : 0) | (last ? 0x40 : 0) | rsvd | dv;
  body[1] = (rv << 6) | (g.chance(0.05) ? g.int(4) << 4 : 0) | (opcode & 0x0f);
  // Truncation: the header cut short (structurally broken on purpose, a small share).
  let bytes = body;
  if (g.chance(0.03)) {
    bytes = body.subarray(0, g.int(Math.min(body.length, hdrLen + 4)));
    cls += '/cut';
  }
  opcode &= 0x0f;
  return { bytes, hdrLen: Math.min(hdrLen, bytes.length), cls, opcode, tagged, last, dataLen: Math.max(0, bytes.length - hdrLen) };
}

/** The RDMAP payload after an untagged header: control structures with hostile counts, or message data. */
function controlPayload(g: Gen, t: Targets, opcode: number): { bytes: Uint8Array; kind: string } {
  switch (opcode) {
    case OPS.ReadReq: {
      const b = new Uint8Array(g.chance(0.9) ? 28 : g.pick([0, 4, 27, 29, 64]));
      const sink = pickStag(g, t);
      const src = pickStag(g, t);
      const size = g.pick([0, 1, 8, 4096, 65536, 1 << 20, 0xffffffff, src.region?.length ?? 100, (src.region?.length ?? 100) + 1, g.u32()]);
      if (b.length >= 28) {
        put32(b, 0, sink.stag);
        put64(b, 4, pickTo(g, sink, 0));
        put32(b, 12, size >>> 0);
        put32(b, 16, src.stag);
        put64(b, 20, pickTo(g, src, size));
      }
      return { bytes: b, kind: `rr-${src.kind}` };
    }
    case OPS.ReadReqV: {
      const nSrc = g.pick([0, 1, 2, 4, 64, 0xffff]);
      const nSink = g.pick([0, 1, 2, 3, 0xffff]);
      // Entries present: as announced, fewer, or more (bounded so a datagram still fits).
      const have = Math.min(g.pick([nSrc + nSink, Math.max(0, nSrc + nSink - 1), nSrc + nSink + 1, g.int(8)]), 64);
      const b = new Uint8Array(8 + 16 * have);
      b[0] = nSrc >>> 8;
      b[1] = nSrc & 0xff;
      b[2] = nSink >>> 8;
      b[3] = nSink & 0xff;
      let total = 0;
      for (let i = 0; i < have; i++) {
        const s = pickStag(g, t);
        const len = g.pick([0, 1, 64, 4096, 0xffffffff, s.region?.length ?? 1]);
        total += len;
        put32(b, 8 + 16 * i, s.stag);
        put64(b, 12 + 16 * i, pickTo(g, s, len));
        put32(b, 20 + 16 * i, len >>> 0);
      }
      put32(b, 4, g.chance(0.5) ? total >>> 0 : g.u32());
      return { bytes: b, kind: `rrv${nSrc}x${nSink}` };
    }
    case OPS.AtomicReq: {
      const b = new Uint8Array(g.chance(0.9) ? 52 : g.pick([0, 12, 51, 60]));
      const s = pickStag(g, t);
      if (b.length >= 52) {
        put32(b, 0, g.chance(0.8) ? g.pick([0, 2]) : g.u32());
        put32(b, 4, g.u32());
        put32(b, 8, s.stag);
        const to = pickTo(g, s, 8);
        put64(b, 12, g.chance(0.3) ? to + g.range(1, 7) : to);
        b.set(g.bytes(32), 20);
      }
      return { bytes: b, kind: `atomic-${s.kind}` };
    }
    case OPS.Terminate: {
      const b = new Uint8Array(4 + g.pick([0, 2 + 14, 2 + 18, 2 + 18 + 28, 3]));
      put32(b, 0, g.u32());
      b.set(g.bytes(b.length - 4), 4);
      return { bytes: b, kind: 'term' };
    }
    case OPS.Imm:
    case OPS.ImmSe:
    case OPS.ReadComplete: {
      const b = new Uint8Array(g.chance(0.9) ? 8 : g.pick([0, 4, 12]));
      if (b.length >= 8) {
        put32(b, 0, g.u32());
        put32(b, 4, g.pick([0, 1, 4096, 0xffffffff, g.u32()]));
      }
      return { bytes: b, kind: 'imm8' };
    }
    case OPS.AtomicResp: {
      const b = new Uint8Array(g.chance(0.9) ? 12 : g.pick([0, 8, 16]));
      b.set(g.bytes(b.length));
      return { bytes: b, kind: 'aresp' };
    }
    case OPS.Control: {
      const b = new Uint8Array(g.chance(0.9) ? 8 : g.pick([0, 4, 12]));
      if (b.length >= 8) {
        b[0] = g.int(5);
        put32(b, 4, g.edge32(t.msn[0] ?? 1, 64));
      }
      return { bytes: b, kind: 'ctl' };
    }
    default:
      return { bytes: g.bytes(dataLen(g, t.maxData)), kind: 'data' };
  }
}
