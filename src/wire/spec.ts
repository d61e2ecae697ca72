// The single source of truth for every byte sabre's RDMA layers put on a wire or share with the
// data plane: the RFC layouts (DDP, RDMAP, MPA), sabre's udp transport and the data-plane records;
// and the records only TypeScript reads (HOST_LAYOUTS: the tcp transport's private-data block,
// the inproc bridge, the data-plane job slots).
// The features above the verbs keep their protocols in their own specs (dedup-spec.ts,
// channel-spec.ts, files-spec.ts), written in the same vocabulary (layout.ts).
//
// Layouts are data: scripts/gen-wire.mjs turns them into the TypeScript constants/accessors the
// codecs use (src/wire/fields.gen.ts), into AssemblyScript constants/readers
// (assembly/wire.gen.ts) and into the byte diagrams of docs/wire.md. Change a number here, run `npm run gen`, and every
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

export type { BitSpec, FieldSpec, FieldType, LayoutSpec } from './layout.js';
import { layout, type LayoutSpec } from './layout.js';
import { CRC_BATCH_DESC, JOB_CPL, JOB_REQ, PLACE_DESC, PLACE_OUT, REGION_ENTRY, SG_DESC } from './dataplane-spec.js';
import { INPROC_LAYOUTS } from './inproc-spec.js';
import { NIC_LAYOUTS } from './nic-spec.js';
import { TCP_LAYOUTS } from './tcp-spec.js';
import { UDP_COOKIE, UDP_ENV, UDP_ENV_SEG, UDP_HDR, UDP_INTEG, UDP_SACK, UDP_SACK_BLOCK, UDP_TOKEN } from './udp-spec.js';

export * from './udp-spec.js';
export * from './dataplane-spec.js';
export * from './nic-spec.js';
export * from './tcp-spec.js';
export * from './inproc-spec.js';

// The features' specs, re-exported for importers not yet moved to them (src/dedup/, tests,
// benchmarks). The RDMA layers below the features import nothing of them.
export * from './dedup-spec.js';
export * from './channel-spec.js';
export * from './files-spec.js';

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

/**
 * The layouts of this file in document order: the RFC headers, sabre's udp transport, the
 * data-plane records, the NIC's ring records (nic-spec.ts). The features' layouts are in their
 * own specs (DEDUP_LAYOUTS, CHAN_LAYOUTS, FILE_LAYOUTS); scripts/gen-wire.mjs walks them all,
 * in that order.
 */
export const LAYOUTS: readonly LayoutSpec[] = [
  DDP_CTRL, TAGGED, UNTAGGED, READ_REQUEST, TERMINATE, IMMEDIATE_DATA, ATOMIC_REQUEST, ATOMIC_RESPONSE,
  READ_REQUEST_V, READ_V_ENTRY, READ_COMPLETE, SABRE_CONTROL,
  MPA_REQ_REP, MPA_V2_PRIVATE, MPA_FPDU, MPA_MARKER,
  UDP_HDR, UDP_COOKIE, UDP_TOKEN, UDP_INTEG, UDP_SACK, UDP_SACK_BLOCK, UDP_ENV, UDP_ENV_SEG,
  REGION_ENTRY, PLACE_DESC, PLACE_OUT, SG_DESC, CRC_BATCH_DESC,
  ...NIC_LAYOUTS,
];

/**
 * Layouts only TypeScript reads, on both ends: sabre's block in the tcp transport's MPA private
 * data, the inproc bridge's records, the data-plane workers' job slots. scripts/gen-wire.mjs
 * generates their accessors (fields.gen.ts) and documents them, and leaves them out of
 * assembly/wire.gen.ts: the kernels never see them.
 */
export const HOST_LAYOUTS: readonly LayoutSpec[] = [...TCP_LAYOUTS, ...INPROC_LAYOUTS, JOB_REQ, JOB_CPL];
