// What a failed MPA connection reports: the Terminate it sent or would send (a code of the one
// Terminate table, src/wire/terminate.ts) with a stable machine-readable name and a reason
// for logs and rejected promises.
import { ErrorCode, listenerBusyError, rejectedCause, SabreError } from '../../core/errors.js';
import type { TermCode } from '../../wire/terminate.js';

export interface TcpFault extends TermCode {
  /** Stable machine-readable name: 'CRC', 'MARKER', 'LENGTH', 'TRUNCATED', 'DDP_VERSION', … */
  code: string;
  reason: string;
  /** The system error behind a SOCKET fault (ECONNREFUSED, ENOTFOUND, …), for the API's `cause`. */
  cause?: Error;
  /** A REJECTED crossing connect: the rejecting peer's nonce (sabrePdCrossing), when it told it. */
  crossingNonce?: number;
}

export function fault(term: TermCode, code: string, reason: string, cause?: Error): TcpFault {
  return { layer: term.layer, etype: term.etype, ecode: term.ecode, code, reason, ...(cause ? { cause } : {}) };
}

/**
 * The API error for a connection that failed: ERR_REFUSED when nothing listens at the port
 * (ECONNREFUSED), ERR_NO_MEMORY when this device had no memory for it, ERR_UNREACHABLE
 * otherwise; the system error, if any, as `cause`.
 */
export function faultError(f: TcpFault, message: string): SabreError {
  if (f.code === 'BUSY') return listenerBusyError(message);
  if (f.code === 'NO_MEMORY') return new SabreError(ErrorCode.NoMemory, message, f.cause ? { cause: f.cause } : undefined);
  // A listener's reject: its reason as it came is the cause (rejectionReason), as on udp.
  if (f.code === 'REJECTED') return new SabreError(ErrorCode.Unreachable, message, { cause: rejectedCause(f.reason) });
  const refused = (f.cause as { code?: unknown } | undefined)?.code === 'ECONNREFUSED';
  return new SabreError(refused ? ErrorCode.Refused : ErrorCode.Unreachable, message, f.cause ? { cause: f.cause } : undefined);
}
