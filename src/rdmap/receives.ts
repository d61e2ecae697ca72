// Which posted receive an incoming untagged message takes (arrival places into it, the responder
// completes it).
import { forget } from './srd-refusal.js';
import type { EngineQp, Flow, InMessage, RecvWork } from './state.js';

/**
 * The receive message `m` takes: rc, the one its MSN names (null: one already consumed — the
 * peer's MSN is out of range); srd, the first unclaimed one. undefined: not posted yet.
 * `flow`: m's, while m is pending in it (it is noted as holding the receive: recvForExpected).
 */
export function recvFor(qp: EngineQp, m: InMessage, flow?: Flow): RecvWork | undefined | null {
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
    if (flow) qp.ownRecvHolders().set(m, flow);
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
export function recvForExpected(qp: EngineQp, m: InMessage, flow: Flow): RecvWork | undefined | null {
  const r = recvFor(qp, m, flow);
  if (r !== undefined || qp.type !== 'srd') return r;
  // Only the messages that hold a receive are candidates: at most one per posted receive (a
  // number the application chose). This scanned every pending message of every flow, for
  // each segment of a turn finding no receive: a peer that parked maxOooEntries (4096) Writes
  // out of order bought that scan with every Send it then sent while receives were taken
  // (test/attack/srd-rob-scan: 20,000 such Sends with 16,000 Writes parked took ~19x as long as with none).
  let victim: InMessage | undefined;
  let from: Flow | undefined;
  let lead = 0;
  for (const [p, f] of qp.recvHolders) {
    // One that left its flow or its receive without release() (defensive): forgotten here.
    if (p.recv === undefined || f.pending.get(p.ssn) !== p) {
      qp.recvHolders.delete(p);
      continue;
    }
    if (p === m || p.ssn - f.expected <= lead) continue;
    lead = p.ssn - f.expected;
    victim = p;
    from = f;
  }
  if (victim === undefined) return undefined;
  const taken = victim.recv!;
  forget(qp, from!, victim.ssn);
  taken.claimed = true;
  m.recv = taken;
  qp.ownRecvHolders().set(m, flow);
  return taken;
}
