// The RDMAP opcode table: one row per opcode, as Linux siw's iwarp_pktinfo. A row extends the
// opcode's wire facts (src/wire/spec.ts OPCODES: tagged or untagged, QN, whether its payload is
// data, sabre extension) with everything the engine and the verbs layer do with it:
//   wr / kind / imm / remote / source   which work requests start with this message, what
//                                       postSend checks for them and what they complete as
//   build                               how the requester builds them (requester.ts)
//   access / recv / arrive              how a segment of it is taken in (arrival.ts)
//   execute                             what completing it, in order, does (responder.ts)
// Every place that used to switch on an opcode reads a row instead; a new opcode is one row
// (and, if it does something no opcode did before, one case under the kind it names).
import { Access, Opcode, WcOpcode, type OpcodeValue, type WcOpcodeValue } from '../core/enums.js';
import { OPCODES, type OpcodeSpec } from '../wire/spec.js';

/** The four shapes of send work request. */
export const WrKind = { Send: 0, Write: 1, Read: 2, Atomic: 3 } as const;
export type WrKindValue = (typeof WrKind)[keyof typeof WrKind];

/** How the requester builds the messages of a work request (requester.ts). */
export type Build = 'send' | 'write' | 'read' | 'atomic';

/** How a segment is taken in on arrival (arrival.ts). */
export type Arrive =
  /** Placed at the STag/TO it names, with the row's access. */
  | 'tagged'
  /** Placed at the sinks of one of our outstanding reads (nowhere else). */
  | 'readResponse'
  /** Data placed into a posted receive, cut along its scatter list. */
  | 'receive'
  /** One segment whose RDMAP payload is kept for execution. */
  | 'control'
  /** Not an opcode sabre takes: Terminate (RDMAP opcode error). */
  | 'refused';

/** What completing a message, in ssn order, does (responder.ts). */
export type Execute =
  | 'none' | 'receive' | 'immediate' | 'answerRead' | 'answerAtomic' | 'readComplete' | 'readResponse' | 'atomicResponse' | 'terminate';

export interface OpcodeRow extends OpcodeSpec {
  /** Work-request opcodes whose (first) message this is, each with the completion opcode it gets. */
  readonly wr: Readonly<Partial<Record<OpcodeValue, WcOpcodeValue>>>;
  readonly kind?: WrKindValue;
  readonly build?: Build;
  /** The work-request opcode that carries an immediate with this message (SendWithImm in RsvdULP; RdmaWriteWithImm as Immediate Data after the write). */
  readonly imm?: OpcodeValue;
  /**
   * A sabre extension that starts work requests: what such a request does when the QP's peer is
   * a standard iWARP peer (core/peer.ts) — refused at post, or built from RFC 5040 Read Requests.
   */
  readonly toStandardPeer?: 'refuse' | 'rfcReadRequests';
  /** The remote side a work request names: none, one segment, a segment list (reads), one 8-byte word (atomics). */
  readonly remote?: 'none' | 'one' | 'list' | 'word';
  /** The local segments are the data source (may be inlined) rather than sinks (need LocalWrite). */
  readonly source?: boolean;
  /** Access the responder's region must grant. */
  readonly access?: number;
  /** Consumes a posted receive: claimed on arrival (data goes into it) or at completion (nothing to place); the receive completion's opcode. */
  readonly recv?: { readonly at: 'arrival' | 'completion'; readonly wc: WcOpcodeValue };
  readonly arrive: Arrive;
  readonly execute: Execute;
}

type Row = Omit<OpcodeRow, keyof OpcodeSpec | 'wr'> & { wr?: OpcodeRow['wr'] };

const rows: Record<number, Row> = {
  0: /* RdmaWrite */ {
    wr: { [Opcode.RdmaWrite]: WcOpcode.RdmaWrite, [Opcode.RdmaWriteWithImm]: WcOpcode.RdmaWrite },
    kind: WrKind.Write, build: 'write', imm: Opcode.RdmaWriteWithImm, remote: 'one', source: true,
    access: Access.RemoteWrite, arrive: 'tagged', execute: 'none',
  },
  // Built for an RdmaRead to a standard iWARP peer (the 'read' build chooses by peer profile).
  1: /* ReadRequest */ { access: Access.RemoteRead, arrive: 'control', execute: 'answerRead' },
  2: /* ReadResponse */ { access: Access.LocalWrite, arrive: 'readResponse', execute: 'readResponse' },
  3: /* Send */ {
    wr: { [Opcode.Send]: WcOpcode.Send }, kind: WrKind.Send, build: 'send', remote: 'none', source: true,
    recv: { at: 'arrival', wc: WcOpcode.Recv }, arrive: 'receive', execute: 'receive',
  },
  4: /* SendInv */ { arrive: 'refused', execute: 'none' },
  5: /* SendSe */ { arrive: 'refused', execute: 'none' },
  6: /* SendSeInv */ { arrive: 'refused', execute: 'none' },
  7: /* Terminate */ { arrive: 'control', execute: 'terminate' },
  // The second message of an RdmaWriteWithImm (the write row's build sends it).
  8: /* ImmediateData */ { recv: { at: 'completion', wc: WcOpcode.RecvRdmaWithImm }, arrive: 'control', execute: 'immediate' },
  9: /* ImmediateDataSe */ { arrive: 'refused', execute: 'none' },
  10: /* AtomicRequest */ {
    wr: { [Opcode.AtomicFetchAdd]: WcOpcode.FetchAdd, [Opcode.AtomicCmpSwap]: WcOpcode.CmpSwap },
    kind: WrKind.Atomic, build: 'atomic', remote: 'word', source: false, access: Access.RemoteAtomic, arrive: 'control', execute: 'answerAtomic',
  },
  11: /* AtomicResponse */ { arrive: 'control', execute: 'atomicResponse' },
  12: /* SendWithImm */ {
    wr: { [Opcode.SendWithImm]: WcOpcode.Send }, kind: WrKind.Send, build: 'send', imm: Opcode.SendWithImm, toStandardPeer: 'refuse', remote: 'none', source: true,
    recv: { at: 'arrival', wc: WcOpcode.Recv }, arrive: 'receive', execute: 'receive',
  },
  13: /* ReadRequestV */ {
    wr: { [Opcode.RdmaRead]: WcOpcode.RdmaRead }, kind: WrKind.Read, build: 'read', toStandardPeer: 'rfcReadRequests', remote: 'list', source: false,
    access: Access.RemoteRead, arrive: 'control', execute: 'answerRead',
  },
  14: /* ReadComplete */ { arrive: 'control', execute: 'readComplete' },
  // The tcp link's own control message: it never reaches the engine.
  15: /* SabreControl */ { arrive: 'refused', execute: 'none' },
};

/** The table, indexed by RDMAP opcode. */
export const OPCODE_ROWS: readonly OpcodeRow[] = OPCODES.map((spec) => {
  const r = rows[spec.code];
  if (!r) throw new Error(`opcode table: no row for ${spec.name}`);
  // The wire's facts decide how a segment can be taken in: a receive takes untagged data, a
  // tagged arrival needs the tagged model, a control payload is no data.
  const fits = r.arrive === 'receive' ? spec.data && !spec.tagged
    : r.arrive === 'tagged' || r.arrive === 'readResponse' ? spec.tagged
    : r.arrive === 'control' ? !spec.data && !spec.tagged : true;
  if (!fits) throw new Error(`opcode table: ${spec.name} cannot arrive as '${r.arrive}'`);
  return Object.freeze({ ...spec, ...r, wr: Object.freeze({ ...(r.wr ?? {}) }) });
});

/** The row of RDMAP opcode `code` (undefined outside 0..15). */
export function rowOf(code: number): OpcodeRow | undefined {
  return OPCODE_ROWS[code];
}

/** Work-request opcode → the row of the message it starts. */
const wrRows = new Map<number, OpcodeRow>();
for (const row of OPCODE_ROWS) for (const op of Object.keys(row.wr)) wrRows.set(Number(op), row);

/** The row a work request with verbs opcode `op` starts with; undefined for an unknown opcode. */
export function rowForWr(op: unknown): OpcodeRow | undefined {
  return typeof op === 'number' ? wrRows.get(op) : undefined;
}


/**
 * The fields of a send work request its opcode takes, as bits (SEND_TAKES_*): the others are
 * ignored, as ibverbs ignores the members of its union an opcode does not use, whatever they
 * hold. Every port copies only these: a field another opcode uses (a bigint imm on a Send, a
 * remoteSgList on a Write) made one port throw half-way through a work request it then sent
 * (a NIC thread's ring record), and another ignore it (found by an audit).
 */
export function sendFieldsTaken(row: OpcodeRow, opcode: number, hasRemoteList: boolean): number {
  let t = 0;
  if (row.imm === opcode) t |= SEND_TAKES_IMM;
  if (row.remote === 'one' || row.remote === 'word' || (row.remote === 'list' && !hasRemoteList)) t |= SEND_TAKES_REMOTE;
  if (row.remote === 'list' && hasRemoteList) t |= SEND_TAKES_REMOTE_LIST;
  if (row.remote === 'word') t |= SEND_TAKES_COMPARE_ADD;
  if (row.wr[opcode as OpcodeValue] === WcOpcode.CmpSwap) t |= SEND_TAKES_SWAP;
  return t;
}
export const SEND_TAKES_IMM = 1;
/** remoteAddr and rkey. */
export const SEND_TAKES_REMOTE = 2;
export const SEND_TAKES_REMOTE_LIST = 4;
export const SEND_TAKES_COMPARE_ADD = 8;
export const SEND_TAKES_SWAP = 16;
