// One error type for API misuse and resource failures. `code` is a stable string that users
// and tests match on; messages may change, codes may not. Features' errors are SabreErrors too
// (the file service's FileError adds the wire status), so one instanceof catches them all. Protocol-level failures are not
// thrown: they become completion statuses (WcStatus) or counted drops.

export const ErrorCode = {
  /** An argument has the wrong type, range or shape. */
  InvalidArgument: 'ERR_INVALID_ARGUMENT',
  /** A queue (send, receive, CQ, ring) has no room for what was posted. */
  QueueFull: 'ERR_QUEUE_FULL',
  /** The object is in a state that does not allow the call (QP not connected, closed device …). */
  InvalidState: 'ERR_INVALID_STATE',
  /** Device memory (or a configured maximum) is exhausted. */
  NoMemory: 'ERR_NO_MEMORY',
  /** A local key or address does not name memory the caller registered with the needed access. */
  LocalProtection: 'ERR_LOCAL_PROTECTION',
  /** A capability limit from createQp / createCq / openDevice was exceeded. */
  LimitExceeded: 'ERR_LIMIT_EXCEEDED',
  /** An operation is not supported by this QP type or transport. */
  NotSupported: 'ERR_NOT_SUPPORTED',
  /** A wait or connect did not finish in time. */
  Timeout: 'ERR_TIMEOUT',
  /** The object was closed or destroyed. */
  Closed: 'ERR_CLOSED',
  /** A peer could not be reached or refused the connection. */
  Unreachable: 'ERR_UNREACHABLE',
  /** Malformed bytes where the API takes bytes (a codec result turned into an exception at an API edge). */
  Malformed: 'ERR_MALFORMED',
  /** A peer broke a protocol above verbs (a channel's grant, credit, epoch or sequence rules). */
  Protocol: 'ERR_PROTOCOL',
  /** The local address (host:port) to bind is in use; the system error is the `cause`. */
  AddressInUse: 'ERR_ADDRESS_IN_USE',
  /** The peer host answered but nothing listens at the port (ECONNREFUSED, as `cause`). */
  Refused: 'ERR_REFUSED',
  /** An AbortSignal given to the call aborted it; the signal's reason is the `cause`. */
  Aborted: 'ERR_ABORTED',
  /** A work request posted through a promise helper (qp.write …) completed with an error status. */
  WrFailed: 'ERR_WR_FAILED',
  /** sabre failed itself: a NIC thread threw something other than a SabreError while serving a call (a bug to report; the message names it). */
  Internal: 'ERR_INTERNAL',
} as const;

export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * The file service's codes (FileError, src/files/status.ts): 'ERR_FILE_' and the name of the
 * status the server sent (ERR_FILE_NOT_FOUND), or of a local failure (ERR_FILE_CONNECTION_LOST).
 * Stable like the codes above; they are a family of their own because the status table is.
 */
export type FileErrorCodeValue = `ERR_FILE_${string}`;

export class SabreError extends Error {
  readonly code: ErrorCodeValue | FileErrorCodeValue;
  constructor(code: ErrorCodeValue | FileErrorCodeValue, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SabreError';
    this.code = code;
  }
}

const LISTENER_BUSY = 'ListenerBusy';

/**
 * A listener refused a connect for want of room (its backlog full of connections the
 * application has not accepted yet), as a listening socket drops a SYN: the dialer tries again
 * within its deadline (cm connect), so this never reaches the application unless it dials a
 * service itself. The mark is the cause's name, which survives the NIC thread's boundary.
 */
export function listenerBusyError(message: string): SabreError {
  const cause = new Error('the listener\'s backlog is full');
  cause.name = LISTENER_BUSY;
  return new SabreError(ErrorCode.Unreachable, message, { cause });
}

export function isListenerBusy(e: unknown): boolean {
  return e instanceof SabreError && (e.cause as { name?: unknown } | undefined)?.name === LISTENER_BUSY;
}

const REFUSAL = 'ListenerRefusal';
const REJECTED = 'ListenerRejected';

/**
 * A listener's `setup` throws this to refuse a connect for a reason of its own: the REJ (udp,
 * inproc) or the MPA reject (tcp) carries `reason` verbatim, not 'cannot create a QP: …', so a
 * protocol above cm can give its refusals fixed texts that its dialers recognise
 * (rejectionReason). Keep it short: the wire cuts a reason at 200 characters.
 */
export function listenerRefusal(reason: string): SabreError {
  const cause = new Error(reason);
  cause.name = REFUSAL;
  return new SabreError(ErrorCode.LimitExceeded, reason, { cause });
}

/** The reason to send for `e`, thrown by a listener's setup, when it is a listenerRefusal. */
export function refusalReason(e: unknown): string | undefined {
  const c = e instanceof SabreError ? (e.cause as { name?: unknown; message?: unknown } | undefined) : undefined;
  return c?.name === REFUSAL && typeof c.message === 'string' ? c.message : undefined;
}

/**
 * The cause of the ERR_UNREACHABLE a dialer gets when a listener rejected its connect (not busy):
 * the listener's reason as it came, apart from the message around it. The mark is the cause's
 * name, which survives the NIC thread's boundary.
 */
export function rejectedCause(reason: string): Error {
  const cause = new Error(reason);
  cause.name = REJECTED;
  return cause;
}

/** The listener's reason, verbatim, when `e` is a connect a listener rejected; else undefined. */
export function rejectionReason(e: unknown): string | undefined {
  const c = e instanceof SabreError ? (e.cause as { name?: unknown; message?: unknown } | undefined) : undefined;
  return c?.name === REJECTED && typeof c.message === 'string' ? c.message : undefined;
}
