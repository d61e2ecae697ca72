// Protocol errors: what the responder puts in a Terminate (RFC 5040 §4.8 layer / etype /
// ecode) and what status the requester's work request completes with when one arrives.
import { PlaceStatus } from '../dataplane/descriptors.js';
import { TERM_TABLES, TermLayer } from '../wire/spec.js';
import { WcStatus, type WcStatusValue } from '../core/enums.js';

export interface TermCode {
  layer: number;
  etype: number;
  ecode: number;
}

const R = TERM_TABLES.rdmap;
const D = TERM_TABLES.ddp;

export const Term = {
  invalidStag: { layer: TermLayer.Rdmap, etype: R.etype.RemoteProtection, ecode: R.ecode.InvalidStag },
  baseBounds: { layer: TermLayer.Rdmap, etype: R.etype.RemoteProtection, ecode: R.ecode.BaseBounds },
  accessRights: { layer: TermLayer.Rdmap, etype: R.etype.RemoteProtection, ecode: R.ecode.AccessRights },
  stagNotAssociated: { layer: TermLayer.Rdmap, etype: R.etype.RemoteProtection, ecode: R.ecode.StagNotAssociated },
  badOpcode: { layer: TermLayer.Rdmap, etype: R.etype.RemoteOperation, ecode: R.ecode.Opcode },
  /** Misaligned atomic, malformed request payload. */
  invalidRequest: { layer: TermLayer.Rdmap, etype: R.etype.RemoteOperation, ecode: R.ecode.Unspecified },
  catastrophic: { layer: TermLayer.Rdmap, etype: R.etype.Catastrophic, ecode: R.ecode.Unspecified },
  messageTooLong: { layer: TermLayer.Ddp, etype: D.etype.UntaggedBuffer, ecode: D.untaggedEcode.MessageTooLong },
  invalidMsn: { layer: TermLayer.Ddp, etype: D.etype.UntaggedBuffer, ecode: D.untaggedEcode.InvalidMsnRange },
  invalidQn: { layer: TermLayer.Ddp, etype: D.etype.UntaggedBuffer, ecode: D.untaggedEcode.InvalidQn },
  invalidMo: { layer: TermLayer.Ddp, etype: D.etype.UntaggedBuffer, ecode: D.untaggedEcode.InvalidMo },
} as const satisfies Record<string, TermCode>;

/** A failed tagged placement (kernel status) as the Terminate the requester will see. */
export function termForPlaceStatus(status: number): TermCode {
  switch (status) {
    case PlaceStatus.InvalidStag: return Term.invalidStag;
    case PlaceStatus.PdMismatch: return Term.stagNotAssociated;
    case PlaceStatus.Access: return Term.accessRights;
    case PlaceStatus.Bounds: return Term.baseBounds;
    default: return Term.catastrophic;
  }
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
