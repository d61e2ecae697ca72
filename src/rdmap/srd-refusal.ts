// srd: what a receiver keeps of a message it refused for want of a posted receive — its ssn,
// nothing else. A sender whose RNR retries run out fails that message and the flow's later
// ones and starts again at ssn 1 (requester.ts srdFlowFailed); any state we kept of the old
// messages (a header, placed bytes) would meet the new ones under the same ssns and complete
// old bytes as new. So a refused message is forgotten and asked for again (RNR NAK) when its
// turn comes, and while the message the flow waits for is refused, every later one is refused
// too: the flow holds nothing of its sender's that the sender may give up on. A restart at ssn 1
// below a refused turn is then a new epoch, with nothing stale to meet.
//
// Each ssn kept is one entry of the QP's out-of-order budget (bounds.ts, ASKED_BYTES): a peer
// that sends later ssns while its turn is refused holds no more than the budget allows, and a
// later one past it is dropped and counted (arrival.ts). releaseFlow (budget.ts) gives them back.
import { ASKED_BYTES } from './bounds.js';
import { release } from './budget.js';
import type { EngineQp, Flow } from './state.js';

/** Drop what `flow` holds of message `ssn` (its receive goes back unclaimed) and note it as asked for. */
export function forget(qp: EngineQp, flow: Flow, ssn: number): void {
  const m = flow.pending.get(ssn);
  if (m) {
    if (m.recv) m.recv.claimed = false;
    m.recv = undefined;
    flow.pending.delete(ssn);
    release(qp, m);
  }
  const asked = (flow.asked ??= new Map());
  if (!asked.has(ssn)) {
    qp.oooEntries++;
    qp.oooBytes += ASKED_BYTES;
  }
  asked.set(ssn, false);
}

/** Message `ssn` found no receive: forget it — and, when it is the flow's turn, every message after it. */
export function refuse(qp: EngineQp, flow: Flow, ssn: number): void {
  forget(qp, flow, ssn);
  if (ssn !== flow.expected) return;
  for (const k of [...flow.pending.keys()]) if (k > ssn) forget(qp, flow, k);
}

/** The flow's turn was refused: segments of later messages are refused too until it comes. */
export function turnRefused(flow: Flow): boolean {
  return flow.asked !== undefined && flow.asked.has(flow.expected);
}

/** A segment of message `ssn` is taken: it is no longer asked for. */
export function taken(qp: EngineQp, flow: Flow, ssn: number): void {
  if (flow.asked?.delete(ssn)) {
    qp.oooEntries--;
    qp.oooBytes -= ASKED_BYTES;
  }
}

/** The ssn to ask for again now (the flow's refused turn, once per refusal), or undefined. */
export function askNow(flow: Flow): number | undefined {
  if (flow.asked?.get(flow.expected) !== false) return undefined;
  flow.asked.set(flow.expected, true);
  return flow.expected;
}
