// Which posted receive an incoming untagged message takes (arrival places into it, the responder
// completes it).
import { settle } from './budget.js';
import { Offsets } from './offsets.js';
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

/**
 * srd: a receive for `m`, the message its flow waits for next, taken from an out-of-order
 * message if none is free. Messages that arrive ahead of their turn take receives as they come;
 * without this, they can hold every posted receive while the one they wait behind found none:
 * each of its retries is refused (RNR) until the sender's flow fails, and the receives stay
 * held. The message robbed is the one furthest ahead of its flow's turn; it gives back what it
 * placed (nothing of it was completed or acknowledged) and is asked for again by an RNR NAK when
 * its turn comes. undefined: no receive is free and none is held out of turn.
 */
export function recvForExpected(qp: EngineQp, m: InMessage): RecvWork | undefined | null {
  const r = recvFor(qp, m);
  if (r !== undefined || qp.type !== 'srd') return r;
  let victim: InMessage | undefined;
  let lead = 0;
  for (const f of qp.flows.values()) {
    for (const p of f.pending.values()) {
      if (p === m || p.recv === undefined || p.ssn - f.expected <= lead) continue;
      lead = p.ssn - f.expected;
      victim = p;
    }
  }
  if (victim === undefined) return undefined;
  m.recv = victim.recv;
  victim.recv = undefined;
  victim.offs = new Offsets();
  victim.got = 0;
  victim.rnrArmed = true;
  settle(qp, victim);
  return m.recv;
}
