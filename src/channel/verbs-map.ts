// How the channel's shell (./channel.ts) speaks verbs: the access each kind of region is
// registered with, the error code each kind of failure becomes, what a completion's status
// means to the core, and the work requests the core's post actions become.
import { Access, Opcode, WcStatus, wcStatusName } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { QpDownCause } from '../core/link.js';
import type { WorkCompletion } from '../core/work.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { QueuePair } from '../verbs/qp.js';
import type { Action, FailKind, Outcome, RegionUse } from './ports.js';

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

const DOWN_SAYS: Record<Exclude<QpDownCause, 'closed'>, string> = { lost: 'the peer was lost', broken: 'the stream broke', refused: 'the connection was refused' };

/**
 * What a completion means to the core. `qp`: the completion's QP, whose downCause (why it went
 * to ERROR) is read for a flush: a QP whose link failed flushes its work too, and the QP's cause can come
 * after those completions (it is a separate event), so a flush alone does not say the peer
 * closed. Flushed by a link that failed (the peer lost — killed, reset, silent past the
 * keepalive — the stream broken, the connection refused) is the link's failure, as RetryExcErr
 * is (ERR_UNREACHABLE); flushed by the peer's close notice, or with no cause, a close (ERR_CLOSED).
 */
export function outcome(wc: WorkCompletion, qp?: { readonly downCause: QpDownCause | undefined }): Outcome {
  if (wc.status === WcStatus.Success) return { ok: true };
  const status = wcStatusName(wc.status);
  switch (wc.status) {
    case WcStatus.WrFlushErr: {
      const down = qp?.downCause;
      if (down !== undefined && down !== 'closed') return { ok: false, why: 'link', status: `${status}: ${DOWN_SAYS[down]}` };
      return { ok: false, why: 'flush', status };
    }
    case WcStatus.RemAccessErr:
    case WcStatus.RemInvReqErr:
    case WcStatus.RemOpErr:
      return { ok: false, why: 'remote', status };
    case WcStatus.RetryExcErr:
      return { ok: false, why: 'link', status };
    case WcStatus.RnrRetryExcErr:
      return { ok: false, why: 'rnr', status };
    case WcStatus.LocLenErr:
      return { ok: false, why: 'length', status };
    default:
      return { ok: false, why: 'local', status };
  }
}

/** Post one of the core's work-request actions on the QP (throws what verbs throws). */
export function postAction(qp: QueuePair, a: Extract<Action, { kind: 'recv' | 'send' | 'write' | 'read' }>): void {
  switch (a.kind) {
    case 'recv': {
      const wrs = [];
      for (let i = 0; i < a.n; i++) {
        const h = i === 0 ? a.hello : undefined;
        wrs.push(h ? { wrId: 0, sgList: [{ addr: h.region.addr + h.off, length: h.len, lkey: h.region.lkey }] } : { wrId: 0 });
      }
      qp.postRecv(wrs);
      return;
    }
    case 'send':
      (a.local.region as MemoryRegion).buffer.set(a.bytes, a.local.off);
      qp.postSend({ wrId: a.wrId, opcode: Opcode.Send, sgList: [{ addr: a.local.region.addr + a.local.off, length: a.local.len, lkey: a.local.region.lkey }] });
      return;
    case 'write': {
      const l = a.local;
      if (l && a.bytes) (l.region as MemoryRegion).buffer.set(a.bytes, l.off);
      qp.postSend({
        wrId: a.wrId, opcode: Opcode.RdmaWriteWithImm, imm: a.imm, remoteAddr: a.remoteAddr, rkey: a.rkey,
        sgList: l ? [{ addr: l.region.addr + l.off, length: l.len, lkey: l.region.lkey }] : [],
      });
      return;
    }
    case 'read':
      qp.postSend({
        wrId: a.wrId, opcode: Opcode.RdmaRead, remoteAddr: a.remoteAddr, rkey: a.rkey,
        sgList: [{ addr: a.local.region.addr + a.local.off, length: a.local.len, lkey: a.local.region.lkey }],
      });
      return;
  }
}
