// Which posted receive an incoming untagged message takes (arrival places into it, the responder
// completes it).
import type { EngineQp, InMessage, RecvWork } from './state.js';

/**
 * The receive message `m` takes: rc, the one its MSN names (null: one already consumed — the
 * peer's MSN is out of range); srd, the first unclaimed one. undefined: not posted yet.
 */
export function recvFor(qp: EngineQp, m: InMessage): RecvWork | undefined | null {
  if (m.recv) return m.recv;
  if (qp.type === 'rc') {
    const idx = m.msn - 1 - qp.rqConsumed;
    if (idx < 0) return null;
    return qp.rq.at(idx);
  }
  const r = qp.rq.find((x) => !x.claimed);
  if (r) {
    r.claimed = true;
    m.recv = r;
  }
  return r;
}
