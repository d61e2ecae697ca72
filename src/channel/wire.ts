// The channel's bytes: the immediate of every write it posts, and the control messages
// (chanHdr + a body of fixed length per type). Offsets, masks and lengths all come from the
// channel spec (src/wire/channel-spec.ts); docs/wire.md shows them byte by byte.
//
// Decoders never throw and check structure only (exact length, known type, head/tail flags,
// addresses below 2^53); whether a field names something this side granted is the core's
// check, against its own state.
import { badWindow, rd16, rd32, rdSafe64, wr16, wr32, wrSafe64 } from '../wire/codec.js';
import {
  CHAN_CLOSE, CHAN_DONE, CHAN_RECORD, CHAN_ENLARGE, CHAN_GRANT, CHAN_GRANT_HEAD, CHAN_GRANT_TAIL, CHAN_HDR, CHAN_HELLO, CHAN_IMM,
  CHAN_OFFER, CHAN_SWITCH, CHAN_TYPES, ChanFlag, ChanType,
} from '../wire/channel-spec.js';

export { ChanFlag, ChanType };

/**
 * chanHdr flag on a CLOSE: the sender failed the channel and is going away (its QP next); the
 * receiver fails too, at once, instead of waiting on what will never come (chanHdr.flags Abort).
 */
export const CLOSE_ABORT = ChanFlag.Abort;

const IMM = CHAN_IMM.fields.imm.bits!;
const K = IMM.K.mask >>> 0;
const P = IMM.P.mask >>> 0;
const EPOCH = IMM.Epoch.mask >>> 0;
const V = IMM.V.mask >>> 0;
const SLOT = IMM.Slot.mask >>> 0;
const SEQ = IMM.Seq.mask >>> 0;
const shiftOf = (mask: number): number => 31 - Math.clz32(mask & -mask);
const EPOCH_SHIFT = shiftOf(EPOCH);
const SLOT_SHIFT = shiftOf(SLOT);

export interface ImmFields {
  ctrl: boolean;
  packed: boolean;
  epoch: number;
  value: boolean;
  slot: number;
  seq: number;
}

export function dataImm(epoch: number, value: boolean, slot: number, seq: number, packed = false): number {
  return ((packed ? P : 0) | ((epoch << EPOCH_SHIFT) & EPOCH) | (value ? V : 0) | ((slot << SLOT_SHIFT) & SLOT) | (seq & SEQ)) >>> 0;
}

export function ctrlImm(slot: number): number {
  return (K | ((slot << SLOT_SHIFT) & SLOT)) >>> 0;
}

export function parseImm(imm: number): ImmFields {
  return {
    ctrl: (imm & K) !== 0,
    packed: (imm & P) !== 0,
    epoch: (imm & EPOCH) >>> EPOCH_SHIFT,
    value: (imm & V) !== 0,
    slot: (imm & SLOT) >>> SLOT_SHIFT,
    seq: imm & SEQ,
  };
}

// ---- control messages ---------------------------------------------------------------------

export interface Hdr {
  flags: number;
  ctrlCredits: number;
  epoch: number;
  slotCredits: number;
  consumed: number;
}

export interface Grant {
  epoch: number;
  slots: number;
  slotSize: number;
  addr: number;
  rkey: number;
  phase: number;
}

export interface Hello {
  version: number;
  ctrlSlots: number;
  window: number;
  maxEager: number;
  maxMessage: number;
  mboxRkey: number;
  mboxAddr: number;
}

export type Body =
  | { type: typeof ChanType.Hello; hello: Hello; grant: Grant }
  | { type: typeof ChanType.Credit }
  | { type: typeof ChanType.Enlarge; need: number; epoch: number }
  /** grant is undefined when the GRANT carries Deny. */
  | { type: typeof ChanType.Grant; grant: Grant | undefined }
  | { type: typeof ChanType.Switch; epoch: number; count: number }
  | { type: typeof ChanType.Offer; seq: number; length: number; rkey: number; addr: number; value: boolean }
  | { type: typeof ChanType.Done; seq: number }
  | { type: typeof ChanType.Close; next: number; abort?: boolean };

export type CtrlMsg = Body & { hdr: Hdr };

/** Exact encoded length of each type (header included), from the one table in spec.ts. */
export const CTRL_LEN: ReadonlyMap<number, number> = new Map(
  CHAN_TYPES.map((t) => [t.code, CHAN_HDR.size + t.body.reduce((n, l) => n + l.size, 0)]),
);
export const MAX_CTRL_LEN = Math.max(...CTRL_LEN.values());

const H = CHAN_HDR.fields;
const HE = CHAN_HELLO.fields;
const G = CHAN_GRANT.fields;
const EN = CHAN_ENLARGE.fields;
const SW = CHAN_SWITCH.fields;
const OF = CHAN_OFFER.fields;
const DN = CHAN_DONE.fields;
const CL = CHAN_CLOSE.fields;
const B = CHAN_HDR.size;

function writeGrant(b: Uint8Array, o: number, g: Grant | undefined): void {
  b[o + G.head.offset] = CHAN_GRANT_HEAD;
  b[o + G.tail.offset] = CHAN_GRANT_TAIL;
  if (!g) return;
  b[o + G.epoch.offset] = g.epoch;
  wr16(b, o + G.slots.offset, g.slots);
  wr32(b, o + G.slotSize.offset, g.slotSize);
  wrSafe64(b, o + G.addr.offset, g.addr);
  wr32(b, o + G.rkey.offset, g.rkey);
  b[o + G.phase.offset] = g.phase;
}

function readGrant(b: Uint8Array, o: number): Grant | string {
  if (b[o + G.head.offset] !== CHAN_GRANT_HEAD || b[o + G.tail.offset] !== CHAN_GRANT_TAIL) return 'GRANT_FRAMING';
  const addr = rdSafe64(b, o + G.addr.offset);
  if (addr < 0) return 'ADDR_RANGE';
  return {
    epoch: b[o + G.epoch.offset]!,
    slots: rd16(b, o + G.slots.offset),
    slotSize: rd32(b, o + G.slotSize.offset),
    addr,
    rkey: rd32(b, o + G.rkey.offset),
    phase: b[o + G.phase.offset]!,
  };
}

/** The encoded message (a fresh array of its exact length). */
export function encodeCtrl(m: CtrlMsg): Uint8Array {
  const len = CTRL_LEN.get(m.type)!;
  const b = new Uint8Array(len);
  const h = m.hdr;
  let flags = h.flags & ~(ChanFlag.Value | ChanFlag.Deny);
  if (m.type === ChanType.Offer && m.value) flags |= ChanFlag.Value;
  if (m.type === ChanType.Grant && !m.grant) flags |= ChanFlag.Deny;
  if (m.type === ChanType.Close && m.abort) flags |= CLOSE_ABORT;
  b[H.type.offset] = m.type;
  b[H.flags.offset] = flags;
  b[H.ctrlCredits.offset] = h.ctrlCredits;
  b[H.epoch.offset] = h.epoch;
  wr16(b, H.slotCredits.offset, h.slotCredits);
  wr16(b, H.consumed.offset, h.consumed);
  switch (m.type) {
    case ChanType.Hello: {
      const x = m.hello;
      b[B + HE.version.offset] = x.version;
      b[B + HE.ctrlSlots.offset] = x.ctrlSlots;
      wr16(b, B + HE.window.offset, x.window);
      wr32(b, B + HE.maxEager.offset, x.maxEager);
      wr32(b, B + HE.maxMessage.offset, x.maxMessage);
      wr32(b, B + HE.mboxRkey.offset, x.mboxRkey);
      wrSafe64(b, B + HE.mboxAddr.offset, x.mboxAddr);
      writeGrant(b, B + CHAN_HELLO.size, m.grant);
      break;
    }
    case ChanType.Credit:
      break;
    case ChanType.Enlarge:
      wr32(b, B + EN.need.offset, m.need);
      b[B + EN.epoch.offset] = m.epoch;
      break;
    case ChanType.Grant:
      writeGrant(b, B, m.grant);
      break;
    case ChanType.Switch:
      b[B + SW.epoch.offset] = m.epoch;
      wr32(b, B + SW.count.offset, m.count);
      break;
    case ChanType.Offer:
      wr16(b, B + OF.seq.offset, m.seq);
      wr32(b, B + OF.length.offset, m.length);
      wr32(b, B + OF.rkey.offset, m.rkey);
      wrSafe64(b, B + OF.addr.offset, m.addr);
      break;
    case ChanType.Done:
      wr16(b, B + DN.seq.offset, m.seq);
      break;
    case ChanType.Close:
      wr16(b, B + CL.next.offset, m.next);
      break;
  }
  return b;
}

export type CtrlResult = { ok: true; msg: CtrlMsg } | { ok: false; error: string };

/** Decode [off, end) of b. Errors are stable strings: SHORT, BAD_TYPE, BAD_LENGTH, GRANT_FRAMING, ADDR_RANGE. */
export function decodeCtrl(b: Uint8Array, off = 0, end = b.length): CtrlResult {
  if (badWindow(b, off, end) || end - off < B) return { ok: false, error: 'SHORT' };
  const type = b[off + H.type.offset]!;
  const want = CTRL_LEN.get(type);
  if (want === undefined) return { ok: false, error: 'BAD_TYPE' };
  if (end - off !== want) return { ok: false, error: 'BAD_LENGTH' };
  const hdr: Hdr = {
    flags: b[off + H.flags.offset]!,
    ctrlCredits: b[off + H.ctrlCredits.offset]!,
    epoch: b[off + H.epoch.offset]!,
    slotCredits: rd16(b, off + H.slotCredits.offset),
    consumed: rd16(b, off + H.consumed.offset),
  };
  const o = off + B;
  let body: Body;
  switch (type) {
    case ChanType.Hello: {
      const mboxAddr = rdSafe64(b, o + HE.mboxAddr.offset);
      if (mboxAddr < 0) return { ok: false, error: 'ADDR_RANGE' };
      const grant = readGrant(b, o + CHAN_HELLO.size);
      if (typeof grant === 'string') return { ok: false, error: grant };
      body = {
        type,
        hello: {
          version: b[o + HE.version.offset]!,
          ctrlSlots: b[o + HE.ctrlSlots.offset]!,
          window: rd16(b, o + HE.window.offset),
          maxEager: rd32(b, o + HE.maxEager.offset),
          maxMessage: rd32(b, o + HE.maxMessage.offset),
          mboxRkey: rd32(b, o + HE.mboxRkey.offset),
          mboxAddr,
        },
        grant,
      };
      break;
    }
    case ChanType.Credit:
      body = { type };
      break;
    case ChanType.Enlarge:
      body = { type, need: rd32(b, o + EN.need.offset), epoch: b[o + EN.epoch.offset]! };
      break;
    case ChanType.Grant: {
      if (hdr.flags & ChanFlag.Deny) {
        if (b[o + G.head.offset] !== CHAN_GRANT_HEAD || b[o + G.tail.offset] !== CHAN_GRANT_TAIL) return { ok: false, error: 'GRANT_FRAMING' };
        body = { type, grant: undefined };
        break;
      }
      const grant = readGrant(b, o);
      if (typeof grant === 'string') return { ok: false, error: grant };
      body = { type, grant };
      break;
    }
    case ChanType.Switch:
      body = { type, epoch: b[o + SW.epoch.offset]!, count: rd32(b, o + SW.count.offset) };
      break;
    case ChanType.Offer: {
      const addr = rdSafe64(b, o + OF.addr.offset);
      if (addr < 0) return { ok: false, error: 'ADDR_RANGE' };
      body = {
        type, seq: rd16(b, o + OF.seq.offset), length: rd32(b, o + OF.length.offset), rkey: rd32(b, o + OF.rkey.offset), addr,
        value: (hdr.flags & ChanFlag.Value) !== 0,
      };
      break;
    }
    case ChanType.Done:
      body = { type, seq: rd16(b, o + DN.seq.offset) };
      break;
    case ChanType.Close:
      body = { type, next: rd16(b, o + CL.next.offset), ...((hdr.flags & CLOSE_ABORT) !== 0 ? { abort: true } : {}) };
      break;
    default:
      return { ok: false, error: 'BAD_TYPE' };
  }
  return { ok: true, msg: { ...body, hdr } };
}

// ---- packed records ---------------------------------------------------------------------

const R = CHAN_RECORD.fields;
export const RECORD_HDR = CHAN_RECORD.size;
export const RECORD_MAX = 0xffff;
const RECORD_V = R.flags.bits!.V.mask;

/** Several messages as one slot's bytes (each at most RECORD_MAX bytes). */
export function packRecords(msgs: readonly { bytes: Uint8Array; value: boolean }[]): Uint8Array {
  let n = 0;
  for (const m of msgs) n += RECORD_HDR + m.bytes.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const m of msgs) {
    out[o + R.flags.offset] = m.value ? RECORD_V : 0;
    wr16(out, o + R.len.offset, m.bytes.length);
    out.set(m.bytes, o + RECORD_HDR);
    o += RECORD_HDR + m.bytes.length;
  }
  return out;
}

/** The records of a packed slot (views into `b`), or an error when they do not fill it exactly. */
export function unpackRecords(b: Uint8Array): { bytes: Uint8Array; value: boolean }[] | string {
  const out: { bytes: Uint8Array; value: boolean }[] = [];
  let o = 0;
  while (o < b.length) {
    if (b.length - o < RECORD_HDR) return 'RECORD_TRUNCATED';
    const len = rd16(b, o + R.len.offset);
    if (b.length - o - RECORD_HDR < len) return 'RECORD_TRUNCATED';
    out.push({ bytes: b.subarray(o + RECORD_HDR, o + RECORD_HDR + len), value: (b[o + R.flags.offset]! & RECORD_V) !== 0 });
    o += RECORD_HDR + len;
  }
  if (out.length === 0) return 'RECORD_EMPTY';
  return out;
}
