// What a completion looks like to a person and to a promise: util.inspect prints status and
// opcode by name (WorkCompletion { wrId: 7, status: Success, opcode: RdmaWrite, … }), and a
// promise helper (qp.write …) rejects with a WorkRequestError carrying the status.
import { inspect } from 'node:util';
import { wcOpcodeName, wcStatusName, type WcStatusValue } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { WorkCompletion } from '../core/work.js';

/**
 * A completion as the CQ hands it out: the engine's record copied into this class (cheaper
 * than setting the prototype of the engine's object, which cost several times more a completion),
 * whose only addition is util.inspect by name. Own properties — and so equality checks and
 * JSON — are the WorkCompletion's.
 */
export class Wc implements WorkCompletion {
  wrId: WorkCompletion['wrId'];
  status: WorkCompletion['status'];
  opcode: WorkCompletion['opcode'];
  byteLen: number;
  imm?: number;
  qpn: number;
  srcQpn?: number;
  /** The CM QP's receive completions carry the source address (SourcedCompletion). */
  src?: unknown;
  constructor(w: WorkCompletion & { src?: unknown }) {
    this.wrId = w.wrId;
    this.status = w.status;
    this.opcode = w.opcode;
    this.byteLen = w.byteLen;
    if (w.imm !== undefined) this.imm = w.imm;
    this.qpn = w.qpn;
    if (w.srcQpn !== undefined) this.srcQpn = w.srcQpn;
    if (w.src !== undefined) this.src = w.src;
  }

  [inspect.custom](_depth: number, options: object): string {
    const o = options as Parameters<typeof inspect>[1];
    const parts = [`wrId: ${inspect(this.wrId, o)}`, `status: ${wcStatusName(this.status)}`, `opcode: ${wcOpcodeName(this.opcode)}`, `byteLen: ${this.byteLen}`];
    if (this.imm !== undefined) parts.push(`imm: ${this.imm}`);
    parts.push(`qpn: ${this.qpn}`);
    if (this.srcQpn !== undefined) parts.push(`srcQpn: ${this.srcQpn}`);
    if (this.src !== undefined) parts.push(`src: ${inspect(this.src, o)}`);
    return `WorkCompletion { ${parts.join(', ')} }`;
  }
}

/** A work request of a promise helper completed with an error status (or was flushed by a close). */
export class WorkRequestError extends SabreError {
  readonly status: WcStatusValue;
  readonly wc: WorkCompletion;
  constructor(wc: WorkCompletion, closed: boolean) {
    // A promise helper's wrId is internal (above 2^64): name the operation instead.
    const what = isPromiseWrId(wc.wrId) ? `${wcOpcodeName(wc.opcode)} on QP ${wc.qpn}` : `work request ${String(wc.wrId)}`;
    super(closed ? ErrorCode.Closed : ErrorCode.WrFailed, `${what} completed with ${wcStatusName(wc.status)}${closed ? ' (device closed)' : ''}`);
    this.name = 'WorkRequestError';
    this.status = wc.status;
    this.wc = wc;
  }
}

/** wrIds of promise helpers: above 2^64, so they never meet an application's u64 wrIds. */
const PROMISE_WR_BASE = 1n << 64n;
let promiseWrNext = PROMISE_WR_BASE;
export const nextPromiseWrId = (): bigint => promiseWrNext++;
export const isPromiseWrId = (id: unknown): id is bigint => typeof id === 'bigint' && id >= PROMISE_WR_BASE;
