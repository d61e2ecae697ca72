// srd flow epochs. An srd flow (our QP and one peer QP, both directions) starts again at ssn 1
// after its work failed (RNR retries spent, a Terminate either way, the watchdog, the peer lost
// by the link). Each such start is a new epoch, carried mod 64 in every frame of the flow
// (udpEnv.flags.Epoch, docs/wire.md):
//
// - a frame of a newer epoch (1..31 ahead) means the peer started again: so does our end — its
//   unfinished work fails (WrFlushErr: the peer forgot it), the receives its messages claimed go
//   back, both directions count from ssn 1 in that epoch;
// - a segment of an older epoch is a copy from before a restart: dropped, and answered by an ack
//   in our epoch, so a peer still in the old one learns at once; an older ack or RNR NAK is
//   ignored — never applied to the new epoch's messages under the same ssns.
//
// Without epochs a restart was guessed from the ssn alone: after a sender gave up on a message
// that found no receive and started again, the new epoch's messages below the receiver's old
// turn were taken for copies and acknowledged, and the sender reported Success for Sends that
// were never delivered.
//
// A direction that idled (srdIdleMs: the peer may have evicted the flow) starts again at ssn 1
// in the same epoch, that direction alone (outIdle, inIdle below). A flow made by our own send
// starts in epoch 0; one made by a peer's segment takes the peer's. A flow idle both ways takes
// any epoch (its peer may have evicted it and made a new one, in epoch 0). A flow we restarted
// because the link lost its peer does not: a peer still alive may send its first message in
// epoch 0, ssn 1, while it holds what we sent before, and taking that as a new start would let
// its old state acknowledge our new epoch's messages; a peer that really started afresh is told
// our epoch by the ack that drops its first message, and its first Sends fail once (WrFlushErr).
// An epoch lasts at least a round trip (a restart follows an answer or a timeout), so a copy 32
// epochs old does not exist.
import { WcStatus, type WcStatusValue } from '../core/enums.js';
import type { Frame } from '../core/frame.js';
import { releaseFlow } from './budget.js';
import { finish } from './completion.js';
import type { EngineQp, EngineState, Flow, SendWork } from './state.js';

/** Epochs are carried mod 64 (the six bits of udpEnv.flags.Epoch). */
export const EPOCH_MASK = 63;
/** An epoch this far ahead of the flow's, or less, is newer; further, older. */
const NEWER = 31;

/** An outgoing frame of srd flow `flow` carries its epoch. */
export function stamp(flow: Flow, f: Frame): void {
  if (f.kind === 'seg') f.env.epoch = flow.epoch;
  else if (f.kind !== 'hello') f.epoch = flow.epoch;
}

/**
 * Our direction idle for srdIdleMs with nothing unanswered: the peer may have evicted the flow,
 * so our next message starts again at ssn 1, in the same epoch (requester.ts nextSsn); the peer,
 * its direction from us as idle (lastOut counts the last ack, which came after our last
 * segment arrived there), takes an ssn below its expected one as that start (inIdle).
 */
export function outIdle(e: EngineState, flow: Flow): boolean {
  return !flow.outstanding && e.now - flow.lastOut >= e.bounds.srdIdleMs;
}

/** The peer's direction idle for srdIdleMs with nothing of it held. */
function inIdle(e: EngineState, flow: Flow): boolean {
  return flow.pending.size === 0 && e.now - flow.lastSegIn >= e.bounds.srdIdleMs;
}

/** Both ways idle: the peer may have evicted the flow and made a new one, in epoch 0. */
const quiet = (e: EngineState, flow: Flow): boolean => outIdle(e, flow) && inIdle(e, flow);

/** What a frame's epoch means for its srd flow (epochCheck). */
export const Epoch = { Stale: 0, Same: 1, Restarted: 2 } as const;
export type EpochValue = (typeof Epoch)[keyof typeof Epoch];

/**
 * What a frame of epoch `epoch` (a segment: of message `ssn`) is to srd flow `flow` as it is
 * now. A newer epoch, or any on a quiet flow, restarts the flow in it first
 * (Restarted: the caller drains the send queue and pumps); Stale: a copy to drop.
 */
export function epochCheck(e: EngineState, qp: EngineQp, flow: Flow, epoch: number | undefined, ssn?: number): EpochValue {
  const x = (epoch ?? 0) & EPOCH_MASK;
  if (x === flow.epoch) {
    // The peer's direction started again at ssn 1 after idling (outIdle), or the peer evicted
    // the flow and made a new one in epoch 0: that direction alone starts again.
    if (ssn !== undefined && ssn < flow.expected && inIdle(e, flow)) {
      releaseFlow(qp, flow);
      flow.expected = 1;
      e.counters.srdEpochs++;
    }
    return Epoch.Same;
  }
  if (((x - flow.epoch) & EPOCH_MASK) > NEWER && !quiet(e, flow)) return Epoch.Stale;
  // The peer started again: what we sent it before is gone, what we have not sent yet goes in this epoch.
  restart(e, qp, flow, x, true);
  return Epoch.Restarted;
}

/**
 * Both directions of `flow` start again at ssn 1 in `epoch`: its unfinished work completes —
 * `failing` with `status`, the rest with `rest`; with `onlySent`, only what was sent, and work
 * not sent yet goes in the new epoch — what it held of the peer's messages goes (their
 * receives back to the queue), and what the peer asked of us (reads answered, the IRD) is
 * forgotten. The cost is the flow's own work in flight, never the send queue's length (a peer
 * can make restarts): work not sent yet that fails is failed when the queue reaches it
 * (`flushes`, requester.ts pump). The caller drains the send queue and pumps.
 */
export function restart(
  e: EngineState, qp: EngineQp, flow: Flow, epoch: number, onlySent: boolean,
  failing?: SendWork, status?: WcStatusValue, rest: WcStatusValue = WcStatus.WrFlushErr,
): void {
  for (const p of flow.pending.values()) if (p.recv) p.recv.claimed = false;
  releaseFlow(qp, flow);
  qp.rdAtomic = Math.max(0, qp.rdAtomic - flow.reads.size - flow.atomics.size);
  const fail = (w: SendWork | undefined): void => {
    if (w && !w.done) finish(w, w === failing && status !== undefined ? status : rest, 0);
  };
  fail(failing);
  for (const m of flow.inflight.values()) fail(m.wr);
  for (const w of flow.reads.values()) fail(w);
  for (const w of flow.atomics.values()) fail(w);
  if (!onlySent) {
    flow.flushes++;
    flow.flushStatus = rest;
  }
  flow.inflight.clear();
  flow.reads.clear();
  flow.atomics.clear();
  flow.epoch = epoch & EPOCH_MASK;
  outFromOne(flow);
  flow.readsIn = 0;
  flow.answerBytes = 0;
  flow.expected = 1;
  flow.needAck = false;
  e.counters.srdEpochs++;
}

/**
 * The watchdog found the peer silent while `flow` holds only answers to its reads and atomics
 * (no work of ours): they go, and the flow stays in its epoch. Starting a new one would fail
 * the peer's next, unrelated work when it speaks again (it would meet our new epoch). False:
 * work of ours is out, and the flow must start again.
 */
export function letAnswersGo(flow: Flow): boolean {
  if (flow.reads.size > 0 || flow.atomics.size > 0) return false;
  for (const m of flow.inflight.values()) if (m.wr) return false;
  flow.inflight.clear();
  flow.readsIn = 0;
  flow.answerBytes = 0;
  return true;
}

/** Our direction of `flow` counts from ssn 1 again (a restart; an idle direction: requester.ts nextSsn). */
export function outFromOne(flow: Flow): void {
  flow.nextSsn = 1;
  flow.acked = 0;
  flow.sendMsn = flow.reqMsn = flow.respMsn = flow.termMsn = 1;
}

/** The epoch after `flow`'s: ours starts it (a failure). */
export const nextEpoch = (flow: Flow): number => (flow.epoch + 1) & EPOCH_MASK;
