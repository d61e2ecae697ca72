// What a failed MPA connection reports: the Terminate it sent or would send (a code of the one
// Terminate table, src/wire/terminate.ts) with a stable machine-readable name and a reason
// for logs and rejected promises.
import type { TermCode } from '../../wire/terminate.js';

export interface TcpFault extends TermCode {
  /** Stable machine-readable name: 'CRC', 'MARKER', 'LENGTH', 'TRUNCATED', 'DDP_VERSION', … */
  code: string;
  reason: string;
}

export function fault(term: TermCode, code: string, reason: string): TcpFault {
  return { layer: term.layer, etype: term.etype, ecode: term.ecode, code, reason };
}
