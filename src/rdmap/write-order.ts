// "A later write to the same bytes wins" on a link that reorders segments (udp). The requester
// does not hold a write back behind an earlier unfinished write to the same bytes (requester.ts,
// the rc fence), so a segment of an earlier write can arrive after a later write placed bytes it
// covers: a loss repaired late, or a datagram overtaken. Such a late segment is placed only
// where no later write of the flow has placed; the bytes it skips count as arrived (the later
// write's bytes are the ones the sender's order leaves there). Writes are compared within one
// STag: a region over external memory has TOs of its own, and clipping across two regions
// could lose bytes.
//
// Cost: nothing on the in-order path (arrival.ts sends a segment here only when a Write of its
// flow with a higher ssn is pending: Flow.writes.maxSsn). A late segment flushes the placement
// batch first (the later writes' segments in it are then placed and in their `offs`) and visits
// only the pending Writes of its STag whose extent meets its bytes (Flow.writes indexes them by
// TO: ./write-index.ts): a peer that parks k Writes high in the ssn window makes each lower
// segment cost a flush, O(log k) and the parked Writes it overlaps — not k visits.
import type { SegFrame } from '../core/frame.js';
import { flushPlacement, placeTagged, placeTaggedPieces } from './placement.js';
import type { EngineQp, EngineState, Flow, InMessage } from './state.js';
import { PendingWrites } from './write-index.js';

/** Write `m` of rc flow `flow` named its STag and TO (its first tagged segment): index it. */
export function noteWrite(flow: Flow, m: InMessage): void {
  (flow.writes ??= new PendingWrites()).add(m, m.stag, m.toBase, m.msgLen >= 0 ? m.msgLen : Infinity);
}

/** Write `m` completed: out of the index (an idle flow keeps none: thousands of idle flows at scale). */
export function forgetWrite(flow: Flow, m: InMessage): void {
  const ws = flow.writes;
  // Indexed: a Write whose first tagged segment named its TO (noteWrite); nothing else is.
  if (ws === undefined || m.toBase < 0) return;
  ws.remove(m);
  if (ws.size === 0) flow.writes = undefined;
}

/** Place a tagged segment of Write `m`, [to, to + plen) in TO space, around later writes' bytes. */
export function placeWriteAfter(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, f: SegFrame, stag: number, to: number, plen: number, access: number): void {
  flushPlacement(e);
  const end = to + plen;
  const taken: number[] = [];
  flow.writes!.overlapping(stag, to, end, (p) => {
    if (p.ssn <= m.ssn || p.fail || flow.pending.get(p.ssn) !== p) return;
    const base = p.toBase;
    const limit = p.msgLen >= 0 ? p.msgLen : Infinity;
    p.offs.forEach((s, t) => {
      s = Math.max(base + s, to);
      t = Math.min(base + Math.min(t, limit), end);
      if (s < t) taken.push(s, t);
    });
  });
  if (taken.length === 0) return placeTagged(e, qp, flow, m, f, stag, to, plen, access);
  e.counters.lateWrites++;
  placeTaggedPieces(e, qp, flow, m, f, stag, to, plen, access, uncovered(taken, to, end));
}

/** [to, end) less the union of `taken` ([s, t, …] within it, any order): [s, t, …] sorted. */
function uncovered(taken: number[], to: number, end: number): number[] {
  const spans: [number, number][] = [];
  for (let i = 0; i < taken.length; i += 2) spans.push([taken[i]!, taken[i + 1]!]);
  spans.sort((a, b) => a[0] - b[0]);
  const out: number[] = [];
  let at = to;
  for (const [s, t] of spans) {
    if (s > at) out.push(at, s);
    if (t > at) at = t;
  }
  if (at < end) out.push(at, end);
  return out;
}
