// srd: what a receiver keeps of a message it refused for want of a posted receive — its ssn,
// nothing else. A sender whose RNR retries run out fails that message and the flow's later
// ones and starts again at ssn 1 in a new epoch (requester.ts srdFlowFailed, srd-epoch.ts),
// which drops whatever the flow holds; a refused message is forgotten all the same, and asked
// for again (RNR NAK) when its turn comes, and while the message the flow waits for is refused,
// every later one is refused too: the flow holds nothing of its sender's that the sender may
// give up on, and no receive stays claimed by a message that may never complete.
//
// What is kept is one range of ssns per flow, [askedLo, askedHi]: while a flow's turn is refused
// every later message that arrives is refused too, so the refused ssns run from the turn up to
// the highest seen. A message taken out of turn for another's receive (receives.ts) widens the
// same range, which may then also cover messages the flow holds: a turn whose message is held
// is not refused, and the part of the range below the turn is dropped as the turn moves on.
// Each ssn of the range is asked for (RNR NAK) in its turn; one the sender never sent is asked
// for and ignored (requester onRnr), and comes in its turn as any message. So a flow holds two
// numbers whatever a peer forges (forged ssns stretch its own range, and only cost its own flow
// RNR rounds), and nothing is charged to the QP's shared budget.
import { release } from './budget.js';
import type { EngineQp, Flow } from './state.js';

/** Drop what `flow` holds of message `ssn` (its receive goes back unclaimed) and note it as asked for. */
export function forget(qp: EngineQp, flow: Flow, ssn: number): void {
  trim(flow);
  const m = flow.pending.get(ssn);
  if (m) {
    if (m.recv) m.recv.claimed = false;
    m.recv = undefined;
    flow.pending.delete(ssn);
    release(qp, m);
  }
  if (flow.askedHi < flow.askedLo) {
    flow.askedLo = ssn;
    flow.askedHi = ssn;
  } else {
    if (ssn < flow.askedLo) flow.askedLo = ssn;
    if (ssn > flow.askedHi) flow.askedHi = ssn;
  }
  // Refused again after it was asked for: ask again.
  if (ssn === flow.askedNak) flow.askedNak = 0;
}

/** Message `ssn` found no receive: forget it — and, when it is the flow's turn, every message after it. */
export function refuse(qp: EngineQp, flow: Flow, ssn: number): void {
  forget(qp, flow, ssn);
  if (ssn !== flow.expected) return;
  for (const k of [...flow.pending.keys()]) if (k > ssn) forget(qp, flow, k);
}

/**
 * The flow's turn was refused: segments of later messages are refused too until it comes. A
 * turn held whole is not (it was taken out of turn, and the range grew over it); one held in
 * part is — its other segments were refused before it was the turn (forget), and come again
 * only when it is asked for: without that the flow waited for them for ever.
 */
export function turnRefused(flow: Flow): boolean {
  trim(flow);
  if (flow.askedLo > flow.expected || flow.expected > flow.askedHi) return false;
  const m = flow.pending.get(flow.expected);
  return m === undefined || !(m.seen && m.got === m.msgLen);
}

/** What of the range lies below the turn was taken in: it goes (the range empties once the turn passes it). */
function trim(flow: Flow): void {
  if (flow.askedHi < flow.askedLo || flow.askedLo >= flow.expected) return;
  if (flow.askedHi < flow.expected) flow.clearAsked();
  else flow.askedLo = flow.expected;
}

/** A segment of message `ssn` is taken: it is no longer asked for (the range starts above it). */
export function taken(flow: Flow, ssn: number): void {
  if (ssn !== flow.askedLo) return;
  flow.askedLo = ssn + 1;
  if (flow.askedLo > flow.askedHi) flow.clearAsked();
}

/** The ssn to ask for again now (the flow's refused turn, once per refusal), or undefined. */
export function askNow(flow: Flow): number | undefined {
  if (!turnRefused(flow) || flow.askedNak === flow.expected) return undefined;
  flow.askedNak = flow.expected;
  return flow.expected;
}
