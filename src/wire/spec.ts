// The single source of truth for every byte sabre puts on a wire.
//
// Layouts are data: the TypeScript codecs read their offsets from here, scripts/gen-wire.mjs
// turns the same data into AssemblyScript constants/readers (assembly/wire.gen.ts) and into
// the byte diagrams of docs/wire.md. Change a number here, run `npm run gen`, and every
// consumer follows; test/wire/gen-staleness.test.ts fails if a generated file was not
// regenerated.
//
// Sources (checked, not remembered):
// - DDP/RDMAP control bits, header structs, terminate codes, MPA flags and MPA v2 IRD/ORD
//   bits: Linux siw, drivers/infiniband/sw/siw/iwarp.h; the Wireshark iWARP dissector
//   (epan/dissectors/packet-iwarp-ddp-rdmap.c), which also decodes the RFC 7306 atomics.
// - MPA CRC byte order: siw_crc_final() = cpu_to_le32(~crc) written raw into the trailer.
// - RFC 5040 (RDMAP), RFC 5041 (DDP), RFC 5044 (MPA), RFC 6581 (MPA v2), RFC 7306 (atomics,
//   immediate data).

export type FieldType = 'u8' | 'u16' | 'u32' | 'u64' | 'bytes';

export interface BitSpec {
  /** Mask within the containing field (already positioned, e.g. 0x80 for the top bit of a u8). */
  readonly mask: number;
  readonly meaning: string;
}

export interface FieldSpec {
  readonly offset: number;
  readonly size: number;
  readonly type: FieldType;
  readonly meaning: string;
  readonly ref: string;
  /** Sub-fields packed in this field, by name. */
  readonly bits?: Readonly<Record<string, BitSpec>>;
}

export interface LayoutSpec<F extends string = string> {
  readonly name: string;
  readonly title: string;
  /** Fixed size in bytes (variable tails are described in `tail`). */
  readonly size: number;
  readonly ref: string;
  readonly byteOrder: 'big-endian' | 'little-endian';
  readonly fields: Readonly<Record<F, FieldSpec>>;
  /** What may follow the fixed part. */
  readonly tail?: string;
  readonly sabre?: boolean;
}

function layout<F extends string>(l: LayoutSpec<F>): LayoutSpec<F> {
  // Catch a wrong offset at import time rather than as a silently shifted field on the wire.
  let end = 0;
  const sorted = Object.entries<FieldSpec>(l.fields).sort((a, b) => a[1].offset - b[1].offset);
  for (const [name, f] of sorted) {
    if (f.offset < end) throw new Error(`wire spec ${l.name}.${name} overlaps the previous field`);
    const width = { u8: 1, u16: 2, u32: 4, u64: 8, bytes: f.size }[f.type];
    if (width !== f.size) throw new Error(`wire spec ${l.name}.${name}: size ${f.size} does not fit ${f.type}`);
    end = f.offset + f.size;
  }
  if (end !== l.size) throw new Error(`wire spec ${l.name}: fields end at ${end}, size says ${l.size}`);
  return l;
}

// ---------------------------------------------------------------------------------------------
// Versions and constants

export const DDP_VERSION = 1; // RFC 5041 §5.1 DV = 01b (siw DDP_VERSION 1)
export const RDMAP_VERSION = 1; // RFC 5040 §4.2 RV = 01b (siw RDMAP_VERSION 1)
/** TOs beyond this do not survive a JS number; sabre TOs are addresses in a wasm32 memory anyway. */
export const MAX_SAFE_TO = 2 ** 53;

// ---------------------------------------------------------------------------------------------
// DDP / RDMAP

/** The first two bytes of every DDP segment: DDP control, then the RDMAP control (DDP's RsvdULP[0:7]). */
export const DDP_CTRL = layout({
  name: 'ddpCtrl',
  title: 'DDP control + RDMAP control (first 2 bytes of every DDP segment)',
  size: 2,
  ref: 'RFC 5041 §5.1, RFC 5040 §4.2',
  byteOrder: 'big-endian',
  fields: {
    ddp: {
      offset: 0, size: 1, type: 'u8', ref: 'RFC 5041 §5.1', meaning: 'DDP control',
      bits: {
        T: { mask: 0x80, meaning: 'Tagged flag: 1 = tagged buffer model (STag/TO), 0 = untagged (QN/MSN/MO)' },
        L: { mask: 0x40, meaning: 'Last flag: last segment of the DDP message' },
        Rsvd: { mask: 0x3c, meaning: 'reserved, 0 on send, ignored on receive' },
        DV: { mask: 0x03, meaning: 'DDP version, 1' },
      },
    },
    rdmap: {
      offset: 1, size: 1, type: 'u8', ref: 'RFC 5040 §4.2', meaning: 'RDMAP control',
      bits: {
        RV: { mask: 0xc0, meaning: 'RDMAP version, 1' },
        Rsvd: { mask: 0x30, meaning: 'reserved, 0 on send, ignored on receive' },
        Opcode: { mask: 0x0f, meaning: 'RDMAP opcode (see the opcode table)' },
      },
    },
  },
});

export const DDP_T = DDP_CTRL.fields.ddp.bits!.T.mask;
export const DDP_L = DDP_CTRL.fields.ddp.bits!.L.mask;
export const DDP_DV_MASK = DDP_CTRL.fields.ddp.bits!.DV.mask;
export const RDMAP_RV_MASK = DDP_CTRL.fields.rdmap.bits!.RV.mask;
export const RDMAP_RV_SHIFT = 6;
export const RDMAP_OPCODE_MASK = DDP_CTRL.fields.rdmap.bits!.Opcode.mask;

export const TAGGED = layout({
  name: 'tagged',
  title: 'DDP tagged buffer model header (RDMA Write, Read Response)',
  size: 14,
  ref: 'RFC 5041 §5.2, RFC 5040 §4.3',
  byteOrder: 'big-endian',
  fields: {
    ddpCtrl: { offset: 0, size: 1, type: 'u8', ref: 'RFC 5041 §5.1', meaning: 'DDP control: T=1, L, DV=1' },
    rdmapCtrl: { offset: 1, size: 1, type: 'u8', ref: 'RFC 5040 §4.2', meaning: 'RDMAP control: RV=1, opcode' },
    stag: { offset: 2, size: 4, type: 'u32', ref: 'RFC 5041 §5.2', meaning: 'Data Sink STag' },
    to: { offset: 6, size: 8, type: 'u64', ref: 'RFC 5041 §5.2', meaning: 'Data Sink Tagged Offset (sabre: absolute address; < 2^53)' },
  },
  tail: 'payload: the DDP segment\'s ULP data, placed at TO',
});

export const UNTAGGED = layout({
  name: 'untagged',
  title: 'DDP untagged buffer model header (Send*, Read Request, Terminate, atomics, immediate data)',
  size: 18,
  ref: 'RFC 5041 §5.3, RFC 5040 §4.3',
  byteOrder: 'big-endian',
  fields: {
    ddpCtrl: { offset: 0, size: 1, type: 'u8', ref: 'RFC 5041 §5.1', meaning: 'DDP control: T=0, L, DV=1' },
    rdmapCtrl: { offset: 1, size: 1, type: 'u8', ref: 'RFC 5040 §4.2', meaning: 'RDMAP control: RV=1, opcode' },
    ulp: {
      offset: 2, size: 4, type: 'u32', ref: 'RFC 5040 §4.3',
      meaning: 'RsvdULP[8:39]: Invalidate STag for Send*Inv; the immediate for sabre SendWithImm; else 0',
    },
    qn: { offset: 6, size: 4, type: 'u32', ref: 'RFC 5041 §5.3', meaning: 'Queue Number' },
    msn: { offset: 10, size: 4, type: 'u32', ref: 'RFC 5041 §5.3', meaning: 'Message Sequence Number (per QN, starts at 1)' },
    mo: { offset: 14, size: 4, type: 'u32', ref: 'RFC 5041 §5.3', meaning: 'Message Offset of this segment within the message' },
  },
  tail: 'payload: the DDP segment\'s ULP data (for RDMAP control messages, the RDMAP payload below)',
});

export const TAGGED_HDR_LEN = TAGGED.size;
export const UNTAGGED_HDR_LEN = UNTAGGED.size;

export interface OpcodeSpec {
  readonly code: number;
  readonly name: string;
  readonly tagged: boolean;
  /** DDP queue number for untagged messages; -1 for tagged. */
  readonly qn: number;
  readonly ref: string;
  readonly payload: string;
  /**
   * The segment's payload is message data (placed at STag/TO, or into a posted receive for the
   * Send family); otherwise it is an RDMAP control body that travels with the header.
   */
  readonly data: boolean;
  readonly sabre?: boolean;
}

/**
 * RDMAP DDP untagged queue numbers, from the IANA "RDMAP DDP Untagged Queue Numbers" registry
 * (created by RFC 7306): 0 Send variants, 1 RDMA Read Request operations, 2 Terminate (RFC 5040),
 * 3 Atomic Response operations (RFC 7306). No queue is registered for Atomic Requests: they
 * share QN 1 with Read Requests (both are inbound requests bounded by IRD/ORD).
 */
export const QN = {
  Send: 0,
  ReadRequest: 1,
  Terminate: 2,
  AtomicRequest: 1,
  AtomicResponse: 3,
} as const;

export const OPCODES: readonly OpcodeSpec[] = [
  { code: 0, name: 'RdmaWrite', tagged: true, qn: -1, ref: 'RFC 5040 §4.3', payload: 'data placed at STag/TO', data: true },
  { code: 1, name: 'ReadRequest', tagged: false, qn: QN.ReadRequest, ref: 'RFC 5040 §4.4', payload: 'readRequest (28 B)', data: false },
  { code: 2, name: 'ReadResponse', tagged: true, qn: -1, ref: 'RFC 5040 §4.3', payload: 'data placed at the sink STag/TO', data: true },
  { code: 3, name: 'Send', tagged: false, qn: QN.Send, ref: 'RFC 5040 §4.3', payload: 'message data', data: true },
  { code: 4, name: 'SendInv', tagged: false, qn: QN.Send, ref: 'RFC 5040 §4.3', payload: 'message data; ulp = STag to invalidate', data: true },
  { code: 5, name: 'SendSe', tagged: false, qn: QN.Send, ref: 'RFC 5040 §4.3', payload: 'message data, solicited event', data: true },
  { code: 6, name: 'SendSeInv', tagged: false, qn: QN.Send, ref: 'RFC 5040 §4.3', payload: 'message data, solicited event; ulp = STag to invalidate', data: true },
  { code: 7, name: 'Terminate', tagged: false, qn: QN.Terminate, ref: 'RFC 5040 §4.8', payload: 'terminate (4 B + copied headers)', data: false },
  { code: 8, name: 'ImmediateData', tagged: false, qn: QN.Send, ref: 'RFC 7306 §6', payload: 'immediateData (8 B)', data: false },
  { code: 9, name: 'ImmediateDataSe', tagged: false, qn: QN.Send, ref: 'RFC 7306 §6', payload: 'immediateData (8 B), solicited event', data: false },
  { code: 10, name: 'AtomicRequest', tagged: false, qn: QN.AtomicRequest, ref: 'RFC 7306 §5.2', payload: 'atomicRequest (52 B)', data: false },
  { code: 11, name: 'AtomicResponse', tagged: false, qn: QN.AtomicResponse, ref: 'RFC 7306 §5.3', payload: 'atomicResponse (12 B)', data: false },
  { code: 12, name: 'SendWithImm', tagged: false, qn: QN.Send, ref: 'sabre', payload: 'message data; ulp = 32-bit immediate', data: true, sabre: true },
  { code: 13, name: 'ReadRequestV', tagged: false, qn: QN.ReadRequest, ref: 'sabre (M1)', payload: 'readRequestV (8 B + 16 B per entry)', data: false, sabre: true },
  { code: 14, name: 'ReadComplete', tagged: false, qn: QN.Send, ref: 'sabre (M1)', payload: 'readComplete (8 B)', data: false, sabre: true },
  {
    code: 15, name: 'SabreControl', tagged: false, qn: QN.Send, ref: 'sabre (TCP)',
    payload: 'sabreControl (8 B): engine ack / RNR / sequence marker; MSN 0, consumes no receive; TCP between sabre peers only', data: false, sabre: true,
  },
];

/**
 * IANA "RDMAP Message Operation Codes": 0xC-0xE are unassigned and 0xF is reserved
 * (experimental). sabre's three extensions take 0xC-0xE; a future RFC could claim them,
 * and a conformant iWARP peer answers them with Terminate (RDMAP, Remote Operation,
 * Unexpected OpCode) — so they are only sent to sabre peers.
 */
export const FIRST_SABRE_OPCODE = 12;

/**
 * Every 4-bit opcode is now assigned: 15 (IANA: reserved, experimental) is sabre's TCP control
 * message, accepted only untagged, and only ever sent to a peer whose MPA private data carried
 * sabre's block (src/transport/tcp/private-data.ts).
 */
export const OPCODE_COUNT = OPCODES.length;

export const READ_REQUEST = layout({
  name: 'readRequest',
  title: 'RDMA Read Request payload (after an untagged header, QN 1)',
  size: 28,
  ref: 'RFC 5040 §4.4',
  byteOrder: 'big-endian',
  fields: {
    sinkStag: { offset: 0, size: 4, type: 'u32', ref: 'RFC 5040 §4.4', meaning: 'Data Sink STag (requester\'s buffer)' },
    sinkTo: { offset: 4, size: 8, type: 'u64', ref: 'RFC 5040 §4.4', meaning: 'Data Sink Tagged Offset' },
    size: { offset: 12, size: 4, type: 'u32', ref: 'RFC 5040 §4.4', meaning: 'RDMA Read Message Size in bytes' },
    srcStag: { offset: 16, size: 4, type: 'u32', ref: 'RFC 5040 §4.4', meaning: 'Data Source STag (responder\'s buffer)' },
    srcTo: { offset: 20, size: 8, type: 'u64', ref: 'RFC 5040 §4.4', meaning: 'Data Source Tagged Offset' },
  },
});

export const TERMINATE = layout({
  name: 'terminate',
  title: 'Terminate payload (after an untagged header, QN 2)',
  size: 4,
  ref: 'RFC 5040 §4.8',
  byteOrder: 'big-endian',
  fields: {
    control: {
      offset: 0, size: 4, type: 'u32', ref: 'RFC 5040 §4.8', meaning: 'Terminate Control',
      bits: {
        Layer: { mask: 0xf0000000, meaning: 'layer that detected the error: 0 RDMAP, 1 DDP, 2 LLP (MPA)' },
        EType: { mask: 0x0f000000, meaning: 'error type (per layer, see tables)' },
        ECode: { mask: 0x00ff0000, meaning: 'error code (per layer and type, see tables)' },
        M: { mask: 0x00008000, meaning: 'Hdrct M: DDP Segment Length field valid' },
        D: { mask: 0x00004000, meaning: 'Hdrct D: terminated DDP header included' },
        R: { mask: 0x00002000, meaning: 'Hdrct R: terminated RDMAP header (28 B) included' },
        Rsvd: { mask: 0x00001fff, meaning: 'reserved, 0' },
      },
    },
  },
  tail: 'if D: u16 DDP Segment Length (the terminated FPDU\'s ULPDU length) then its DDP header (14 B tagged / 18 B untagged); if R: the terminated RDMAP header (28 B, e.g. a Read Request payload)',
});

export const TERM_LAYER_SHIFT = 28;
export const TERM_ETYPE_SHIFT = 24;
export const TERM_ECODE_SHIFT = 16;
export const TERM_M = TERMINATE.fields.control.bits!.M.mask;
export const TERM_D = TERMINATE.fields.control.bits!.D.mask;
export const TERM_R = TERMINATE.fields.control.bits!.R.mask;
/** RFC 5040 §4.8: length of a copied RDMAP header (the Read Request is the only one longer than the DDP header). */
export const TERM_RDMAP_HDR_LEN = 28;
export const TERM_SEGLEN_LEN = 2;

export const TermLayer = { Rdmap: 0, Ddp: 1, Llp: 2 } as const;

/** Terminate error tables, RFC 5040 §4.8 / RFC 5041 §7.2 / RFC 5044 §8, RFC 6581 §9 (values as in siw iwarp.h). */
export const TERM_TABLES = {
  rdmap: {
    etype: { Catastrophic: 0x0, RemoteProtection: 0x1, RemoteOperation: 0x2 },
    ecode: {
      InvalidStag: 0x00, BaseBounds: 0x01, AccessRights: 0x02, StagNotAssociated: 0x03, ToWrap: 0x04,
      Version: 0x05, Opcode: 0x06, CatastrophicStream: 0x07, CatastrophicGlobal: 0x08,
      CannotInvalidate: 0x09, Unspecified: 0xff,
    },
  },
  ddp: {
    etype: { Catastrophic: 0x0, TaggedBuffer: 0x1, UntaggedBuffer: 0x2, Rsvd: 0x3 },
    taggedEcode: { InvalidStag: 0x00, BaseBounds: 0x01, StagNotAssociated: 0x02, ToWrap: 0x03, Version: 0x04 },
    untaggedEcode: { InvalidQn: 0x01, InvalidMsnNoBuffer: 0x02, InvalidMsnRange: 0x03, InvalidMo: 0x04, MessageTooLong: 0x05, Version: 0x06 },
  },
  llp: {
    etype: { Mpa: 0x0 },
    ecode: {
      TcpStreamLost: 0x01, ReceivedCrc: 0x02, FpduStart: 0x03, InvalidReqResp: 0x04,
      LocalCatastrophic: 0x05, InsufficientIrd: 0x06, NoMatchingRtr: 0x07,
    },
  },
} as const;

export const IMMEDIATE_DATA = layout({
  name: 'immediateData',
  title: 'Immediate Data payload (opcodes 8/9, QN 0)',
  size: 8,
  ref: 'RFC 7306 §6 (8 bytes of immediate data); sabre assigns the two words',
  byteOrder: 'big-endian',
  fields: {
    imm: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: '32-bit immediate (verbs imm_data)' },
    len: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes of the RDMA Write this completes (RdmaWriteWithImm byteLen)' },
  },
});

export const ATOMIC_REQUEST = layout({
  name: 'atomicRequest',
  title: 'Atomic Request payload (opcode 10, QN 1)',
  size: 52,
  ref: 'RFC 7306 §5.2',
  byteOrder: 'big-endian',
  fields: {
    opcode: {
      offset: 0, size: 4, type: 'u32', ref: 'RFC 7306 §5.2', meaning: 'Reserved (28 bits) | Atomic Operation code (4 bits)',
      bits: { Rsvd: { mask: 0xfffffff0, meaning: 'reserved, 0' }, AtomicOp: { mask: 0x0000000f, meaning: '0 FetchAdd, 2 CmpSwap' } },
    },
    reqId: { offset: 4, size: 4, type: 'u32', ref: 'RFC 7306 §5.2', meaning: 'Request Identifier, echoed by the response' },
    stag: { offset: 8, size: 4, type: 'u32', ref: 'RFC 7306 §5.2', meaning: 'Remote STag' },
    to: { offset: 12, size: 8, type: 'u64', ref: 'RFC 7306 §5.2', meaning: 'Remote Tagged Offset (8-byte aligned target)' },
    addOrSwap: { offset: 20, size: 8, type: 'u64', ref: 'RFC 7306 §5.2', meaning: 'Add Data (FetchAdd) / Swap Data (CmpSwap)' },
    addOrSwapMask: { offset: 28, size: 8, type: 'u64', ref: 'RFC 7306 §5.2', meaning: 'Add Mask (FetchAdd) / Swap Mask (CmpSwap), as RFC 7306 defines them' },
    compare: { offset: 36, size: 8, type: 'u64', ref: 'RFC 7306 §5.2', meaning: 'Compare Data (CmpSwap; 0 for FetchAdd)' },
    compareMask: { offset: 44, size: 8, type: 'u64', ref: 'RFC 7306 §5.2', meaning: 'Compare Mask (CmpSwap), as RFC 7306 defines it' },
  },
});

/** IANA "RDMAP Message Atomic Operation Subcodes" (RFC 7306): 0 FetchAdd, 1 reserved, 2 CmpSwap. */
export const AtomicOp = { FetchAdd: 0, CmpSwap: 2 } as const;
export const ATOMIC_OP_MASK = ATOMIC_REQUEST.fields.opcode.bits!.AtomicOp.mask;

export const ATOMIC_RESPONSE = layout({
  name: 'atomicResponse',
  title: 'Atomic Response payload (opcode 11, QN 3)',
  size: 12,
  ref: 'RFC 7306 §5.3',
  byteOrder: 'big-endian',
  fields: {
    reqId: { offset: 0, size: 4, type: 'u32', ref: 'RFC 7306 §5.3', meaning: 'Original Request Identifier' },
    value: { offset: 4, size: 8, type: 'u64', ref: 'RFC 7306 §5.3', meaning: 'Original Remote Data Value (before the operation)' },
  },
});

export const READ_REQUEST_V = layout({
  name: 'readRequestV',
  title: 'sabre vectored Read Request payload (opcode 13, QN 1) — mechanism M1',
  size: 8,
  ref: 'sabre (M1)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    nSrc: { offset: 0, size: 2, type: 'u16', ref: 'sabre', meaning: 'number of source entries (responder memory), >= 1' },
    nSink: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'number of sink entries (requester memory), >= 1' },
    totalLen: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'total bytes = sum of source lengths = sum of sink lengths' },
  },
  tail: 'nSrc source entries, then nSink sink entries, each a 16-byte readVEntry',
});

export const READ_V_ENTRY = layout({
  name: 'readVEntry',
  title: 'sabre vectored Read Request entry',
  size: 16,
  ref: 'sabre (M1)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    stag: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'STag' },
    to: { offset: 4, size: 8, type: 'u64', ref: 'sabre', meaning: 'Tagged Offset (< 2^53)' },
    len: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'length in bytes' },
  },
});

/** Caps the decoder enforces so a hostile count cannot make it allocate or loop without bound. */
export const READ_V_MAX_ENTRIES = 1024;

export const READ_COMPLETE = layout({
  name: 'readComplete',
  title: 'sabre Read Complete payload (opcode 14, QN 0) — mechanism M1',
  size: 8,
  ref: 'sabre (M1)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    imm: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'MSN of the Read Request (QN 1) this completes' },
    len: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes written into the sinks' },
  },
});

/**
 * sabre's engine control on a TCP stream (opcode 15, untagged, QN 0, MSN 0, MO 0, L set). The
 * engine's ack and RNR frames travel on UDP/inproc in the envelope; a byte-exact iWARP stream
 * has no envelope, so between two sabre peers they ride as this RDMAP message. It consumes no
 * receive and is not counted as a message by the receiver's sequence numbering.
 */
export const SABRE_CONTROL = layout({
  name: 'sabreControl',
  title: 'sabre control payload (opcode 15, QN 0, MSN 0) — TCP between sabre peers',
  size: 8,
  ref: 'sabre (TCP)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: '1 ACK: messages with sequence <= ssn are complete here; 2 RNR: message ssn found no posted receive; 3 SEQ: the next message has sequence ssn (a resend after RNR)' },
    rsvd: { offset: 1, size: 3, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0' },
    ssn: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'message sequence number of the sending direction the kind refers to' },
  },
});

export const SabreControlKind = { Ack: 1, Rnr: 2, Seq: 3 } as const;

// ---------------------------------------------------------------------------------------------
// MPA (TCP)

export const MPA_KEY_REQ = 'MPA ID Req Frame';
export const MPA_KEY_REP = 'MPA ID Rep Frame';
export const MPA_REVISION_1 = 1;
export const MPA_REVISION_2 = 2;
/** RFC 5044 §7.1: Private Data Length MUST NOT exceed 512. */
export const MPA_MAX_PRIVATE_DATA = 512;

export const MPA_REQ_REP = layout({
  name: 'mpaReqRep',
  title: 'MPA Request / Reply frame (connection setup, before any FPDU)',
  size: 20,
  ref: 'RFC 5044 §7.1, RFC 6581 §5',
  byteOrder: 'big-endian',
  fields: {
    key: { offset: 0, size: 16, type: 'bytes', ref: 'RFC 5044 §7.1', meaning: '"MPA ID Req Frame" or "MPA ID Rep Frame" (ASCII, no NUL)' },
    bits: {
      offset: 16, size: 2, type: 'u16', ref: 'RFC 5044 §7.1', meaning: 'flags and revision',
      bits: {
        M: { mask: 0x8000, meaning: 'Markers: sender wants markers in the stream it receives' },
        C: { mask: 0x4000, meaning: 'CRC: sender wants CRC32C in FPDUs (the reply\'s C decides)' },
        R: { mask: 0x2000, meaning: 'Reject (reply only)' },
        H: { mask: 0x1000, meaning: 'Enhanced connection setup (rev 2): private data starts with IRD/ORD (siw MPA_RR_FLAG_ENHANCED)' },
        Res: { mask: 0x0f00, meaning: 'reserved, 0' },
        Rev: { mask: 0x00ff, meaning: 'MPA revision: 1 (RFC 5044) or 2 (RFC 6581)' },
      },
    },
    pdLen: { offset: 18, size: 2, type: 'u16', ref: 'RFC 5044 §7.1', meaning: 'Private Data Length, <= 512' },
  },
  tail: 'pdLen bytes of private data (rev 2 + H: starts with mpaV2Private)',
});

export const MPA_M = MPA_REQ_REP.fields.bits.bits!.M.mask;
export const MPA_C = MPA_REQ_REP.fields.bits.bits!.C.mask;
export const MPA_R = MPA_REQ_REP.fields.bits.bits!.R.mask;
export const MPA_H = MPA_REQ_REP.fields.bits.bits!.H.mask;
export const MPA_REV_MASK = MPA_REQ_REP.fields.bits.bits!.Rev.mask;

export const MPA_V2_PRIVATE = layout({
  name: 'mpaV2Private',
  title: 'MPA revision 2 private data prefix: IRD / ORD and RTR control',
  size: 4,
  ref: 'RFC 6581 §5 (bit values as in siw iwarp.h enum mpa_v2_ctrl)',
  byteOrder: 'big-endian',
  fields: {
    ird: {
      offset: 0, size: 2, type: 'u16', ref: 'RFC 6581 §5', meaning: 'inbound RDMA read depth',
      bits: {
        P2P: { mask: 0x8000, meaning: 'peer-to-peer mode: initiator will send a ready-to-receive (RTR) message' },
        ZeroLenSendRtr: { mask: 0x4000, meaning: 'RTR may be a zero-length Send' },
        Ird: { mask: 0x3fff, meaning: 'IRD value' },
      },
    },
    ord: {
      offset: 2, size: 2, type: 'u16', ref: 'RFC 6581 §5', meaning: 'outbound RDMA read depth',
      bits: {
        WriteRtr: { mask: 0x8000, meaning: 'RTR may be a zero-length RDMA Write' },
        ReadRtr: { mask: 0x4000, meaning: 'RTR may be a zero-length RDMA Read' },
        Ord: { mask: 0x3fff, meaning: 'ORD value' },
      },
    },
  },
  tail: 'the ULP\'s own private data',
});

export const MPA_V2_IRD_ORD_MASK = 0x3fff;

export const MPA_FPDU = layout({
  name: 'mpaFpdu',
  title: 'MPA FPDU (framed PDU carrying one DDP segment)',
  size: 2,
  ref: 'RFC 5044 §4.1',
  byteOrder: 'big-endian',
  fields: {
    ulpduLen: { offset: 0, size: 2, type: 'u16', ref: 'RFC 5044 §4.1', meaning: 'ULPDU Length: bytes of the DDP segment that follows (not counting pad, CRC, markers)' },
  },
  tail: 'ULPDU (the DDP segment), then 0-3 zero pad bytes so that 2 + ULPDU + pad is a multiple of 4, then CRC32C (4 bytes) over length field + ULPDU + pad, markers inside the FPDU included. CRC byte order: the CRC32C value least-significant byte first (siw: cpu_to_le32(~crc), as iSCSI); all zero when CRC was not negotiated',
});

export const MPA_HDR_LEN = MPA_FPDU.size;
export const MPA_CRC_LEN = 4;
/** Byte order of the CRC32C trailer on the wire (see MPA_FPDU.tail). */
export const MPA_CRC_LITTLE_ENDIAN = true;
/** RFC 5044 §4.3: a marker sits every 512 octets of the TCP stream (counted from the first FPDU octet). */
export const MPA_MARKER_INTERVAL = 512;

export const MPA_MARKER = layout({
  name: 'mpaMarker',
  title: 'MPA marker (every 512 octets of the TCP stream, when negotiated)',
  size: 4,
  ref: 'RFC 5044 §4.3',
  byteOrder: 'big-endian',
  fields: {
    rsvd: { offset: 0, size: 2, type: 'u16', ref: 'RFC 5044 §4.3', meaning: 'reserved, 0' },
    fpduPtr: { offset: 2, size: 2, type: 'u16', ref: 'RFC 5044 §4.3', meaning: 'FPDUPTR: octets back from the marker to the ULPDU Length field of the FPDU it sits in' },
  },
});

// ---------------------------------------------------------------------------------------------
// UDP transport (sabre's own, mechanism M5)

/**
 * 2: COOKIE datagrams, the cookie and token blocks (address validation before any state is
 * kept, reset tokens). A version-1 peer would misread the new blocks, so the byte changes.
 */
export const UDP_VERSION = 2;
export const UdpType = { Data: 1, Ack: 2, Reset: 3, Cookie: 4 } as const;
export const UdpFlag = { Sack: 0x01, AckReq: 0x02, Retx: 0x04, Cookie: 0x08, Token: 0x10, Integ: 0x20 } as const;
/**
 * Integrity of a datagram (docs/integrity.md): the trailer kind in flags bits 6-7, and the wish
 * in a udpInteg block. 0 is CRC32C, what every datagram carried before the field existed.
 */
export const UdpIntegrity = { Crc32c: 0, Xxh3: 1, None: 2 } as const;
/** Trailer bytes per UdpIntegrity code: CRC32C 4, XXH3-64 8, none 0. */
export const UDP_TRAILER_LENS: readonly number[] = [4, 8, 0];
export const UDP_TRAILER_MAX = 8;
export const UDP_TRAILER_SHIFT = 6;
export const UDP_TRAILER_MASK = 0xc0;
export const UDP_MAX_SACK = 8;
export const UDP_CRC_LEN = 4;
/** Same convention as the MPA trailer, so one CRC32C writer serves both transports. */
export const UDP_CRC_LITTLE_ENDIAN = true;

export const UDP_HDR = layout({
  name: 'udpHdr',
  title: 'sabre UDP reliability header (M5), in front of each DDP segment',
  size: 36,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    verType: {
      offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'version and datagram type',
      bits: {
        Ver: { mask: 0xf0, meaning: 'version, 2' },
        Type: {
          mask: 0x0f,
          meaning: '1 DATA (a DDP segment follows), 2 ACK (no segment), 3 RESET (the sender lost the context named in srcCtx; carries udpToken), 4 COOKIE (address validation challenge; carries udpCookie, no segment)',
        },
      },
    },
    flags: {
      offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'flags',
      bits: {
        Sack: { mask: 0x01, meaning: 'SACK blocks follow the fixed header (after udpCookie / udpToken)' },
        AckReq: { mask: 0x02, meaning: 'sender asks for an immediate ACK; on an ACK it is a keepalive probe of an idle peer, answered (only inside an established context) with one ACK' },
        Retx: { mask: 0x04, meaning: 'this DATA is a retransmission (excluded from RTT samples)' },
        Cookie: { mask: 0x08, meaning: 'a udpCookie block follows the fixed header' },
        Token: { mask: 0x10, meaning: 'a udpToken block follows (after udpCookie, if any)' },
        Integ: { mask: 0x20, meaning: 'a udpInteg block follows (after udpToken, if any): the sender\'s integrity wish, carried by handshake datagrams' },
        Trailer: { mask: 0xc0, meaning: 'trailer kind: 0 CRC32C (4 bytes, LSB first), 1 XXH3-64 (8 bytes, LSB first), 2 none (no trailer), 3 reserved (dropped); must be CRC32C in COOKIE, RESET and datagrams with dstCtx 0, else the mode the context settled' },
      },
    },
    window: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'receive window: datagrams the sender of this header accepts beyond ackPsn (credits); COOKIE/RESET: 0' },
    srcCtx: {
      offset: 4, size: 4, type: 'u32', ref: 'sabre',
      meaning: 'sender\'s transport-context id (random nonzero, new after every restart); RESET: the id of the context the sender lost (echo of the dstCtx that found nothing); COOKIE: nonzero, no context (the sender keeps no state)',
    },
    dstCtx: {
      offset: 8, size: 4, type: 'u32', ref: 'sabre',
      meaning: 'receiver\'s transport-context id as last learned; 0 until learned (first contact: then udpCookie must be present); RESET/COOKIE: echo of the srcCtx of the datagram that triggered them',
    },
    psn: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'packet sequence number of this DATA (serial arithmetic mod 2^32); ACK: next PSN to be sent; COOKIE/RESET: 0' },
    ackPsn: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'cumulative ACK: every PSN before this one has been received' },
    tsVal: { offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'sender timestamp, microseconds, wrapping' },
    tsEcr: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'echo of the tsVal of the datagram that triggered this ACK / COOKIE' },
    dstQpn: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'destination QP number (datagrams carry no stream to name the QP)' },
    srcQpn: { offset: 32, size: 4, type: 'u32', ref: 'sabre', meaning: 'source QP number' },
  },
  tail: 'if flags.Cookie: udpCookie; if flags.Token: udpToken; if flags.Integ: udpInteg; if flags.Sack: udpSack + count udpSackBlock; then (DATA) the DDP segment; then the trailer flags.Trailer names, over everything before it: CRC32C (4 bytes, LSB first), XXH3-64 seed 0 (8 bytes, LSB first) or nothing',
});

/**
 * Address validation (as QUIC's Retry token / SCTP's state cookie): the receiver of a first
 * contact answers with a COOKIE carrying this block and keeps no state; the initiator repeats
 * the block in every datagram it sends with dstCtx 0 until the receiver answers from a context.
 */
export const UDP_COOKIE = layout({
  name: 'udpCookie',
  title: 'sabre UDP cookie block (address validation)',
  size: 12,
  ref: 'sabre (M5); RFC 9000 §8.1, RFC 9260 §5.1.3',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    time: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'issuer\'s clock when minted, milliseconds, wrapping; 0 with an all-zero mac: "no cookie yet" (a first contact carries the zero block so that the COOKIE answering it is never longer than it)' },
    mac: { offset: 4, size: 8, type: 'bytes', ref: 'sabre', meaning: 'first 8 bytes of HMAC-SHA256(issuer secret, "cookie", time, initiator srcCtx, initiator address and port)' },
  },
});

/**
 * The reset token of the sender's context (as QUIC's stateless reset token): HMAC of the
 * sender's device secret and its context id, so a device that lost the context recomputes it.
 */
export const UDP_TOKEN = layout({
  name: 'udpToken',
  title: 'sabre UDP reset token block',
  size: 8,
  ref: 'sabre (M5); RFC 9000 §10.3',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    token: { offset: 0, size: 8, type: 'bytes', ref: 'sabre', meaning: 'first 8 bytes of HMAC-SHA256(sender secret, "reset", srcCtx): carried by the handshake datagrams (until the peer has it) and by RESET' },
  },
});

/**
 * The sender's integrity wish (docs/integrity.md), in the datagrams that carry the handshake:
 * the initiator's first contact and cookie echo, the responder's datagrams until the initiator
 * names its context. Each side settles on the stronger of its own wish and the peer's (order
 * none < crc32c < xxh3); a peer whose handshake carries no block is taken to want crc32c only.
 */
export const UDP_INTEG = layout({
  name: 'udpInteg',
  title: 'sabre UDP integrity wish block',
  size: 4,
  ref: 'sabre (M5); docs/integrity.md',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    wish: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'integrity the sender asks for: 0 CRC32C, 1 XXH3-64, 2 none; other values are refused (the datagram is dropped)' },
    rsvd: { offset: 1, size: 3, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0' },
  },
});

export const UDP_SACK = layout({
  name: 'udpSack',
  title: 'sabre UDP SACK block list header',
  size: 4,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    count: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'number of blocks, 1..8' },
    rsvd: { offset: 1, size: 3, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0 (keeps blocks 4-byte aligned)' },
  },
  tail: 'count udpSackBlock',
});

export const UDP_SACK_BLOCK = layout({
  name: 'udpSackBlock',
  title: 'sabre UDP SACK block',
  size: 8,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    start: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'first PSN received in this range (after ackPsn)' },
    end: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'one past the last PSN received in this range' },
  },
});


/**
 * The engine envelope inside a UDP DATA datagram (between the reliability header / SACK list
 * and the DDP segment). The engine orders and completes messages by it (src/core/frame.ts);
 * the QP numbers already ride in the reliability header (dstQpn / srcQpn), so they are not
 * repeated. ack / rnr / hello frames are the 8-byte udpEnv alone; a seg frame adds udpEnvSeg and
 * then its DDP segment.
 */
export const UdpEnvKind = { Seg: 1, Ack: 2, Rnr: 3, Hello: 4 } as const;
export const UdpEnvFlag = { Reply: 0x01, AckPresent: 0x02 } as const;
/** For docs/wire.md. */
export const UDP_ENV_KINDS = Object.entries(UdpEnvKind).map(([k, v]) => `${v} ${k.toLowerCase()}`).join(', ');

export const UDP_ENV = layout({
  name: 'udpEnv',
  title: 'sabre engine envelope in a UDP DATA payload (every frame)',
  size: 8,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'frame kind: 1 seg (udpEnvSeg + DDP segment follow), 2 ack, 3 rnr, 4 hello' },
    flags: {
      offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'flags',
      bits: {
        Reply: { mask: 0x01, meaning: 'hello: this is the answer to a hello' },
        AckPresent: { mask: 0x02, meaning: 'seg: udpEnvSeg.ack carries a piggy-backed cumulative ack' },
        Rsvd: { mask: 0xfc, meaning: 'reserved, 0 on send, ignored on receive' },
      },
    },
    len: {
      offset: 2, size: 2, type: 'u16', ref: 'sabre',
      meaning: 'bytes of this frame, udpEnv included, when another frame follows it in the same DATA payload (frame packing); 0: this frame runs to the end of the payload',
    },
    ssn: {
      offset: 4, size: 4, type: 'u32', ref: 'sabre',
      meaning: 'seg: message sequence number of this QP direction (1, 2, …; requests and responses alike); ack: every message <= ssn completed; rnr: the message that found no receive; hello: 0',
    },
  },
  tail: 'seg: udpEnvSeg, then the DDP segment (header + payload) up to the end of the frame; other kinds: nothing. Then, if len != 0, the next frame\'s udpEnv',
});

export const UDP_ENV_SEG = layout({
  name: 'udpEnvSeg',
  title: 'sabre engine envelope, seg frames (follows udpEnv)',
  size: 12,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    msgLen: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'payload bytes of the whole RDMAP message this segment belongs to' },
    off: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'this segment\'s payload offset within the message' },
    ack: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'piggy-backed cumulative ack when flags.AckPresent, else 0' },
  },
  tail: 'the DDP segment: tagged (14 B) or untagged (18 B) header, then its payload',
});

export const UDP_VER_SHIFT = 4;
export const UDP_TYPE_MASK = UDP_HDR.fields.verType.bits!.Type.mask;

// ---------------------------------------------------------------------------------------------
// Data-plane records (host order = little-endian; in device memory, not on a wire). The WASM
// kernels read them through the accessors generated into assembly/wire.gen.ts; TypeScript
// writes them through these offsets (src/dataplane/descriptors.ts, region-table.ts): one
// definition for both sides of the boundary.

export const REGION_ENTRY = layout({
  name: 'regionEntry',
  title: 'Region table entry (device memory; entry index = STag >>> 8)',
  size: 32,
  ref: 'sabre data plane (M3)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    base: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'first address of the region (device memory; for EXTERNAL regions an address of sabre\'s own)' },
    length: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes in the region' },
    stag: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'index << 8 | key byte; 0 = free or invalidated (written first and published last, atomically)' },
    pd: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'protection domain handle (nonzero)' },
    access: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'Access bits granted (LocalWrite 1, RemoteWrite 2, RemoteRead 4, RemoteAtomic 8)' },
    flags: {
      offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'flags',
      bits: {
        External: { mask: 0x00000001, meaning: 'memory outside the device: place() reports INDIRECT, TypeScript copies' },
        Rsvd: { mask: 0xfffffffe, meaning: 'reserved, 0' },
      },
    },
    iova: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'reserved, 0' },
    hashDir: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'address of the dedup zone directory (dedupZoneDir) of a hash-tracked landing zone, 0 = none: place() advances its chunk maps after each copy (RegionTable.setHashDir; zeroed by write)' },
  },
});

export const PLACE_DESC = layout({
  name: 'placeDesc',
  title: 'Placement descriptor: one received tagged segment (or receive piece) for place()',
  size: 32,
  ref: 'sabre data plane (M3)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    src: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'address of the payload in device memory; PLACE_SRC_CALLER (0xffffffff): the payload is outside it, place() only checks and the caller copies (PlaceStatus.CallerCopies)' },
    len: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'payload bytes' },
    stag: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'STag naming the target region' },
    pd: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'PD of the QP the segment arrived on (must equal the region\'s)' },
    to: { offset: 16, size: 8, type: 'u64', ref: 'sabre', meaning: 'absolute target address (TO)' },
    access: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'Access bits the placement needs' },
    tag: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'caller\'s tag, echoed in the amended-metadata record' },
  },
});

export const PLACE_OUT = layout({
  name: 'placeOut',
  title: 'Amended-metadata record written by place(), one per descriptor (M3)',
  size: 16,
  ref: 'sabre data plane (M3)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    tag: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'the descriptor\'s tag' },
    status: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'PlaceStatus' },
    len: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes of the descriptor' },
    stag: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'the descriptor\'s STag' },
  },
});

export const SG_DESC = layout({
  name: 'sgDesc',
  title: 'Scatter/gather copy descriptor for sgCopy (between registered regions)',
  size: 32,
  ref: 'sabre data plane',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    src: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'source address (inside region table entry srcIdx)' },
    dst: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'destination address (inside entry dstIdx)' },
    len: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes to copy (overlap copies as memmove)' },
    srcIdx: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'region table index of the source' },
    dstIdx: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'region table index of the destination' },
    rsvd: { offset: 20, size: 12, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0' },
  },
  tail: 'one u32 SgStatus per descriptor at the status pointer',
});

export const CRC_BATCH_DESC = layout({
  name: 'crcBatchDesc',
  title: 'CRC32C batch descriptor for crc32cBatch (one buffer in device memory)',
  size: 16,
  ref: 'sabre data plane',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    ptr: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'address of the bytes' },
    len: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'byte count' },
    previous: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'CRC32C to continue from (0 to start)' },
    out: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'result, written by the kernel' },
  },
});

/** Statuses place() writes into PLACE_OUT.status; checks run in this order. */
export const PlaceStatus = {
  Placed: 0,
  /** Index out of range, entry free, or STag (key byte) mismatch. */
  InvalidStag: 1,
  PdMismatch: 2,
  /** The region lacks a required Access bit. */
  Access: 3,
  /** [to, to+len) not inside the region. */
  Bounds: 4,
  /** Valid, but the region is EXTERNAL (outside device memory): the caller places it in software. */
  Indirect: 5,
  /** The payload range [src, src+len) lies outside the memory (caller bug; nothing written). */
  SrcFault: 6,
  /**
   * Every check passed for a descriptor whose src is PLACE_SRC_CALLER (a payload outside device
   * memory, e.g. node's datagram buffer): nothing was written, the caller copies the payload to
   * `to` now (one copy instead of staging it and copying again).
   */
  CallerCopies: 7,
  /** As CallerCopies, into a hash-tracked landing zone: after its copy the caller runs placedHash(). */
  CallerCopiesHashed: 8,
} as const;

/** PLACE_DESC.src of a payload outside device memory: place() checks the target, the caller copies. */
export const PLACE_SRC_CALLER = 0xffff_ffff;

/** Statuses sgCopy writes, one u32 per SG_DESC. */
export const SgStatus = {
  Ok: 0,
  SrcEntry: 1,
  DstEntry: 2,
  SrcBounds: 3,
  DstBounds: 4,
} as const;

// ---------------------------------------------------------------------------------------------
// Dedup (M4) — begin. In-band chunk hashing records (shared memory, little-endian) and the dedup
// transfer's control messages (a reliable message pipe, big-endian). src/dedup/ and
// assembly/chunkhash.ts read their offsets from here; docs/dedup.md explains the protocol.

/** Chunk map header magic ("DCM" + layout version 1). */
export const DEDUP_MAP_MAGIC = 0x014d4344;
/** Out-of-order intervals a chunk record remembers beyond its watermark. */
export const DEDUP_PEND_MAX = 8;
export const DedupChunkStatus = { Pending: 0, Ok: 1, Mismatch: 2 } as const;
export const DedupChunkFlag = { Overflow: 0x1, Tainted: 0x2 } as const;
/** chunkMapArm results. */
export const DedupArmStatus = { Ok: 0, BadMagic: 1, BadLayout: 2 } as const;

export const DEDUP_MAP_HDR = layout({
  name: 'dedupMapHdr',
  title: 'Chunk map header (a hash-tracked landing zone; shared memory, little-endian)',
  size: 64,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    magic: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'DEDUP_MAP_MAGIC; any other value and the kernel leaves the map alone' },
    lock: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'spin lock (0 free, 1 held): one thread at a time advances a map, so workers may share it' },
    zoneBase: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute address of the zone\'s first byte in the memory' },
    zoneLen: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes of the zone; segments are clipped to it' },
    chunkCount: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'chunk records that follow the header' },
    doneCount: { offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'chunks whose hash is final; the done list after the records holds their indices in completion order' },
    okCount: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'final chunks whose digest equals the expected hash' },
    mismatchCount: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'final chunks whose digest differs, or that were rewritten after hashing' },
    overflowCount: { offset: 32, size: 4, type: 'u32', ref: 'sabre', meaning: 'intervals dropped because a chunk\'s out-of-order record was full (chunkMapFinish completes such chunks)' },
    rewriteCount: { offset: 36, size: 4, type: 'u32', ref: 'sabre', meaning: 'segments that wrote bytes already hashed (the chunk is tainted: a mismatch, never a silent change)' },
    bytesHashed: { offset: 40, size: 8, type: 'u64', ref: 'sabre', meaning: 'bytes fed to chunk hashes' },
    segments: { offset: 48, size: 4, type: 'u32', ref: 'sabre', meaning: 'segments seen (inside the zone or not)' },
    outside: { offset: 52, size: 4, type: 'u32', ref: 'sabre', meaning: 'segments with no byte inside the zone' },
    seed: { offset: 56, size: 8, type: 'u64', ref: 'sabre', meaning: 'XXH3-128 seed of every chunk hash' },
  },
  tail: 'chunkCount dedupChunk records (768 bytes each, 64-aligned), then the done list: chunkCount u32 chunk indices',
});

export const DEDUP_CHUNK = layout({
  name: 'dedupChunk',
  title: 'Chunk record of a chunk map (shared memory, little-endian)',
  size: 768,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    state: { offset: 0, size: 640, type: 'bytes', ref: 'assembly/xxh3.ts', meaning: 'resumable XXH3-128 stream record: the chunk\'s hash so far (its first `mark` bytes)' },
    start: { offset: 640, size: 4, type: 'u32', ref: 'sabre', meaning: 'offset of the chunk in the zone (chunks are contiguous from 0)' },
    len: { offset: 644, size: 4, type: 'u32', ref: 'sabre', meaning: 'chunk length, > 0' },
    mark: { offset: 648, size: 4, type: 'u32', ref: 'sabre', meaning: 'watermark: bytes of the contiguous prefix already hashed' },
    status: { offset: 652, size: 4, type: 'u32', ref: 'sabre', meaning: 'DedupChunkStatus: 0 pending, 1 ok, 2 mismatch' },
    expected: { offset: 656, size: 16, type: 'bytes', ref: 'sabre', meaning: 'the hash the sender announced: XXH3-128 low64 then high64, LE' },
    digest: { offset: 672, size: 16, type: 'bytes', ref: 'sabre', meaning: 'the hash of the landed bytes, once final (same encoding)' },
    pendCount: { offset: 688, size: 4, type: 'u32', ref: 'sabre', meaning: 'intervals in pend (sorted, disjoint, all beyond mark)' },
    flags: {
      offset: 692, size: 4, type: 'u32', ref: 'sabre', meaning: 'flags',
      bits: {
        Overflow: { mask: 0x1, meaning: 'an interval was dropped: pend was full' },
        Tainted: { mask: 0x2, meaning: 'bytes were written again after being hashed' },
      },
    },
    landed: { offset: 696, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes recorded in pend' },
    rsvd: { offset: 700, size: 4, type: 'u32', ref: 'sabre', meaning: '0' },
    pend: { offset: 704, size: 64, type: 'bytes', ref: 'sabre', meaning: 'DEDUP_PEND_MAX {start u32, end u32} intervals (chunk-relative) landed beyond mark' },
  },
});

export const DEDUP_HASH_DESC = layout({
  name: 'dedupHashDesc',
  title: 'chunkHashBatch input descriptor: one placed segment (shared memory, little-endian)',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    map: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'address of the chunk map (dedupMapHdr)' },
    to: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute address of the segment\'s first placed byte (the PlaceDesc TO)' },
    len: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes placed' },
    rsvd: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: '0' },
  },
});

/** Landing-zone directory magic ("DZD" + layout version 1). */
export const DEDUP_ZONE_MAGIC = 0x01445a44;

export const DEDUP_ZONE_DIR = layout({
  name: 'dedupZoneDir',
  title: 'Landing-zone directory: the chunk map of each slot of a hash-tracked region (shared memory, little-endian)',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    magic: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'DEDUP_ZONE_MAGIC; any other value and the kernel does nothing' },
    slots: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'slots in the zone (1..64)' },
    slotLen: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes per slot' },
    zoneBase: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute address of slot 0' },
  },
  tail: 'slots u32 chunk-map addresses (dedupMapHdr), 0 for a slot not armed: its bytes are placed but not hashed',
});

export const DEDUP_COPY_DESC = layout({
  name: 'dedupCopyDesc',
  title: 'copyBatch descriptor: one assembly copy (shared memory, little-endian)',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    dst: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute destination address' },
    src: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'absolute source address (a store entry, a landing-zone chunk)' },
    len: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes' },
    rsvd: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: '0' },
  },
});

/** Dedup transfer messages (docs/dedup.md): one per pipe message, dedupMsg first. */
export const DEDUP_VERSION = 1;
export const DedupKind = { Hello: 1, Offer: 2, Need: 3, Round: 4, Grant: 5, End: 6, Abort: 7 } as const;
export const DedupHashAlg = { Xxh3_128: 1, Sha256: 2 } as const;
/** Hash bytes in a dedupEntry (a 16-byte XXH3-128 leaves the last 16 zero). */
export const DEDUP_HASH_BYTES = 32;
export const DedupEndStatus = { Ok: 0, Mismatch: 1, Malformed: 2, TooLarge: 3, Aborted: 4 } as const;
/** For docs/wire.md. */
export const DEDUP_KINDS = Object.entries(DedupKind).map(([k, v]) => `${v} ${k.toUpperCase()}`).join(', ');

export const DEDUP_MSG = layout({
  name: 'dedupMsg',
  title: 'Dedup transfer message header (every message on the pipe)',
  size: 8,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'DedupKind: 1 HELLO, 2 OFFER, 3 NEED, 4 ROUND, 5 GRANT, 6 END, 7 ABORT' },
    version: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'DEDUP_VERSION, 1' },
    flags: {
      offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'flags',
      bits: {
        Last: { mask: 0x0001, meaning: 'OFFER: the last page of the manifest' },
        Rsvd: { mask: 0xfffe, meaning: 'reserved, 0' },
      },
    },
    xfer: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'transfer id chosen by the sender (HELLO: 0)' },
  },
  tail: 'the kind\'s body: dedupHello, dedupOffer, dedupNeed, dedupRound, dedupGrant, dedupEnd or dedupAbort',
});

export const DEDUP_FLAG_LAST = DEDUP_MSG.fields.flags.bits!.Last.mask;

export const DEDUP_HELLO = layout({
  name: 'dedupHello',
  title: 'HELLO (receiver → sender, once per pipe): how to chunk and hash, and where to write',
  size: 64,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    hashAlg: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'DedupHashAlg of the receiver\'s store: 1 XXH3-128, 2 SHA-256' },
    normalization: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'FastCDC normalization level, 0..3' },
    rsvd: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: '0' },
    avg: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'average chunk size (power of two)' },
    min: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'minimum chunk size' },
    max: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'maximum chunk size; also the largest chunk the receiver accepts' },
    zoneAddr: { offset: 16, size: 8, type: 'u64', ref: 'sabre', meaning: 'landing zone: remote address for RDMA WRITEs of chunk data' },
    zoneRkey: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'landing zone rkey' },
    slotLen: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'the zone is `slots` slots of slotLen bytes (≥ max), each holding one ROUND' },
    slots: { offset: 32, size: 4, type: 'u32', ref: 'sabre', meaning: 'slots in the zone; all start granted' },
    maxEntries: { offset: 36, size: 4, type: 'u32', ref: 'sabre', meaning: 'most dedupEntry records one OFFER may carry' },
    maxChunks: { offset: 40, size: 4, type: 'u32', ref: 'sabre', meaning: 'most chunks one transfer may have' },
    seedHi: { offset: 44, size: 4, type: 'u32', ref: 'sabre', meaning: 'XXH3-128 seed, high word (chunk hashes of this scope)' },
    seedLo: { offset: 48, size: 4, type: 'u32', ref: 'sabre', meaning: 'XXH3-128 seed, low word' },
    rsvd2: { offset: 52, size: 12, type: 'bytes', ref: 'sabre', meaning: '0' },
  },
  tail: '32 bytes: the chunking key (the sender derives its gear table from it; docs/dedup.md)',
});

export const DEDUP_OFFER = layout({
  name: 'dedupOffer',
  title: 'OFFER (sender → receiver): one page of the manifest',
  size: 20,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    total: { offset: 0, size: 8, type: 'u64', ref: 'sabre', meaning: 'bytes of the whole object' },
    chunks: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'on the last page (flags.Last): the object\'s chunk count, first + count; else 0' },
    first: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'index of the first entry of this page (pages come in order)' },
    count: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'dedupEntry records that follow (1..maxEntries)' },
  },
  tail: 'count dedupEntry records',
});

export const DEDUP_ENTRY = layout({
  name: 'dedupEntry',
  title: 'Manifest entry: one chunk',
  size: 36,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    len: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'chunk length, 1..max' },
    hash: { offset: 4, size: 32, type: 'bytes', ref: 'sabre', meaning: 'chunk hash: XXH3-128 as low64 then high64, little-endian, then 16 zero bytes; or SHA-256' },
  },
});

export const DEDUP_NEED = layout({
  name: 'dedupNeed',
  title: 'NEED (receiver → sender): which chunks of an OFFER page to send',
  size: 8,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    first: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'the page\'s first entry index' },
    count: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'entries the bitmap covers (the page\'s count)' },
  },
  tail: 'ceil(count / 8) bytes of bitmap, entry first + i at bit (i & 7) of byte i >> 3: 1 = send it, 0 = the receiver holds it',
});

export const DEDUP_ROUND = layout({
  name: 'dedupRound',
  title: 'ROUND (sender → receiver): a slot of the landing zone holds the next needed chunks',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    slot: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'slot written (granted, not yet returned)' },
    first: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'manifest index of the first chunk in the slot' },
    count: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'needed chunks in the slot, packed in manifest order from the slot\'s start' },
    bytes: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes written (the sum of their lengths)' },
  },
});

export const DEDUP_GRANT = layout({
  name: 'dedupGrant',
  title: 'GRANT (receiver → sender): a slot is free again',
  size: 4,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    slot: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'slot the receiver has verified and copied out' },
  },
});

export const DEDUP_END = layout({
  name: 'dedupEnd',
  title: 'END (receiver → sender): the object is assembled (or why not)',
  size: 16,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    status: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'DedupEndStatus: 0 ok, 1 a chunk did not match its hash, 2 malformed message, 3 over a limit, 4 aborted' },
    detail: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'status 1: the chunk index; else 0' },
    total: { offset: 8, size: 8, type: 'u64', ref: 'sabre', meaning: 'bytes assembled' },
  },
});

export const DEDUP_ABORT = layout({
  name: 'dedupAbort',
  title: 'ABORT (either way): the transfer is abandoned',
  size: 4,
  ref: 'sabre (M4)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    status: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'DedupEndStatus saying why' },
  },
});
// Dedup (M4) — end.

// =============================================================================================
// Channels (M2) — src/channel/. Message channels over one rc QP pair: eager RDMA WRITE WITH
// IMMEDIATE into the receiver's pre-registered slots, control messages RDMA-written into a small
// per-channel mailbox, multi-phase enlargement of the receive slots (numbered epochs), shrink
// after idle, rendezvous (RDMA READ) above the largest eager size. All big-endian.
// docs/channels.md tells the state machine; docs/wire.md shows these byte by byte.

export const CHAN_VERSION = 1;
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
        Rsvd: { mask: 0xfc, meaning: 'reserved, 0' },
      },
    },
    ctrlCredits: { offset: 2, size: 1, type: 'u8', ref: 'sabre', meaning: 'mailbox slots of the sender of this message freed since its last report (credits for control messages)' },
    epoch: { offset: 3, size: 1, type: 'u8', ref: 'sabre', meaning: 'the epoch slotCredits refer to (credits for another epoch are ignored)' },
    slotCredits: { offset: 4, size: 2, type: 'u16', ref: 'sabre', meaning: 'eager slots of that epoch freed since the last report (credits for data messages)' },
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
    version: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'channel protocol version, 1' },
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
export const ChanFlag = { Value: 0x01, Deny: 0x02 } as const;

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
  { code: ChanType.Close, name: 'CLOSE', body: [CHAN_CLOSE], dir: 'both', meaning: 'graceful close: deliver up to `next`, then end' },
];

/** Every layout, in document order (the generator walks this). */
export const LAYOUTS: readonly LayoutSpec[] = [
  DDP_CTRL, TAGGED, UNTAGGED, READ_REQUEST, TERMINATE, IMMEDIATE_DATA, ATOMIC_REQUEST, ATOMIC_RESPONSE,
  READ_REQUEST_V, READ_V_ENTRY, READ_COMPLETE, SABRE_CONTROL,
  MPA_REQ_REP, MPA_V2_PRIVATE, MPA_FPDU, MPA_MARKER,
  UDP_HDR, UDP_COOKIE, UDP_TOKEN, UDP_INTEG, UDP_SACK, UDP_SACK_BLOCK, UDP_ENV, UDP_ENV_SEG,
  REGION_ENTRY, PLACE_DESC, PLACE_OUT, SG_DESC, CRC_BATCH_DESC,
  DEDUP_MAP_HDR, DEDUP_CHUNK, DEDUP_HASH_DESC, DEDUP_ZONE_DIR, DEDUP_COPY_DESC,
  DEDUP_MSG, DEDUP_HELLO, DEDUP_OFFER, DEDUP_ENTRY, DEDUP_NEED, DEDUP_ROUND, DEDUP_GRANT, DEDUP_END, DEDUP_ABORT,
  CHAN_IMM, CHAN_RECORD, CHAN_DEDUP, CHAN_HDR, CHAN_HELLO, CHAN_GRANT, CHAN_ENLARGE, CHAN_SWITCH, CHAN_OFFER, CHAN_DONE, CHAN_CLOSE,
];

// =============================================================================================
// File service (M6) — begin
//
// The I/O offload protocol of src/files/. Two wires:
// - the control pipe, a TCP stream of frames (filePipeHdr + body): token proof, resume key,
//   negotiate;
// - the RDMA connection (an rc QP from cm listen/connect on FILE_SERVICE): every Send starts
//   with fileHdr (credits in every header), followed by the opcode's body; completions travel
//   as status blocks (fileHdr ‖ fileStatus ‖ fileSeal) written by RDMA into the client's status
//   area, or as Sends.
// Sources: MS-SMBD §2.2 (credits requested/granted in every header, 3.1.5.1 last-credit rule,
// 3.1.5.8 checks on receipt), MS-SMB2 FSCTL_SRV_REQUEST_RESUME_KEY (a 24-byte resume key),
// RFC 8166 §3.3 (credits bound one connection instance). Big-endian like the rest of sabre.

/** cm service number of the file service's RDMA connections ('SBRF'). */
export const FILE_SERVICE = 0x5342_5246;
/** cm service number of the file service's dedup channels ('SBFD'; put/get --dedup, src/files/dedup.ts). */
export const FILE_DEDUP_SERVICE = 0x5342_4644;
export const FILE_VERSION = 1;
/** Largest control-pipe frame body; a longer length field closes the pipe before any read. */
export const FILE_PIPE_MAX_BODY = 1024;
export const FILE_NONCE_LEN = 32;
export const FILE_MAC_LEN = 32;
export const FILE_RESUME_KEY_LEN = 24;
export const FILE_KEY_ID_LEN = 16;
export const FILE_MAX_PATH = 4096;
/** Bytes of one status slot in the client's status area (a status block is 40). */
export const FILE_SLOT_BYTES = 64;

export interface CodeSpec {
  readonly code: number;
  readonly name: string;
  readonly meaning: string;
}

/** name → code of a code table, typed from the table itself (one table per fact). */
export type CodeMap<T extends readonly CodeSpec[]> = { readonly [E in T[number] as E['name']]: E['code'] };
function codeMap<const T extends readonly CodeSpec[]>(table: T): CodeMap<T> {
  return Object.freeze(Object.fromEntries(table.map((e) => [e.name, e.code]))) as CodeMap<T>;
}

/** Control-pipe frame types. */
export const FILE_PIPE_TYPES = [
  { code: 1, name: 'Hello', meaning: 'C→S filePipeHello: the client nonce' },
  { code: 2, name: 'Challenge', meaning: 'S→C filePipeNonce: the server nonce' },
  { code: 3, name: 'Proof', meaning: 'C→S filePipeMac: HMAC-SHA256(token, "sabre-files/1 client" ‖ Nc ‖ Ns)' },
  { code: 4, name: 'Welcome', meaning: 'S→C filePipeWelcome: status and HMAC-SHA256(token, "sabre-files/1 server" ‖ Nc ‖ Ns)' },
  { code: 5, name: 'ResumeKeyRequest', meaning: 'C→S, empty body: ask for the session\'s resume key' },
  { code: 6, name: 'ResumeKeyResponse', meaning: 'S→C filePipeResumeKey: the 24-byte key naming this session' },
  { code: 7, name: 'NegotiateRequest', meaning: 'C→S filePipeNegotiateReq: resume key and the providers the client has' },
  { code: 8, name: 'NegotiateResponse', meaning: 'S→C filePipeNegotiateResp: the common providers, their ports, a key id' },
  { code: 9, name: 'Status', meaning: 'S→C filePipeStatus: a refusal; the server closes the pipe after it' },
] as const;
export const FilePipeType = codeMap(FILE_PIPE_TYPES);

/** Provider bits of the negotiate messages. */
export const FILE_PROVIDERS = [
  { code: 0x01, name: 'udp', meaning: 'RDMAP/DDP over sabre\'s reliable UDP (M5); port in udpPort' },
  { code: 0x02, name: 'tcp', meaning: 'iWARP over TCP (MPA); port in tcpPort' },
  { code: 0x04, name: 'inproc', meaning: 'same process; the device id follows the body as UTF-8' },
] as const;
export const FileProvider = codeMap(FILE_PROVIDERS);

/** RDMA-connection opcodes (fileHdr.opcode). */
export const FILE_OPCODES = [
  { code: 1, name: 'AuthenticateRequest', meaning: 'C→S fileAuthReq; the one message a client may send before any grant' },
  { code: 2, name: 'AuthenticateResponse', meaning: 'S→C fileAuthResp: negotiated limits and the server\'s proof' },
  { code: 3, name: 'StatusResponse', meaning: 'S→C fileStatus by Send: the end of authentication, the answer to a retiring Credit, or a terminal refusal (flag Terminate)' },
  { code: 4, name: 'Completion', meaning: 'S→C status block (fileHdr ‖ fileStatus ‖ fileSeal) by RDMA Write (polling) or Write with Immediate = slot (Interrupt flag); info = the opcode completed' },
  { code: 5, name: 'RegisterFile', meaning: 'C→S fileRegister + path: open a file; completion aux = file id, value = size' },
  { code: 6, name: 'Read', meaning: 'C→S fileRead: the server RDMA-writes the bytes to the sink; completion value = bytes' },
  { code: 7, name: 'ReadV', meaning: 'C→S fileReadV + fileReadVEntry×count; with Collapse the sink is one contiguous run. Entries are read in order and the first short one (end of file) ends the request: the Completion\'s value fills the entries in order' },
  { code: 8, name: 'Write', meaning: 'C→S fileWrite + the data (a Send); completion value = bytes' },
  { code: 9, name: 'WriteV', meaning: 'C→S fileWriteV + fileWriteVEntry×count + the data collapsed into the one Send; needs the Collapse flag' },
  { code: 10, name: 'Close', meaning: 'C→S fileClose: completes once the file is closed (and, for Replace, renamed into place or, with discard, abandoned)' },
  { code: 11, name: 'Cancel', meaning: 'C→S, no body, info = request id to cancel; no answer of its own: the target completes with Cancelled or its result' },
  { code: 12, name: 'List', meaning: 'C→S fileList + path: one page of fileDirEntry records RDMA-written to the sink; completion value = bytes, aux = next cookie (0: end)' },
  { code: 13, name: 'Credit', meaning: 'C→S, no body: info 1 retires one credit (answered by a StatusResponse), info 0 only carries the header\'s grant' },
  { code: 14, name: 'DeltaCredit', meaning: 'S→C, no body: info = signed credit delta; −N asks the client to retire N credits with N Credit messages' },
  { code: 15, name: 'InterruptRequest', meaning: 'C→S, no body, info = request id: a polling client asks to be told by Send when it completes' },
  { code: 16, name: 'InterruptResponse', meaning: 'S→C fileStatus by Send, info = request id: its completion (status NotFound: the request is no longer in progress, its block is in the slot)' },
] as const;
export const FileOp = codeMap(FILE_OPCODES);

/** fileHdr.flags bits. */
export const FILE_FLAGS = [
  { code: 0x01, name: 'Interrupt', meaning: 'request: deliver the completion by RDMA Write with Immediate (a receive completion at the client); clear = polling (plain RDMA Write)' },
  { code: 0x02, name: 'Collapse', meaning: 'ReadV: the sink is one contiguous run; WriteV: the vector\'s data is gathered into this Send' },
  { code: 0x80, name: 'Terminate', meaning: 'StatusResponse: the server closes the connection after this message' },
] as const;
export const FileFlag = codeMap(FILE_FLAGS);

/** fileRegister.access bits. */
export const FILE_ACCESS = [
  { code: 0x01, name: 'Read', meaning: 'open for Read/ReadV' },
  { code: 0x02, name: 'Write', meaning: 'open for Write/WriteV' },
  { code: 0x04, name: 'Create', meaning: 'create the file when missing' },
  { code: 0x08, name: 'Truncate', meaning: 'truncate to 0 on open' },
  { code: 0x10, name: 'Exclusive', meaning: 'with Create: fail with Exists when the name exists' },
  { code: 0x20, name: 'Replace', meaning: 'write a temporary file next to the name, rename it into place on Close (never a truncated file under the name)' },
  { code: 0x40, name: 'Fsync', meaning: 'with Replace: fsync the file before the rename and the directory after it' },
] as const;
export const FileAccess = codeMap(FILE_ACCESS);

/** Status codes (filePipeStatus, fileStatus.status, fileAuthResp.status). */
export const FILE_STATUS = [
  { code: 0, name: 'Success', meaning: 'done' },
  { code: 1, name: 'AccessDenied', meaning: 'wrong token, wrong, expired or replayed key' },
  { code: 2, name: 'NotAuthenticated', meaning: 'a request before authentication (the connection is terminated)' },
  { code: 3, name: 'NotFound', meaning: 'no such file or directory' },
  { code: 4, name: 'Exists', meaning: 'Create + Exclusive on an existing name' },
  { code: 5, name: 'IsDirectory', meaning: 'a file operation on a directory' },
  { code: 6, name: 'NotDirectory', meaning: 'List on a file, or a file used as a directory in a path' },
  { code: 7, name: 'PathOutside', meaning: 'the path leaves the served directory (.., absolute, a symbolic link out, NUL)' },
  { code: 8, name: 'InvalidParameter', meaning: 'a field out of range or inconsistent with the message' },
  { code: 9, name: 'LimitExceeded', meaning: 'longer or more vectored than the negotiated limits' },
  { code: 10, name: 'TooManyOpenFiles', meaning: 'the connection holds the negotiated maximum of open files' },
  { code: 11, name: 'InvalidHandle', meaning: 'no such file id on this connection, or not opened for this access' },
  { code: 12, name: 'ReadOnly', meaning: 'the server is read-only' },
  { code: 13, name: 'Cancelled', meaning: 'cancelled by the client' },
  { code: 14, name: 'IoError', meaning: 'the server\'s file system failed the operation' },
  { code: 15, name: 'CreditOverrun', meaning: 'a message without a credit (the connection is terminated)' },
  { code: 16, name: 'Malformed', meaning: 'a message that does not parse' },
  { code: 17, name: 'NoCommonProvider', meaning: 'negotiate: no provider both sides have' },
  { code: 18, name: 'SessionLimit', meaning: 'too many sessions, connections or pending keys' },
  { code: 19, name: 'NoSpace', meaning: 'the server\'s file system is full' },
  { code: 20, name: 'LinkedFile', meaning: 'the file has more than one hard link (refused: it may alias a file outside)' },
  { code: 21, name: 'ShuttingDown', meaning: 'the server is closing' },
] as const;
export const FileStatus = codeMap(FILE_STATUS);

const fileLayout = <F extends string>(l: Omit<LayoutSpec<F>, 'byteOrder' | 'sabre'>): LayoutSpec<F> => layout({ ...l, byteOrder: 'big-endian', sabre: true });
const u8 = (offset: number, meaning: string): FieldSpec => ({ offset, size: 1, type: 'u8', meaning, ref: 'sabre M6' });
const u16 = (offset: number, meaning: string): FieldSpec => ({ offset, size: 2, type: 'u16', meaning, ref: 'sabre M6' });
const u32 = (offset: number, meaning: string): FieldSpec => ({ offset, size: 4, type: 'u32', meaning, ref: 'sabre M6' });
const u64 = (offset: number, meaning: string): FieldSpec => ({ offset, size: 8, type: 'u64', meaning, ref: 'sabre M6' });
const bytes = (offset: number, size: number, meaning: string): FieldSpec => ({ offset, size, type: 'bytes', meaning, ref: 'sabre M6' });

export const FILE_PIPE_HDR = fileLayout({
  name: 'filePipeHdr', title: 'File service: control-pipe frame header', size: 8, ref: 'sabre M6',
  fields: {
    length: u32(0, `bytes of body after this header (at most ${FILE_PIPE_MAX_BODY}; more closes the pipe unread)`),
    type: u8(4, 'frame type (pipe type table)'),
    version: u8(5, `protocol version, ${FILE_VERSION}`),
    rsvd: u16(6, '0'),
  },
  tail: 'the body of the type',
});
export const FILE_PIPE_NONCE = fileLayout({
  name: 'filePipeNonce', title: 'File service pipe: Hello / Challenge body', size: 32, ref: 'sabre M6',
  fields: { nonce: bytes(0, 32, 'fresh random bytes of the sender (Nc in Hello, Ns in Challenge)') },
});
export const FILE_PIPE_MAC = fileLayout({
  name: 'filePipeMac', title: 'File service pipe: Proof body', size: 32, ref: 'sabre M6',
  fields: { mac: bytes(0, 32, 'HMAC-SHA256(token, "sabre-files/1 client" ‖ Nc ‖ Ns): the token never crosses the wire') },
});
export const FILE_PIPE_WELCOME = fileLayout({
  name: 'filePipeWelcome', title: 'File service pipe: Welcome body', size: 36, ref: 'sabre M6',
  fields: {
    status: u32(0, 'Success, or AccessDenied (the pipe is closed after it)'),
    mac: bytes(4, 32, 'HMAC-SHA256(token, "sabre-files/1 server" ‖ Nc ‖ Ns): the server proves the token too (zero on refusal)'),
  },
});
export const FILE_PIPE_RESUME_KEY = fileLayout({
  name: 'filePipeResumeKey', title: 'File service pipe: ResumeKeyResponse body', size: 24, ref: 'sabre M6, MS-SMB2 SRV_REQUEST_RESUME_KEY',
  fields: { resumeKey: bytes(0, 24, 'random; names the session; its RDMA connections quote it to be bound to it') },
});
export const FILE_PIPE_NEGOTIATE_REQ = fileLayout({
  name: 'filePipeNegotiateReq', title: 'File service pipe: NegotiateRequest body', size: 28, ref: 'sabre M6',
  fields: {
    resumeKey: bytes(0, 24, 'the key from ResumeKeyResponse'),
    providers: u8(24, 'provider bits the client can use'),
    rsvd: bytes(25, 3, '0'),
  },
});
export const FILE_PIPE_NEGOTIATE_RESP = fileLayout({
  name: 'filePipeNegotiateResp', title: 'File service pipe: NegotiateResponse body', size: 28, ref: 'sabre M6',
  fields: {
    status: u32(0, 'Success or NoCommonProvider / SessionLimit'),
    providers: u8(4, 'provider bits both sides have (the minimal common list)'),
    inprocIdLen: u8(5, 'bytes of the inproc device id that follow the body (0 without inproc)'),
    udpPort: u16(6, 'port of the server\'s udp device (host: the pipe\'s)'),
    tcpPort: u16(8, 'port of the server\'s tcp device'),
    rsvd: u16(10, '0'),
    keyId: bytes(12, 16, 'names a single-use authentication key K_auth = HMAC-SHA256(K_session, "auth" ‖ keyId), K_session = HMAC-SHA256(token, "sabre-files/1 session" ‖ Nc ‖ Ns); valid 30 s'),
  },
  tail: 'inprocIdLen bytes of UTF-8: the inproc device id',
});
export const FILE_PIPE_STATUS = fileLayout({
  name: 'filePipeStatus', title: 'File service pipe: Status body', size: 4, ref: 'sabre M6',
  fields: { status: u32(0, 'why the server refuses; it closes the pipe next') },
});

export const FILE_HDR = fileLayout({
  name: 'fileHdr', title: 'File service: the header of every RDMA-connection message', size: 16, ref: 'sabre M6, MS-SMBD §2.2.3',
  fields: {
    opcode: u8(0, 'opcode (opcode table)'),
    flags: u8(1, 'Interrupt 0x01, Collapse 0x02, Terminate 0x80'),
    creditsRequested: u16(2, 'credits the sender wants to hold (its target), as MS-SMBD CreditsRequested'),
    creditsGranted: u16(4, 'new credits granted to the receiver by this message (each backed by a posted receive)'),
    slot: u16(6, 'request: the status slot its completion goes to; completion: the slot'),
    requestId: u32(8, 'request: chosen by the client, nonzero, unique among its outstanding requests; answers echo it'),
    info: u32(12, 'per opcode: DeltaCredit the signed delta; Credit 1 = retire; Cancel / InterruptRequest / InterruptResponse the target request id; Completion the opcode completed'),
  },
  tail: 'the opcode\'s body',
});
export const FILE_AUTH_REQ = fileLayout({
  name: 'fileAuthReq', title: 'File service: AuthenticateRequest body', size: 108, ref: 'sabre M6',
  fields: {
    resumeKey: bytes(0, 24, 'the session\'s resume key'),
    keyId: bytes(24, 16, 'the key id of a NegotiateResponse of that session'),
    nonce: bytes(40, 16, 'client nonce of this connection'),
    mac: bytes(56, 32, 'HMAC-SHA256(K_auth, "authenticate" ‖ resumeKey ‖ keyId ‖ nonce ‖ bytes 88..107 of this body)'),
    statusAddr: u64(88, 'the client\'s status area (registered with RemoteWrite)'),
    statusRkey: u32(96, 'its rkey'),
    statusSlots: u16(100, `slots of ${FILE_SLOT_BYTES} bytes in it`),
    rsvd: u16(102, '0'),
    maxReceiveSize: u32(104, 'the client\'s receive buffer size'),
  },
});
export const FILE_AUTH_RESP = fileLayout({
  name: 'fileAuthResp', title: 'File service: AuthenticateResponse body', size: 56, ref: 'sabre M6',
  fields: {
    status: u32(0, 'Success'),
    maxReceiveSize: u32(4, 'the server\'s receive buffer size (a message is at most this long)'),
    maxReadWriteSize: u32(8, 'largest Read/ReadV/List transfer'),
    maxWriteSize: u32(12, 'largest Write/WriteV data'),
    maxVectors: u16(16, 'most entries in a ReadV/WriteV'),
    maxOpenFiles: u16(18, 'most files open at once on this connection'),
    rwDepth: u16(20, 'RDMA transfers (reads being answered) in flight at once'),
    creditsMax: u16(22, 'the most credits the server will grant'),
    mac: bytes(24, 32, 'HMAC-SHA256(K_auth, "authenticated" ‖ nonce ‖ bytes 0..23 of this body): the server knew the key'),
  },
});
export const FILE_STATUS_BODY = fileLayout({
  name: 'fileStatus', title: 'File service: status body (StatusResponse, InterruptResponse, and inside a status block)', size: 16, ref: 'sabre M6',
  fields: {
    status: u32(0, 'status code'),
    aux: u32(4, 'RegisterFile: file id; List: next cookie; else 0'),
    value: u64(8, 'bytes transferred; RegisterFile: the file size'),
  },
});
export const FILE_SEAL = fileLayout({
  name: 'fileSeal', title: 'File service: status block trailer', size: 8, ref: 'sabre M6',
  fields: {
    seal: u32(0, 'the requestId again, written last: a polling client trusts the block once seal = its requestId'),
    rsvd: u32(4, '0'),
  },
});
export const FILE_REGISTER = fileLayout({
  name: 'fileRegister', title: 'File service: RegisterFile body', size: 12, ref: 'sabre M6',
  fields: {
    access: u32(0, 'access bits'),
    mode: u32(4, 'permission bits for a created file (masked with 0o666)'),
    pathLen: u16(8, `bytes of path that follow (1..${FILE_MAX_PATH})`),
    rsvd: u16(10, '0'),
  },
  tail: 'pathLen bytes of UTF-8: the path relative to the served directory, "/" separated',
});
export const FILE_READ = fileLayout({
  name: 'fileRead', title: 'File service: Read body', size: 32, ref: 'sabre M6',
  fields: {
    fileId: u32(0, 'from RegisterFile'),
    length: u32(4, 'bytes to read (at most maxReadWriteSize)'),
    offset: u64(8, 'file offset (< 2^53)'),
    sinkAddr: u64(16, 'where the server RDMA-writes the bytes'),
    sinkRkey: u32(24, 'rkey of the sink'),
    rsvd: u32(28, '0'),
  },
});
export const FILE_READ_V = fileLayout({
  name: 'fileReadV', title: 'File service: ReadV body', size: 24, ref: 'sabre M6',
  fields: {
    fileId: u32(0, 'from RegisterFile'),
    count: u16(4, 'entries that follow (1..maxVectors)'),
    rsvd: u16(6, '0'),
    sinkAddr: u64(8, 'Collapse: where the run starts; else 0'),
    sinkRkey: u32(16, 'rkey of every sink'),
    rsvd2: u32(20, '0'),
  },
  tail: 'count fileReadVEntry records',
});
export const FILE_READ_V_ENTRY = fileLayout({
  name: 'fileReadVEntry', title: 'File service: ReadV entry', size: 24, ref: 'sabre M6',
  fields: {
    offset: u64(0, 'file offset'),
    sinkAddr: u64(8, 'without Collapse: this entry\'s sink; with Collapse: 0 (entries follow each other from the body\'s sinkAddr)'),
    length: u32(16, 'bytes'),
    rsvd: u32(20, '0'),
  },
});
export const FILE_WRITE = fileLayout({
  name: 'fileWrite', title: 'File service: Write body', size: 16, ref: 'sabre M6',
  fields: {
    fileId: u32(0, 'from RegisterFile'),
    length: u32(4, 'bytes of data that follow (at most maxWriteSize; exactly the rest of the message)'),
    offset: u64(8, 'file offset'),
  },
  tail: 'length bytes of data',
});
export const FILE_WRITE_V = fileLayout({
  name: 'fileWriteV', title: 'File service: WriteV body (Collapse flag set)', size: 8, ref: 'sabre M6',
  fields: {
    fileId: u32(0, 'from RegisterFile'),
    count: u16(4, 'entries that follow (1..maxVectors)'),
    rsvd: u16(6, '0'),
  },
  tail: 'count fileWriteVEntry records, then the entries\' data back to back (the rest of the message, exactly the sum of their lengths)',
});
export const FILE_WRITE_V_ENTRY = fileLayout({
  name: 'fileWriteVEntry', title: 'File service: WriteV entry', size: 16, ref: 'sabre M6',
  fields: {
    offset: u64(0, 'file offset'),
    length: u32(8, 'bytes'),
    rsvd: u32(12, '0'),
  },
});
export const FILE_CLOSE = fileLayout({
  name: 'fileClose', title: 'File service: Close body', size: 8, ref: 'sabre M6',
  fields: { fileId: u32(0, 'from RegisterFile'), discard: u32(4, '1: a Replace file is abandoned (its temporary unlinked, the name untouched); 0: closed normally') },
});
export const FILE_LIST = fileLayout({
  name: 'fileList', title: 'File service: List body', size: 24, ref: 'sabre M6',
  fields: {
    cookie: u32(0, '0 for the first page, else the aux of the previous page\'s completion'),
    sinkLength: u32(4, 'bytes the sink holds (at most maxReadWriteSize)'),
    sinkAddr: u64(8, 'where the page is RDMA-written'),
    sinkRkey: u32(16, 'its rkey'),
    pathLen: u16(20, 'bytes of path that follow (0: the served directory itself)'),
    rsvd: u16(22, '0'),
  },
  tail: 'pathLen bytes of UTF-8: the directory',
});
export const FILE_DIR_ENTRY = fileLayout({
  name: 'fileDirEntry', title: 'File service: one directory entry in a List page', size: 24, ref: 'sabre M6',
  fields: {
    type: u8(0, '1 file, 2 directory, 3 symbolic link, 0 other'),
    rsvd: u8(1, '0'),
    nameLen: u16(2, 'bytes of name that follow'),
    mode: u32(4, 'permission bits'),
    size: u64(8, 'bytes (files)'),
    mtimeMs: u64(16, 'modification time, ms since 1970'),
  },
  tail: 'nameLen bytes of UTF-8, then zero padding to a multiple of 8',
});

/** File-service layouts, in document order (docs only: the data plane never parses them). */
export const FILE_LAYOUTS: readonly LayoutSpec[] = [
  FILE_PIPE_HDR, FILE_PIPE_NONCE, FILE_PIPE_MAC, FILE_PIPE_WELCOME, FILE_PIPE_RESUME_KEY, FILE_PIPE_NEGOTIATE_REQ, FILE_PIPE_NEGOTIATE_RESP, FILE_PIPE_STATUS,
  FILE_HDR, FILE_AUTH_REQ, FILE_AUTH_RESP, FILE_STATUS_BODY, FILE_SEAL, FILE_REGISTER, FILE_READ, FILE_READ_V, FILE_READ_V_ENTRY,
  FILE_WRITE, FILE_WRITE_V, FILE_WRITE_V_ENTRY, FILE_CLOSE, FILE_LIST, FILE_DIR_ENTRY,
];
// File service (M6) — end
// =============================================================================================
