// Verbs enumerations. Numeric values are the ibverbs ones (verbs.h), so code ported from
// rdma-core reads the same numbers; names are exactly those of the public contract (DESIGN §4).

/** Memory access flags (ibv_access_flags). */
export const Access = {
  LocalWrite: 1,
  RemoteWrite: 2,
  RemoteRead: 4,
  RemoteAtomic: 8,
} as const;
export type AccessFlags = number;

/** Work request opcodes (ibv_wr_opcode). */
export const Opcode = {
  RdmaWrite: 0,
  RdmaWriteWithImm: 1,
  Send: 2,
  SendWithImm: 3,
  RdmaRead: 4,
  AtomicCmpSwap: 5,
  AtomicFetchAdd: 6,
} as const;
export type OpcodeValue = (typeof Opcode)[keyof typeof Opcode];

/** Work completion opcodes (ibv_wc_opcode). */
export const WcOpcode = {
  Send: 0,
  RdmaWrite: 1,
  RdmaRead: 2,
  CmpSwap: 3,
  FetchAdd: 4,
  Recv: 128,
  RecvRdmaWithImm: 129,
} as const;
export type WcOpcodeValue = (typeof WcOpcode)[keyof typeof WcOpcode];

/** Work completion status (ibv_wc_status). */
export const WcStatus = {
  Success: 0,
  LocLenErr: 1,
  LocQpOpErr: 2,
  LocProtErr: 4,
  WrFlushErr: 5,
  RemInvReqErr: 9,
  RemAccessErr: 10,
  RemOpErr: 11,
  RetryExcErr: 12,
  RnrRetryExcErr: 13,
  GeneralErr: 21,
} as const;
export type WcStatusValue = (typeof WcStatus)[keyof typeof WcStatus];

/** Queue pair states (ibv_qp_state). */
export const QpState = {
  Reset: 0,
  Init: 1,
  Rtr: 2,
  Rts: 3,
  Error: 6,
} as const;
export type QpStateValue = (typeof QpState)[keyof typeof QpState];

const names = <T extends Record<string, number>>(o: T): Map<number, string> => new Map(Object.entries(o).map(([k, v]) => [v, k]));
const statusNames = names(WcStatus);
const wcOpcodeNames = names(WcOpcode);
const qpStateNames = names(QpState);

/** 'RemAccessErr' for WcStatus.RemAccessErr — for messages and logs. */
export const wcStatusName = (s: number): string => statusNames.get(s) ?? `WcStatus(${s})`;
export const wcOpcodeName = (o: number): string => wcOpcodeNames.get(o) ?? `WcOpcode(${o})`;
export const qpStateName = (s: number): string => qpStateNames.get(s) ?? `QpState(${s})`;
