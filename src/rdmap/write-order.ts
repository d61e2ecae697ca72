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
// flow with a higher ssn is pending: Flow.writes, kept in ssn order). A late segment flushes the
// placement batch first (the later writes' segments in it are then placed and in their `offs`)
// and visits only the pending Writes above its own ssn: a peer that parks one Write high in the
// ssn window makes each lower segment cost a flush and one visit, not a scan of the batch.
import type { SegFrame } from '../core/frame.js';
import { flushPlacement, placeTagged, placeTaggedPieces } from './placement.js';
import type { EngineQp, EngineState, Flow, InMessage } from './state.js';

/** Write `m` of rc flow `flow` named its STag and TO (its first tagged segment): keep it in ssn order. */
export function noteWrite(flow: Flow, m: InMessage): void {
  const ws = (flow.writes ??= []);
  let i = ws.length;
  // Nearly always the newest: appended. A message that arrives late is put in its place.
  while (i > 0 && ws[i - 1]!.ssn > m.ssn) i--;
  if (i === ws.length) ws.push(m);
  else ws.splice(i, 0, m);
}

/** Place a tagged segment of Write `m`, [to, to + plen) in TO space, around later writes' bytes. */
export function placeWriteAfter(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, f: SegFrame, stag: number, to: number, plen: number, access: number): void {
  flushPlacement(e);
  const end = to + plen;
  const taken: number[] = [];
  const ws = flow.writes!;
  for (let i = ws.length - 1; i >= 0; i--) {
    const p = ws[i]!;
    if (p.ssn <= m.ssn) break;
    const base = p.toBase;
    const limit = p.msgLen >= 0 ? p.msgLen : Infinity;
    // Its whole extent first (two compares): most later writes are elsewhere.
    if (base >= end || base + limit <= to || p.stag !== stag || p.fail || flow.pending.get(p.ssn) !== p) continue;
    p.offs.forEach((s, t) => {
      s = Math.max(base + s, to);
      t = Math.min(base + Math.min(t, limit), end);
      if (s < t) taken.push(s, t);
    });
  }
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
