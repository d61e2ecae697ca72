// The out-of-order budget of a QP (bounds.ts): what its pending messages are charged, checked
// before a segment is taken in and settled after.
import { MSG_BYTES, RANGE_BYTES } from './bounds.js';
import type { EngineQp, EngineState, Flow, InMessage } from './state.js';

/** Whether the QP can take `entries` more entries and `bytes` more bytes. */
export function hasRoom(e: EngineState, qp: EngineQp, entries: number, bytes: number): boolean {
  return qp.oooEntries + entries <= e.bounds.maxOooEntries && qp.oooBytes + bytes <= e.bounds.maxOooBytes;
}

/** What a new message record costs before any of its data is in. */
export const newMessageBytes = (hdrLen: number): number => MSG_BYTES + hdrLen;

/** Charge message `m` what it holds now (its ranges, header copy, control payload). */
export function settle(qp: EngineQp, m: InMessage): void {
  const extra = Math.max(0, m.offs.count - 1);
  const entries = 1 + extra;
  const bytes = MSG_BYTES + extra * RANGE_BYTES + (m.hdr?.length ?? 0) + (m.ctl?.length ?? 0);
  qp.oooEntries += entries - m.heldEntries;
  qp.oooBytes += bytes - m.held;
  m.heldEntries = entries;
  m.held = bytes;
}

/** Message `m` left its flow (completed, or the flow forgotten). */
export function release(qp: EngineQp, m: InMessage): void {
  if (qp.recvHolders.size > 0) qp.recvHolders.delete(m);
  qp.oooEntries -= m.heldEntries;
  qp.oooBytes -= m.held;
  m.heldEntries = 0;
  m.held = 0;
}

/** Every pending message of `flow` is dropped, and what it kept as asked for (srd-refusal.ts). */
export function releaseFlow(qp: EngineQp, flow: Flow): void {
  for (const m of flow.pending.values()) release(qp, m);
  flow.pending.clear();
  flow.clearAsked();
  flow.writes = undefined;
}
