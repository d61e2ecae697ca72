// The authentication of a file-server connection, sans-I/O: what the core (./server-core.ts)
// decides about the one message an unauthenticated connection may send — refused (with the
// status its terminal StatusResponse carries, counted), or bound to its session with the
// answer it gets — and the bytes of that terminal StatusResponse.
import { FileFlag, FileOp, FileStatus } from '../wire/files-spec.js';
import { connectionServerProof } from './auth.js';
import { type Body, type FileHeader, decodeBody, encodeToBytes } from './messages.js';
import { authResponseFields } from './server-requests.js';
import type { Session, SessionTable } from './sessions.js';
import type { ServerCounters, ServerLimits } from './server-types.js';

export type AuthOutcome =
  | { ok: false; status: number; why: string }
  | { ok: true; session: Session; statusAddr: number; statusRkey: number; statusSlots: number; answer: Body };

/**
 * The first message of connection `conn` (header `hdr`, bytes `b`): an AuthenticateRequest whose
 * key, MAC and status area hold binds `conn` to its session (the answer: the AuthenticateResponse
 * with the limits `L` and the server's proof); anything else is refused, counted.
 */
export function authenticateFirst(hdr: FileHeader, b: Uint8Array, now: number, o: { sessions: SessionTable; counters: ServerCounters; limits: ServerLimits; conn: unknown }): AuthOutcome {
  const counters = o.counters;
  if (hdr.opcode !== FileOp.AuthenticateRequest) {
    counters.beforeAuth++;
    return { ok: false, status: FileStatus.NotAuthenticated, why: `${hdr.opcode} before authentication` };
  }
  const d = decodeBody(hdr, b);
  if (!d.ok || d.value.op !== FileOp.AuthenticateRequest) {
    counters.malformed++;
    counters.authFailed++;
    return { ok: false, status: FileStatus.Malformed, why: 'malformed AuthenticateRequest' };
  }
  const a = d.value;
  const r = o.sessions.authenticate(a, now);
  if (!r.ok) {
    counters.authFailed++;
    return { ok: false, status: r.status, why: r.why };
  }
  if (a.statusSlots === 0 || a.statusRkey === 0 && a.statusAddr === 0) {
    counters.authFailed++;
    return { ok: false, status: FileStatus.InvalidParameter, why: 'no status area' };
  }
  if (!o.sessions.bind(r.session, o.conn)) return { ok: false, status: FileStatus.SessionLimit, why: 'too many connections in this session' };
  counters.authenticated++;
  const { resp, params } = authResponseFields(o.limits);
  const mac = connectionServerProof(r.kAuth, a.nonce, params);
  return {
    ok: true, session: r.session, statusAddr: a.statusAddr, statusRkey: a.statusRkey, statusSlots: a.statusSlots,
    answer: { op: FileOp.AuthenticateResponse, ...resp, mac, params },
  };
}

/** A StatusResponse(`status`, Terminate): the last message of a connection, granting nothing; `aux`: an eviction's code (FILE_EVICTIONS). */
export function terminalStatus(status: number, aux = 0): Uint8Array {
  return encodeToBytes({ opcode: FileOp.StatusResponse, flags: FileFlag.Terminate, creditsRequested: 0, creditsGranted: 0, slot: 0, requestId: 0, info: 0 },
    { op: FileOp.StatusResponse, status, aux, value: 0 });
}
