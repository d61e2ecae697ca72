// How the channel's shell (./channel.ts) speaks verbs: the access each kind of region is
// registered with, the error code each kind of failure becomes, and what a completion's status
// means to the core.
import { Access, WcStatus, wcStatusName } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { WorkCompletion } from '../core/work.js';
import type { FailKind, Outcome, RegionUse } from './ports.js';

export const ACCESS: Record<RegionUse, number> = {
  fixed: Access.LocalWrite | Access.RemoteWrite,
  eager: Access.LocalWrite | Access.RemoteWrite,
  stage: Access.LocalWrite,
  sink: Access.LocalWrite,
  source: Access.RemoteRead,
};

export const CODE: Record<FailKind, SabreError['code']> = {
  protocol: ErrorCode.Protocol,
  timeout: ErrorCode.Timeout,
  memory: ErrorCode.NoMemory,
  closed: ErrorCode.Closed,
  link: ErrorCode.Unreachable,
  limit: ErrorCode.LimitExceeded,
  aborted: ErrorCode.Closed,
};

export function outcome(wc: WorkCompletion): Outcome {
  if (wc.status === WcStatus.Success) return { ok: true };
  const status = wcStatusName(wc.status);
  switch (wc.status) {
    case WcStatus.WrFlushErr:
      return { ok: false, why: 'flush', status };
    case WcStatus.RemAccessErr:
    case WcStatus.RemInvReqErr:
    case WcStatus.RemOpErr:
      return { ok: false, why: 'remote', status };
    case WcStatus.RetryExcErr:
      return { ok: false, why: 'link', status };
    case WcStatus.RnrRetryExcErr:
      return { ok: false, why: 'rnr', status };
    default:
      return { ok: false, why: 'local', status };
  }
}
