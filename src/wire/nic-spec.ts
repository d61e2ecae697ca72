// The software NIC's shared-memory records (DESIGN §8; host order = little-endian; in the
// device's rings, not on a wire): work queue entries the application thread posts to the NIC
// thread and the completions it gets back, each the body of one RecordRing record
// (src/nic/ring.ts). src/nic/wqe.ts reads and writes them through these offsets. Re-exported
// by spec.ts, which lists these layouts in LAYOUTS.
//
// Only a token crosses for a work request: the application keeps the real wrId in its own
// table (as mlx5's wrid arrays), so a record is fixed-width numbers and never a JS value.
// Records of one ring start with a kind byte, so kinds interleave in posting order.
import { layout } from './layout.js';

/** kind byte of a SEND_WQE record. */
export const WQE_KIND_SEND = 1;
/** kind byte of a RECV_WQE record. */
export const WQE_KIND_RECV = 2;
/** kind byte of a CQE record. */
export const CQE_KIND = 3;

export const SEND_WQE = layout({
  name: 'sendWqe',
  title: 'Send work queue entry (app → NIC ring): fixed head, then nSge local SGEs, nRemote remote SGEs, inlineLen bytes',
  size: 64,
  ref: 'sabre NIC thread',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'record kind, 1 = send WQE' },
    opcode: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'verbs Opcode (RdmaWrite 0, RdmaWriteWithImm 1, Send 2, SendWithImm 3, RdmaRead 4, AtomicCmpSwap 5, AtomicFetchAdd 6)' },
    flags: {
      offset: 2, size: 1, type: 'u8', ref: 'sabre', meaning: 'flags',
      bits: {
        Signaled: { mask: 0x01, meaning: 'the request completes with a CQE' },
        HasImm: { mask: 0x02, meaning: 'imm holds immediate data' },
        RemoteList: { mask: 0x04, meaning: 'nRemote remote SGEs follow the local ones (vectored read/write)' },
        Inline: { mask: 0x08, meaning: 'the payload is the inlineLen bytes at the end, not the local SGEs' },
        Srd: { mask: 0x10, meaning: 'datagram destination: ah and remoteQpn name it' },
        HasRemote: { mask: 0x20, meaning: 'remoteAddr and rkey name the target (RDMA and atomic opcodes)' },
        HasAtomic: { mask: 0x40, meaning: 'compareAdd and swap hold the atomic operands' },
        Rsvd: { mask: 0x80, meaning: 'reserved, 0' },
      },
    },
    rsvd: { offset: 3, size: 1, type: 'u8', ref: 'sabre', meaning: 'reserved, 0' },
    nSge: { offset: 4, size: 2, type: 'u16', ref: 'sabre', meaning: 'local SGEs after the head (16 bytes each, wqeSge)' },
    nRemote: { offset: 6, size: 2, type: 'u16', ref: 'sabre', meaning: 'remote SGEs after the local ones (16 bytes each, wqeRemoteSge); 0 unless RemoteList' },
    qpn: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'QP number the request is posted on' },
    token: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'the application\'s handle of the request (indexes its wrId table), echoed in the CQE' },
    imm: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'immediate data (HasImm), else 0' },
    rkey: { offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'remote STag (HasRemote), else 0' },
    remoteAddr: { offset: 24, size: 8, type: 'u64', ref: 'sabre', meaning: 'remote address (HasRemote; a JS safe integer), else 0' },
    remoteQpn: { offset: 32, size: 4, type: 'u32', ref: 'sabre', meaning: 'destination QPN of a datagram (Srd), else 0' },
    ah: { offset: 36, size: 4, type: 'u32', ref: 'sabre', meaning: 'address handle id of a datagram\'s destination (Srd), else 0' },
    compareAdd: { offset: 40, size: 8, type: 'u64', ref: 'sabre', meaning: 'compare value (AtomicCmpSwap) or addend (AtomicFetchAdd) (HasAtomic), else 0' },
    swap: { offset: 48, size: 8, type: 'u64', ref: 'sabre', meaning: 'swap value (AtomicCmpSwap) (HasAtomic), else 0' },
    inlineLen: { offset: 56, size: 4, type: 'u32', ref: 'sabre', meaning: 'inline payload bytes at the end of the record (Inline), else 0' },
    rsvd2: { offset: 60, size: 4, type: 'u32', ref: 'sabre', meaning: 'reserved, 0' },
  },
  tail: 'nSge wqeSge entries, nRemote wqeRemoteSge entries, then inlineLen payload bytes',
});

export const RECV_WQE = layout({
  name: 'recvWqe',
  title: 'Receive work queue entry (app → NIC ring): fixed head, then nSge local SGEs',
  size: 16,
  ref: 'sabre NIC thread',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'record kind, 2 = receive WQE' },
    rsvd: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'reserved, 0' },
    nSge: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'local SGEs after the head (16 bytes each, wqeSge)' },
    qpn: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'QP number the receive is posted on' },
    token: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'the application\'s handle of the request, echoed in the CQE' },
    rsvd2: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'reserved, 0' },
  },
  tail: 'nSge wqeSge entries',
});

export const WQE_SGE = layout({
  name: 'wqeSge',
  title: 'Local scatter/gather entry of a WQE',
  size: 16,
  ref: 'sabre NIC thread',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    addr: { offset: 0, size: 8, type: 'u64', ref: 'sabre', meaning: 'local address (a JS safe integer)' },
    length: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes' },
    lkey: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'local key of the region holding [addr, addr+length)' },
  },
});

export const WQE_REMOTE_SGE = layout({
  name: 'wqeRemoteSge',
  title: 'Remote scatter/gather entry of a send WQE (RemoteList)',
  size: 16,
  ref: 'sabre NIC thread',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    addr: { offset: 0, size: 8, type: 'u64', ref: 'sabre', meaning: 'remote address (a JS safe integer)' },
    length: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes' },
    rkey: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'remote STag of the region' },
  },
});

export const CQE = layout({
  name: 'cqe',
  title: 'Completion queue entry (NIC → app ring): fixed head, then srcLen bytes of source address',
  size: 32,
  ref: 'sabre NIC thread',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'record kind, 3 = CQE (the NIC → app ring may carry other kinds)' },
    status: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'WcStatus' },
    opcode: { offset: 2, size: 1, type: 'u8', ref: 'sabre', meaning: 'WcOpcode (Send 0 … FetchAdd 4, Recv 128, RecvRdmaWithImm 129)' },
    flags: {
      offset: 3, size: 1, type: 'u8', ref: 'sabre', meaning: 'flags',
      bits: {
        HasImm: { mask: 0x01, meaning: 'imm holds immediate data' },
        HasSrcQpn: { mask: 0x02, meaning: 'srcQpn names the sender\'s QP (datagram receives)' },
        HasSrc: { mask: 0x04, meaning: 'srcLen bytes of encoded source address follow the head' },
        Rsvd: { mask: 0xf8, meaning: 'reserved, 0' },
      },
    },
    cq: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'id of the CQ the completion belongs to' },
    token: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'the WQE\'s token' },
    qpn: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'QP number of the work request' },
    byteLen: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes transferred' },
    imm: { offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'immediate data (HasImm), else 0' },
    srcQpn: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'sender\'s QPN (HasSrcQpn), else 0' },
    srcLen: { offset: 28, size: 2, type: 'u16', ref: 'sabre', meaning: 'bytes of encoded source address after the head (HasSrc), else 0' },
    rsvd: { offset: 30, size: 2, type: 'u16', ref: 'sabre', meaning: 'reserved, 0' },
  },
  tail: 'srcLen opaque bytes: the encoded source address of a datagram receive (rare)',
});

/** The NIC's layouts in document order (spec.ts appends them to LAYOUTS). */
export const NIC_LAYOUTS = [SEND_WQE, RECV_WQE, WQE_SGE, WQE_REMOTE_SGE, CQE] as const;
