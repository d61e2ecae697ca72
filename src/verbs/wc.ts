// What a completion looks like to a person and to a promise: util.inspect prints status and
// opcode by name (WorkCompletion { wrId: 7, status: Success, opcode: RdmaWrite, … }), and a
// promise helper (qp.write …) rejects with a WorkRequestError carrying the status.
import { inspect } from 'node:util';
import { wcOpcodeName, wcStatusName, type WcStatusValue } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { WorkCompletion } from '../core/work.js';

/**
 * The prototype completions get as they enter a CQ: only a custom inspect (own properties,
 * JSON and equality checks are unchanged).
 */
export const WC_PROTO: object = Object.freeze(Object.create(Object.prototype, {
  [inspect.custom]: {
    value(this: WorkCompletion, _depth: number, options: object): string {
      const o = options as Parameters<typeof inspect>[1];
      const parts = [`wrId: ${inspect(this.wrId, o)}`, `status: ${wcStatusName(this.status)}`, `opcode: ${wcOpcodeName(this.opcode)}`, `byteLen: ${this.byteLen}`];
      if (this.imm !== undefined) parts.push(`imm: ${this.imm}`);
      parts.push(`qpn: ${this.qpn}`);
      if (this.srcQpn !== undefined) parts.push(`srcQpn: ${this.srcQpn}`);
      for (const k of Object.keys(this)) if (!['wrId', 'status', 'opcode', 'byteLen', 'imm', 'qpn', 'srcQpn'].includes(k)) parts.push(`${k}: ${inspect((this as unknown as Record<string, unknown>)[k], o)}`);
      return `WorkCompletion { ${parts.join(', ')} }`;
    },
  },
}));

/** A work request of a promise helper completed with an error status (or was flushed by a close). */
export class WorkRequestError extends SabreError {
  readonly status: WcStatusValue;
  readonly wc: WorkCompletion;
  constructor(wc: WorkCompletion, closed: boolean) {
    super(closed ? ErrorCode.Closed : ErrorCode.WrFailed, `work request ${String(wc.wrId)} completed with ${wcStatusName(wc.status)}${closed ? ' (device closed)' : ''}`);
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
