// The channel's bytes: the immediate of every write it posts, and the control messages
// (chanHdr + a body of fixed length per type). Offsets, masks and lengths all come from the
// channel spec (src/wire/channel-spec.ts), through the accessors generated from it
// (src/wire/channel-fields.gen.ts); docs/wire.md shows them byte by byte.
//
// Decoders never throw and check structure only (exact length, known type, head/tail flags,
// addresses below 2^53); whether a field names something this side granted is the core's
// check, against its own state.
import { badWindow } from '../wire/codec.js';
import { CHAN_GRANT_HEAD, CHAN_GRANT_TAIL, CHAN_HDR, CHAN_MBOX_SLOT, CHAN_TYPES, ChanFlag, ChanType } from '../wire/channel-spec.js';
import * as W from '../wire/channel-fields.gen.js';

export { ChanFlag, ChanType };

/**
 * chanHdr flag on a CLOSE: the sender failed the channel and is going away (its QP next); the
 * receiver fails too, at once, instead of waiting on what will never come (chanHdr.flags Abort).
 */
export const CLOSE_ABORT = ChanFlag.Abort;

// chanImm's bits as this module's own consts (every write's immediate goes through them; V8
// folds a module's own consts, not imported ones).
/**
 * A decoded 64-bit address as a small integer where it is one: the accessor's arithmetic yields a
 * heap number even for a small value, and a channel keeps the peer's addresses in its fields
 * (each such number would be an object of its own per channel).
 */
const small = (x: number): number => (x >= 0 && x <= 0x3fff_ffff ? x | 0 : x);

const K = W.CHAN_IMM_IMM_K;
const P = W.CHAN_IMM_IMM_P;
const EPOCH = W.CHAN_IMM_IMM_EPOCH;
const V = W.CHAN_IMM_IMM_V;
const SLOT = W.CHAN_IMM_IMM_SLOT;
const SEQ = W.CHAN_IMM_IMM_SEQ;
const EPOCH_SHIFT = W.CHAN_IMM_IMM_EPOCH_SHIFT;
const SLOT_SHIFT = W.CHAN_IMM_IMM_SLOT_SHIFT;

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

const B = W.CHAN_HDR_SIZE;

function writeGrant(b: Uint8Array, o: number, g: Grant | undefined): void {
  W.setChanGrantHead(b, o, CHAN_GRANT_HEAD);
  W.setChanGrantTail(b, o, CHAN_GRANT_TAIL);
  if (!g) return;
  W.setChanGrantEpoch(b, o, g.epoch);
  W.setChanGrantSlots(b, o, g.slots);
  W.setChanGrantSlotSize(b, o, g.slotSize);
  W.setChanGrantAddr(b, o, g.addr);
  W.setChanGrantRkey(b, o, g.rkey);
  W.setChanGrantPhase(b, o, g.phase);
}

function grantFramed(b: Uint8Array, o: number): boolean {
  return W.getChanGrantHead(b, o) === CHAN_GRANT_HEAD && W.getChanGrantTail(b, o) === CHAN_GRANT_TAIL;
}

function readGrant(b: Uint8Array, o: number): Grant | string {
  if (!grantFramed(b, o)) return 'GRANT_FRAMING';
  const addr = small(W.getChanGrantAddr(b, o));
  if (addr < 0) return 'ADDR_RANGE';
  return {
    epoch: W.getChanGrantEpoch(b, o),
    slots: W.getChanGrantSlots(b, o),
    slotSize: W.getChanGrantSlotSize(b, o),
    addr,
    rkey: W.getChanGrantRkey(b, o),
    phase: W.getChanGrantPhase(b, o),
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
  W.setChanHdrType(b, 0, m.type);
  W.setChanHdrFlags(b, 0, flags);
  W.setChanHdrCtrlCredits(b, 0, h.ctrlCredits);
  W.setChanHdrEpoch(b, 0, h.epoch);
  W.setChanHdrSlotCredits(b, 0, h.slotCredits);
  W.setChanHdrConsumed(b, 0, h.consumed);
  switch (m.type) {
    case ChanType.Hello: {
      const x = m.hello;
      W.setChanHelloVersion(b, B, x.version);
      W.setChanHelloCtrlSlots(b, B, x.ctrlSlots);
      W.setChanHelloWindow(b, B, x.window);
      W.setChanHelloMaxEager(b, B, x.maxEager);
      W.setChanHelloMaxMessage(b, B, x.maxMessage);
      W.setChanHelloMboxRkey(b, B, x.mboxRkey);
      W.setChanHelloMboxAddr(b, B, x.mboxAddr);
      writeGrant(b, B + W.CHAN_HELLO_SIZE, m.grant);
      break;
    }
    case ChanType.Credit:
      break;
    case ChanType.Enlarge:
      W.setChanEnlargeNeed(b, B, m.need);
      W.setChanEnlargeEpoch(b, B, m.epoch);
      break;
    case ChanType.Grant:
      writeGrant(b, B, m.grant);
      break;
    case ChanType.Switch:
      W.setChanSwitchEpoch(b, B, m.epoch);
      W.setChanSwitchCount(b, B, m.count);
      break;
    case ChanType.Offer:
      W.setChanOfferSeq(b, B, m.seq);
      W.setChanOfferLength(b, B, m.length);
      W.setChanOfferRkey(b, B, m.rkey);
      W.setChanOfferAddr(b, B, m.addr);
      break;
    case ChanType.Done:
      W.setChanDoneSeq(b, B, m.seq);
      break;
    case ChanType.Close:
      W.setChanCloseNext(b, B, m.next);
      break;
  }
  return b;
}

export type CtrlResult = { ok: true; msg: CtrlMsg } | { ok: false; error: string };

/** Decode [off, end) of b. Errors are stable strings: SHORT, BAD_TYPE, BAD_LENGTH, GRANT_FRAMING, ADDR_RANGE. */
export function decodeCtrl(b: Uint8Array, off = 0, end = b.length): CtrlResult {
  if (badWindow(b, off, end) || end - off < B) return { ok: false, error: 'SHORT' };
  const type = W.getChanHdrType(b, off);
  const want = CTRL_LEN.get(type);
  if (want === undefined) return { ok: false, error: 'BAD_TYPE' };
  if (end - off !== want) return { ok: false, error: 'BAD_LENGTH' };
  const hdr: Hdr = {
    flags: W.getChanHdrFlags(b, off),
    ctrlCredits: W.getChanHdrCtrlCredits(b, off),
    epoch: W.getChanHdrEpoch(b, off),
    slotCredits: W.getChanHdrSlotCredits(b, off),
    consumed: W.getChanHdrConsumed(b, off),
  };
  const o = off + B;
  let body: Body;
  switch (type) {
    case ChanType.Hello: {
      const mboxAddr = small(W.getChanHelloMboxAddr(b, o));
      // The whole mailbox below 2^53, as a grant's slots: every control write names an address in it.
      if (mboxAddr < 0 || mboxAddr + W.getChanHelloCtrlSlots(b, o) * CHAN_MBOX_SLOT > Number.MAX_SAFE_INTEGER) return { ok: false, error: 'ADDR_RANGE' };
      const grant = readGrant(b, o + W.CHAN_HELLO_SIZE);
      if (typeof grant === 'string') return { ok: false, error: grant };
      body = {
        type,
        hello: {
          version: W.getChanHelloVersion(b, o),
          ctrlSlots: W.getChanHelloCtrlSlots(b, o),
          window: W.getChanHelloWindow(b, o),
          maxEager: W.getChanHelloMaxEager(b, o),
          maxMessage: W.getChanHelloMaxMessage(b, o),
          mboxRkey: W.getChanHelloMboxRkey(b, o),
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
      body = { type, need: W.getChanEnlargeNeed(b, o), epoch: W.getChanEnlargeEpoch(b, o) };
      break;
    case ChanType.Grant: {
      if (hdr.flags & ChanFlag.Deny) {
        if (!grantFramed(b, o)) return { ok: false, error: 'GRANT_FRAMING' };
        body = { type, grant: undefined };
        break;
      }
      const grant = readGrant(b, o);
      if (typeof grant === 'string') return { ok: false, error: grant };
      body = { type, grant };
      break;
    }
    case ChanType.Switch:
      body = { type, epoch: W.getChanSwitchEpoch(b, o), count: W.getChanSwitchCount(b, o) };
      break;
    case ChanType.Offer: {
      const addr = small(W.getChanOfferAddr(b, o));
      if (addr < 0) return { ok: false, error: 'ADDR_RANGE' };
      body = {
        type, seq: W.getChanOfferSeq(b, o), length: W.getChanOfferLength(b, o), rkey: W.getChanOfferRkey(b, o), addr,
        value: (hdr.flags & ChanFlag.Value) !== 0,
      };
      break;
    }
    case ChanType.Done:
      body = { type, seq: W.getChanDoneSeq(b, o) };
      break;
    case ChanType.Close:
      body = { type, next: W.getChanCloseNext(b, o), ...((hdr.flags & CLOSE_ABORT) !== 0 ? { abort: true } : {}) };
      break;
    default:
      return { ok: false, error: 'BAD_TYPE' };
  }
  return { ok: true, msg: { ...body, hdr } };
}

// ---- packed records ---------------------------------------------------------------------

export const RECORD_HDR = W.CHAN_RECORD_SIZE;
export const RECORD_MAX = 0xffff;
const RECORD_V = W.CHAN_RECORD_FLAGS_V;

/** Several messages as one slot's bytes (each at most RECORD_MAX bytes). */
export function packRecords(msgs: readonly { bytes: Uint8Array; value: boolean }[]): Uint8Array {
  let n = 0;
  for (const m of msgs) n += RECORD_HDR + m.bytes.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const m of msgs) {
    W.setChanRecordFlags(out, o, m.value ? RECORD_V : 0);
    W.setChanRecordLen(out, o, m.bytes.length);
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
    const len = W.getChanRecordLen(b, o);
    if (b.length - o - RECORD_HDR < len) return 'RECORD_TRUNCATED';
    out.push({ bytes: b.subarray(o + RECORD_HDR, o + RECORD_HDR + len), value: (W.getChanRecordFlags(b, o) & RECORD_V) !== 0 });
    o += RECORD_HDR + len;
  }
  if (out.length === 0) return 'RECORD_EMPTY';
  return out;
}
