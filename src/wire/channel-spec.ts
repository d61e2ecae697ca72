// The wire of channels (M2, src/channel/): message channels over one rc QP pair: eager RDMA WRITE WITH
// IMMEDIATE into the receiver's pre-registered slots, control messages RDMA-written into a small
// per-channel mailbox, multi-phase enlargement of the receive slots (numbered epochs), shrink
// after idle, rendezvous (RDMA READ) above the largest eager size. All big-endian.
// docs/channels.md tells the state machine; docs/wire.md shows these byte by byte.
import { layout, type LayoutSpec } from './layout.js';

/**
 * 2: a HELLO's ctrlCredits / slotCredits are the credits granted at the start (an idle end holds
 * the rest back); a version-1 end would take the whole pool at once, so the two refuse each
 * other's HELLO at connect instead of failing at the first burst.
 */
export const CHAN_VERSION = 2;
/** Bytes of one mailbox slot (every control message but HELLO fits). */
export const CHAN_MBOX_SLOT = 32;
/** Bytes of the one receive buffer the peer's HELLO (a Send) lands in. */
export const CHAN_HELLO_BUF = 64;
/** Epochs are carried modulo this (5 bits of the immediate); at most two are live at a time. */
export const CHAN_EPOCH_MOD = 32;
/** Message sequence numbers are carried modulo this (16 bits); windows are at most half of it. */
export const CHAN_SEQ_MOD = 65536;
export const CHAN_MAX_WINDOW = 32768;
/** Slots of one phase: the immediate's Slot field is 8 bits. */
export const CHAN_MAX_SLOTS = 256;
/** The GRANT's head and tail flags: an answer is used only when both are present (the seed's framing). */
export const CHAN_GRANT_HEAD = 0xa5;
export const CHAN_GRANT_TAIL = 0x5a;

export const CHAN_IMM = layout({
  name: 'chanImm',
  title: 'Channel immediate data (the 32-bit imm of every RDMA WRITE WITH IMMEDIATE a channel posts)',
  size: 4,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    imm: {
      offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'carried in the Immediate Data message (RFC 7306) after the write; the receiver sees it as wc.imm',
      bits: {
        K: { mask: 0x80000000, meaning: '1: a control message in mailbox slot Slot (P, Epoch, V, Seq are 0); 0: a data message in eager slot Slot' },
        P: { mask: 0x40000000, meaning: 'data: the slot holds several messages, each a chanRecord header and its bytes, with seqs Seq, Seq+1, ... (V is 0)' },
        Epoch: { mask: 0x3e000000, meaning: 'data: the epoch (phase instance, mod 32) of the slots it was written for; anything but the live epoch is refused' },
        V: { mask: 0x01000000, meaning: 'data, P = 0: the payload is a msgpack-encoded value (0: raw bytes, delivered as a Uint8Array)' },
        Slot: { mask: 0x00ff0000, meaning: 'slot index written (must be the next one of its ring)' },
        Seq: { mask: 0x0000ffff, meaning: 'data: message sequence number mod 2^16 (the receiver delivers in Seq order)' },
      },
    },
  },
});

export const CHAN_RECORD = layout({
  name: 'chanRecord',
  title: 'Channel packed record (one message inside a slot written with P = 1)',
  size: 4,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    flags: {
      offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'flags',
      bits: {
        V: { mask: 0x01, meaning: 'the bytes are a msgpack-encoded value' },
        Rsvd: { mask: 0xfe, meaning: 'reserved, 0' },
      },
    },
    rsvd: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'reserved, 0' },
    len: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'bytes of the message that follow' },
  },
  tail: 'len bytes of the message, then the next record; the records fill the write exactly (byteLen)',
});

export const CHAN_DEDUP = layout({
  name: 'chanDedup',
  title: 'Channel dedup message (a data message with V = 1 whose first byte is 0xc1: the pipe of send(bytes, { dedup: true }))',
  size: 2,
  ref: 'sabre (M4 over M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    mark: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: '0xc1, the one byte MessagePack never uses: no value a channel encodes starts with it' },
    sub: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: '0 OPEN (sender → receiver: make the dedup receiver), 1 REFUSE (the receiver takes none), 2 to the receiver (OFFER, ROUND, ABORT follow), 3 to the sender (HELLO, NEED, GRANT, END follow)' },
  },
  tail: 'for sub 2 and 3: one dedup message (dedupMsg and its body)',
});

export const CHAN_HDR = layout({
  name: 'chanHdr',
  title: 'Channel control message header (every control message; credits ride here)',
  size: 8,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    type: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'message type (see the channel message table)' },
    flags: {
      offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'flags',
      bits: {
        V: { mask: 0x01, meaning: 'OFFER: the offered bytes are a msgpack-encoded value' },
        Deny: { mask: 0x02, meaning: 'GRANT: the enlargement is refused (no memory); the body is zero and the sender uses rendezvous' },
        Abort: { mask: 0x04, meaning: 'CLOSE: the sender failed the channel and is going away; the receiver fails at once instead of delivering up to `next`' },
        Rsvd: { mask: 0xf8, meaning: 'reserved, 0' },
      },
    },
    ctrlCredits: { offset: 2, size: 1, type: 'u8', ref: 'sabre', meaning: 'mailbox slots of the sender of this message freed since its last report (credits for control messages); in HELLO, the mailbox credits granted at the start (2..ctrlSlots; 0: all): the rest are returned once the peer first uses the mailbox' },
    epoch: { offset: 3, size: 1, type: 'u8', ref: 'sabre', meaning: 'the epoch slotCredits refer to (credits for another epoch are ignored)' },
    slotCredits: { offset: 4, size: 2, type: 'u16', ref: 'sabre', meaning: 'eager slots of that epoch freed since the last report (credits for data messages); in HELLO, the epoch-0 slot credits granted at the start (at most its slots; 0: all): the rest are returned after the first data message' },
    consumed: { offset: 6, size: 2, type: 'u16', ref: 'sabre', meaning: 'Seq (mod 2^16) of the next message the application will take: the window ends window messages past it' },
  },
  tail: 'the body of the type, then nothing (every type has an exact length)',
});

export const CHAN_HELLO = layout({
  name: 'chanHello',
  title: 'Channel HELLO body (type 1; the first message each side sends, as a Send, not a write)',
  size: 24,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    version: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'channel protocol version, 2 (1: before credits held back at the start)' },
    ctrlSlots: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'mailbox slots (4..64): control messages the peer may have unanswered by credits' },
    window: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'messages accepted past `consumed` (1..32768): the reorder and backpressure window' },
    maxEager: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'slot size of the largest phase: bigger messages go by rendezvous' },
    maxMessage: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'largest message accepted (rendezvous included)' },
    mboxRkey: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'rkey of the mailbox region' },
    mboxAddr: { offset: 16, size: 8, type: 'u64', ref: 'sabre', meaning: 'address of mailbox slot 0 (ctrlSlots slots of 32 bytes)' },
  },
  tail: 'a chanGrant for epoch 0 (the phase-0 eager slots)',
});

export const CHAN_GRANT = layout({
  name: 'chanGrant',
  title: 'Channel GRANT body (type 4; and inside HELLO): eager slots of a new epoch, framed by head/tail flags',
  size: 24,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    head: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'head flag 0xa5' },
    epoch: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'the new epoch (previous + 1, mod 32; 0 in HELLO)' },
    slots: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'number of slots (1..256)' },
    slotSize: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes per slot; slot i is at addr + i * slotSize' },
    addr: { offset: 8, size: 8, type: 'u64', ref: 'sabre', meaning: 'address of slot 0' },
    rkey: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'rkey of the slots\' region' },
    phase: { offset: 20, size: 1, type: 'u8', ref: 'sabre', meaning: 'index of the phase in the receiver\'s ladder (for stats)' },
    rsvd: { offset: 21, size: 2, type: 'u16', ref: 'sabre', meaning: 'reserved, 0' },
    tail: { offset: 23, size: 1, type: 'u8', ref: 'sabre', meaning: 'tail flag 0x5a' },
  },
});

export const CHAN_ENLARGE = layout({
  name: 'chanEnlarge',
  title: 'Channel ENLARGE body (type 3, sender → receiver): ask for bigger eager slots',
  size: 8,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    need: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'size of the largest waiting message (<= the receiver\'s maxEager)' },
    epoch: { offset: 4, size: 1, type: 'u8', ref: 'sabre', meaning: 'the epoch the sender writes in now' },
    rsvd: { offset: 5, size: 3, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0' },
  },
});

export const CHAN_SWITCH = layout({
  name: 'chanSwitch',
  title: 'Channel SWITCH body (type 5, sender → receiver): the fence after which the old epoch\'s slots are free',
  size: 8,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    epoch: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'the granted epoch the sender writes in from now on' },
    rsvd: { offset: 1, size: 3, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0' },
    count: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'data messages written in the previous epoch (all of them precede this message)' },
  },
});

export const CHAN_OFFER = layout({
  name: 'chanOffer',
  title: 'Channel OFFER body (type 6, sender → receiver): a rendezvous message to pull with one RDMA READ',
  size: 24,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    seq: { offset: 0, size: 2, type: 'u16', ref: 'sabre', meaning: 'message sequence number mod 2^16' },
    rsvd: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'reserved, 0' },
    length: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'message bytes (<= the receiver\'s maxMessage)' },
    rkey: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'rkey of the source region (RemoteRead, exactly the message)' },
    rsvd2: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'reserved, 0' },
    addr: { offset: 16, size: 8, type: 'u64', ref: 'sabre', meaning: 'address of the first byte' },
  },
});

export const CHAN_DONE = layout({
  name: 'chanDone',
  title: 'Channel DONE body (type 7, receiver → sender): the rendezvous message is placed; the source may go',
  size: 4,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    seq: { offset: 0, size: 2, type: 'u16', ref: 'sabre', meaning: 'Seq of the OFFER this completes' },
    rsvd: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'reserved, 0' },
  },
});

export const CHAN_CLOSE = layout({
  name: 'chanClose',
  title: 'Channel CLOSE body (type 8): no more messages; every one before `next` was placed',
  size: 4,
  ref: 'sabre (M2)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    next: { offset: 0, size: 2, type: 'u16', ref: 'sabre', meaning: 'Seq after the last message sent (mod 2^16)' },
    rsvd: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'reserved, 0' },
  },
});

export const ChanType = { Hello: 1, Credit: 2, Enlarge: 3, Grant: 4, Switch: 5, Offer: 6, Done: 7, Close: 8 } as const;
export const ChanFlag = { Value: 0x01, Deny: 0x02, Abort: 0x04 } as const;

export interface ChanTypeSpec {
  readonly code: number;
  readonly name: string;
  /** Layouts after chanHdr, in order. */
  readonly body: readonly LayoutSpec[];
  readonly dir: string;
  readonly meaning: string;
}

/** One row per channel control message: the codec's lengths and the docs' table come from here. */
export const CHAN_TYPES: readonly ChanTypeSpec[] = [
  { code: ChanType.Hello, name: 'HELLO', body: [CHAN_HELLO, CHAN_GRANT], dir: 'both, first', meaning: 'limits, mailbox and the epoch-0 slots; sent as a Send into the one posted receive with a buffer' },
  { code: ChanType.Credit, name: 'CREDIT', body: [], dir: 'both', meaning: 'header only: returns credits and the consumed position when nothing else is going' },
  { code: ChanType.Enlarge, name: 'ENLARGE', body: [CHAN_ENLARGE], dir: 'sender → receiver', meaning: 'a waiting message needs bigger slots' },
  { code: ChanType.Grant, name: 'GRANT', body: [CHAN_GRANT], dir: 'receiver → sender', meaning: 'slots of the next epoch (answer to ENLARGE, or unasked: shrink after idle); the old epoch stays live until SWITCH' },
  { code: ChanType.Switch, name: 'SWITCH', body: [CHAN_SWITCH], dir: 'sender → receiver', meaning: 'fence: the sender writes only in the new epoch from here; the receiver deregisters the old slots' },
  { code: ChanType.Offer, name: 'OFFER', body: [CHAN_OFFER], dir: 'sender → receiver', meaning: 'rendezvous: pull these bytes with one RDMA READ' },
  { code: ChanType.Done, name: 'DONE', body: [CHAN_DONE], dir: 'receiver → sender', meaning: 'rendezvous message placed; deregister its source' },
  { code: ChanType.Close, name: 'CLOSE', body: [CHAN_CLOSE], dir: 'both', meaning: 'graceful close: deliver up to `next`, then end; with the Abort flag the sender failed the channel and the receiver fails at once' },
];

/** The channel layouts in document order (the generator walks this). */
export const CHAN_LAYOUTS: readonly LayoutSpec[] = [
  CHAN_IMM, CHAN_RECORD, CHAN_DEDUP, CHAN_HDR, CHAN_HELLO, CHAN_GRANT, CHAN_ENLARGE, CHAN_SWITCH, CHAN_OFFER, CHAN_DONE, CHAN_CLOSE,
];
