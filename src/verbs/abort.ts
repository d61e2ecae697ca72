// AbortSignal for the waits of the API (qp.connect, cq.wait, listener.accept, cm connect): one
// helper so every wait rejects the same way — SabreError ERR_ABORTED with the signal's reason
// as cause — and drops its listener when it settles otherwise (no listener leaks on a
// long-lived signal shared by many waits).
import { ErrorCode, SabreError } from '../core/errors.js';

export function abortError(signal: AbortSignal, what: string): SabreError {
  return new SabreError(ErrorCode.Aborted, `${what} aborted`, { cause: signal.reason });
}

export function checkSignal(signal: unknown, what: string): asserts signal is AbortSignal | undefined {
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new SabreError(ErrorCode.InvalidArgument, `${what}: signal must be an AbortSignal`);
}

/**
 * Run `onAbort` once if `signal` aborts before the returned disposer is called. Returns the
 * disposer (call it when the wait settles any other way). An already aborted signal calls
 * `onAbort` at once.
 */
export function onAbort(signal: AbortSignal | undefined, onAbort: () => void): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    onAbort();
    return () => {};
  }
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}
