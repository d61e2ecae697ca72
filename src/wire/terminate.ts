// The one Terminate table: every error sabre reports to a peer as an RFC 5040 §4.8 Terminate
// (layer / etype / ecode, values from TERM_TABLES in ./spec.ts as siw's iwarp.h has them), by
// name, and the three mappings around it — a placement kernel status to the Terminate the
// requester will see, a DDP decode error to the Terminate a receiver must send (siw_get_hdr's
// checks), and a received Terminate to the requester's completion status.
import { WcStatus, type WcStatusValue } from '../core/enums.js';
import { PlaceStatus, TERM_TABLES, TermLayer } from './spec.js';

export interface TermCode {
  layer: number;
  etype: number;
  ecode: number;
}

const R = TERM_TABLES.rdmap;
const D = TERM_TABLES.ddp;
const L = TERM_TABLES.llp;
const rdmap = (etype: number, ecode: number): TermCode => ({ layer: TermLayer.Rdmap, etype, ecode });
const ddp = (etype: number, ecode: number): TermCode => ({ layer: TermLayer.Ddp, etype, ecode });
const llp = (ecode: number): TermCode => ({ layer: TermLayer.Llp, etype: L.etype.Mpa, ecode });

export const TERM = {
  // RDMAP (RFC 5040 §4.8)
  invalidStag: rdmap(R.etype.RemoteProtection, R.ecode.InvalidStag),
  baseBounds: rdmap(R.etype.RemoteProtection, R.ecode.BaseBounds),
  accessRights: rdmap(R.etype.RemoteProtection, R.ecode.AccessRights),
  stagNotAssociated: rdmap(R.etype.RemoteProtection, R.ecode.StagNotAssociated),
  rdmapVersion: rdmap(R.etype.RemoteOperation, R.ecode.Version),
  badOpcode: rdmap(R.etype.RemoteOperation, R.ecode.Opcode),
  /** Misaligned atomic, malformed request payload, a message that breaks the stream's order. */
  invalidRequest: rdmap(R.etype.RemoteOperation, R.ecode.Unspecified),
  catastrophic: rdmap(R.etype.Catastrophic, R.ecode.Unspecified),
  /** A DDP segment on a byte stream that does not continue the message before it. */
  catastrophicStream: rdmap(R.etype.Catastrophic, R.ecode.CatastrophicStream),
  /**
   * The peer went past a resource of the stream: more RDMA Read Requests outstanding than the
   * IRD it was given (RFC 5040 §7.2 / RFC 6581: Remote Operation Error, "catastrophic error,
   * localized to RDMAP Stream"; siw does the same when its inbound read queue is full).
   */
  tooManyReads: rdmap(R.etype.RemoteOperation, R.ecode.CatastrophicStream),
  /** … or more out-of-order messages / bytes than the QP holds for it (src/rdmap/bounds.ts): the same code. */
  outOfOrderLimit: rdmap(R.etype.RemoteOperation, R.ecode.CatastrophicStream),
  /**
   * sabre's own (to sabre peers only: a standard peer never sees it): the peer's QP was
   * destroyed or its device closed — not an error of the stream. Everything before it took
   * effect (its ack says how far); the QP that gets it flushes the rest and reports the
   * disconnect with cause 'closed'. An ecode RFC 5040 leaves unassigned.
   */
  peerClosed: rdmap(R.etype.RemoteOperation, 0x80),
  // DDP (RFC 5041 §7.2)
  taggedVersion: ddp(D.etype.TaggedBuffer, D.taggedEcode.Version),
  untaggedVersion: ddp(D.etype.UntaggedBuffer, D.untaggedEcode.Version),
  invalidQn: ddp(D.etype.UntaggedBuffer, D.untaggedEcode.InvalidQn),
  /** A Send found no posted receive (a standard iWARP peer gets no RNR: RFC 5040 makes it fatal). */
  noBuffer: ddp(D.etype.UntaggedBuffer, D.untaggedEcode.InvalidMsnNoBuffer),
  invalidMsn: ddp(D.etype.UntaggedBuffer, D.untaggedEcode.InvalidMsnRange),
  invalidMo: ddp(D.etype.UntaggedBuffer, D.untaggedEcode.InvalidMo),
  messageTooLong: ddp(D.etype.UntaggedBuffer, D.untaggedEcode.MessageTooLong),
  // LLP = MPA (RFC 5044 §8, RFC 6581 §9)
  /** Stream ended or reset in the middle of an FPDU. */
  streamLost: llp(L.ecode.TcpStreamLost),
  crc: llp(L.ecode.ReceivedCrc),
  /** Marker / FPDU framing lost (bad FPDUPTR, impossible length). */
  fpduStart: llp(L.ecode.FpduStart),
  /** Bad MPA Request/Reply. */
  invalidReqResp: llp(L.ecode.InvalidReqResp),
  insufficientIrd: llp(L.ecode.InsufficientIrd),
  noMatchingRtr: llp(L.ecode.NoMatchingRtr),
} as const satisfies Record<string, TermCode>;

/** A failed tagged placement (kernel status) as the Terminate the requester will see. */
export function termForPlaceStatus(status: number): TermCode {
  switch (status) {
    case PlaceStatus.InvalidStag: return TERM.invalidStag;
    case PlaceStatus.PdMismatch: return TERM.stagNotAssociated;
    case PlaceStatus.Access: return TERM.accessRights;
    case PlaceStatus.Bounds: return TERM.baseBounds;
    default: return TERM.catastrophic;
  }
}

/**
 * The stable error strings of ./rdmap.ts decodeDdp as the Terminate the receiver must send
 * (siw_get_hdr does the same checks): a DDP version error is reported by DDP in the tagged or
 * untagged buffer etype, an RDMAP version or opcode error by RDMAP as a remote operation error.
 * `tagged` is the T bit of the offending segment. `code` is a stable name for logs and faults.
 */
export function termForDdpError(error: string, tagged: boolean): { term: TermCode; code: string; reason: string } {
  switch (error) {
    case 'BAD_DDP_VERSION':
      return { term: tagged ? TERM.taggedVersion : TERM.untaggedVersion, code: 'DDP_VERSION', reason: 'DDP version is not 1' };
    case 'BAD_RDMAP_VERSION':
      return { term: TERM.rdmapVersion, code: 'RDMAP_VERSION', reason: 'RDMAP version is not 1' };
    case 'BAD_OPCODE':
      return { term: TERM.badOpcode, code: 'OPCODE', reason: 'unknown RDMAP opcode' };
    case 'TRUNCATED':
      return { term: TERM.fpduStart, code: 'DDP_TRUNCATED', reason: 'ULPDU shorter than its DDP header' };
    default:
      return { term: TERM.catastrophic, code: error, reason: `malformed segment: ${error}` };
  }
}

/** The Terminate is sabre's graceful close notice (TERM.peerClosed). */
export function isPeerClosed(t: TermCode): boolean {
  return t.layer === TERM.peerClosed.layer && t.etype === TERM.peerClosed.etype && t.ecode === TERM.peerClosed.ecode;
}

/** The requester's completion status for a Terminate it received. */
export function statusForTerm(t: TermCode): WcStatusValue {
  if (t.layer === TermLayer.Rdmap) {
    if (t.etype === R.etype.RemoteProtection) return WcStatus.RemAccessErr;
    if (t.etype === R.etype.RemoteOperation) return WcStatus.RemInvReqErr;
    return WcStatus.RemOpErr;
  }
  if (t.layer === TermLayer.Ddp) {
    if (t.etype === D.etype.TaggedBuffer) return WcStatus.RemAccessErr;
    if (t.etype === D.etype.UntaggedBuffer) return WcStatus.RemInvReqErr;
    return WcStatus.RemOpErr;
  }
  return WcStatus.GeneralErr;
}
