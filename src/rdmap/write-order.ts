// "A later write to the same bytes wins" on a link that reorders segments (udp). The requester
// does not hold a write back behind an earlier unfinished write to the same bytes (requester.ts,
// the rc fence), so a segment of an earlier write can arrive after a later write placed bytes it
// covers: a loss repaired late, or a datagram overtaken. Such a late segment is placed only
// where no later write of the flow has placed, or is about to place in this step's batch; the
// bytes it skips count as arrived (the later write's bytes are the ones the sender's order
// leaves there). Writes are compared within one STag: two regions over the same bytes are two
// address spaces as far as the peer's TOs go, and clipping across them could lose bytes.
//
// Cost: nothing on the in-order path (arrival.ts sends a segment here only when a later message
// of its flow was seen); a late one scans the flow's later pending messages and the batch.
import type { SegFrame } from '../core/frame.js';
import { placeTagged, placeTaggedPieces } from './placement.js';
import type { EngineQp, EngineState, Flow, InMessage } from './state.js';

/** Place a tagged segment of Write `m`, [to, to + plen) in TO space, around later writes' bytes. */
export function placeWriteAfter(e: EngineState, qp: EngineQp, flow: Flow, m: InMessage, f: SegFrame, stag: number, to: number, plen: number, access: number): void {
  const end = to + plen;
  const taken: number[] = [];
  const clip = (s: number, t: number): void => {
    if (s < to) s = to;
    if (t > end) t = end;
    if (s < t) taken.push(s, t);
  };
  for (const p of flow.pending.values()) {
    if (p.ssn <= m.ssn || p.toBase < 0 || p.stag !== stag || p.fail) continue;
    const base = p.toBase;
    const limit = p.msgLen >= 0 ? p.msgLen : Infinity;
    p.offs.forEach((s, t) => clip(base + s, base + Math.min(t, limit)));
  }
  // This step's batch: placed in order, so a later write's descriptor here goes before ours.
  for (const d of e.descs) {
    const p = d.seg.m;
    if (d.seg.flow === flow && p.ssn > m.ssn && p.toBase >= 0 && d.stag === stag) clip(d.to, d.to + d.len);
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
