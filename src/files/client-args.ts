// What FileClient checks before anything travels: positions, lengths and file handles a caller
// got wrong fail here, with ERR_INVALID_ARGUMENT, instead of reaching the server (which would
// answer a malformed request) or failing deep inside as a RangeError or TypeError.
import { constants } from 'node:buffer';
import { ErrorCode, SabreError } from '../core/errors.js';

/** The largest file position the wire carries exactly (an offset is a 64-bit field, JS numbers stop at 2^53). */
const MAX_POSITION = Number.MAX_SAFE_INTEGER;

const bad = (msg: string): SabreError => new SabreError(ErrorCode.InvalidArgument, msg);

/** What open() hands out (RemoteFile's shape; named here so this file needs nothing from the client). */
interface Handle {
  id: number;
  path: string;
}

export function checkFile(f: unknown, what: string): asserts f is Handle {
  if (!f || typeof f !== 'object' || typeof (f as Handle).id !== 'number' || typeof (f as Handle).path !== 'string') {
    throw bad(`${what} needs a file that open() returned${what === 'close' ? ' (to end the client itself, call end())' : ''}`);
  }
}

export function checkPosition(position: unknown, what: string): asserts position is number {
  if (typeof position !== 'number' || !Number.isInteger(position) || position < 0 || position > MAX_POSITION) {
    throw bad(`${what}: position must be an integer from 0 to ${MAX_POSITION}, not ${String(position)}`);
  }
}

/** A length a read can return as one Uint8Array (and its end still a position). */
export function checkReadLength(position: number, length: unknown, what: string): asserts length is number {
  if (typeof length !== 'number' || !Number.isInteger(length) || length < 0 || length > constants.MAX_LENGTH) {
    throw bad(`${what}: length must be an integer from 0 to ${constants.MAX_LENGTH} (the largest Uint8Array), not ${String(length)}`);
  }
  if (position + length > MAX_POSITION) throw bad(`${what}: position + length passes ${MAX_POSITION}`);
}

export function checkData(position: number, data: unknown, what: string): asserts data is Uint8Array {
  if (!(data instanceof Uint8Array)) throw bad(`${what}: data must be a Uint8Array`);
  if (position + data.length > MAX_POSITION) throw bad(`${what}: position + length passes ${MAX_POSITION}`);
}

/** A vectored call's pieces: an array, each at a valid position, then `each`'s own check. */
export function checkPieces<P extends { position: number }>(pieces: unknown, what: string, each: (p: P) => void): void {
  if (!Array.isArray(pieces)) throw bad(`${what}: pieces must be an array`);
  if (pieces.length === 0) throw bad(`${what}: pieces must name at least one piece`);
  for (const p of pieces as P[]) {
    checkPosition(p?.position, what);
    each(p);
  }
}

/** A misused promise-returning call rejects (not throws): the checks of `fn`, as a rejection. */
export function refused(fn: () => void): Promise<never> | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    return Promise.reject(e);
  }
}
