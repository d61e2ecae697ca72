// Draining a CQ the way perftest does: poll in batches, fail loudly on the first non-Success
// completion (a perf number from a run with errors is worthless).
import { WcStatus } from '../../index.js';
import type { PerfSide } from './side.js';

export interface Wc {
  wrId: number | bigint;
  status: number;
  opcode: number;
  byteLen: number;
  imm?: number;
  qpn: number;
}

const statusName = new Map<number, string>(Object.entries(WcStatus).map(([k, v]) => [v as number, k]));

export class CompletionError extends Error {
  constructor(wc: Wc) {
    super(`work request ${String(wc.wrId)} on QP ${wc.qpn} completed with ${statusName.get(wc.status) ?? wc.status}`);
  }
}

/** Wait for at least one completion and return everything the CQ holds (up to `max`). */
export async function reap(side: PerfSide, max = 256, timeoutMs = 30_000): Promise<Wc[]> {
  let wcs = side.cq.poll(max) as Wc[];
  while (wcs.length === 0) {
    await side.cq.wait(timeoutMs);
    wcs = side.cq.poll(max) as Wc[];
  }
  for (const wc of wcs) if (wc.status !== WcStatus.Success) throw new CompletionError(wc);
  return wcs;
}
