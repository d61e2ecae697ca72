// Which posted receive an incoming untagged message takes (arrival places into it, the responder
// completes it).
import { forget } from './srd-refusal.js';
import type { EngineQp, Flow, InMessage, RecvWork } from './state.js';

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
 * without this they can hold every posted receive while the one they wait behind finds none,
 * and the flow never moves. The message robbed is the one furthest ahead of its flow's turn: it
 * is forgotten (nothing of it was completed or acknowledged) and asked for again by an RNR NAK
 * in its turn (srd-refusal.ts). undefined: no receive is free and none is held out of turn.
 */
export function recvForExpected(qp: EngineQp, m: InMessage): RecvWork | undefined | null {
  const r = recvFor(qp, m);
  if (r !== undefined || qp.type !== 'srd') return r;
  let victim: InMessage | undefined;
  let from: Flow | undefined;
  let lead = 0;
  for (const f of qp.flows.values()) {
    for (const p of f.pending.values()) {
      if (p === m || p.recv === undefined || p.ssn - f.expected <= lead) continue;
      lead = p.ssn - f.expected;
      victim = p;
      from = f;
    }
  }
  if (victim === undefined) return undefined;
  const taken = victim.recv!;
  forget(qp, from!, victim.ssn);
  taken.claimed = true;
  m.recv = taken;
  return taken;
}
