// Draining a CQ the way perftest does: poll in batches, fail loudly on the first non-Success
// completion (a perf number from a run with errors is worthless). One loop per side routes
// each completion: receives to the side's responder duty, the rest to its active test.
import { SabreError, WcOpcode, WcStatus, wcStatusName } from '../../index.js';
import { publish } from '../../metrics/diagnostics.js';
import type { PerfSide } from './side.js';
import type { Wc } from './wc.js';

export class CompletionError extends Error {
  constructor(readonly wc: Wc) {
    super(`work request ${String(wc.wrId)} on QP ${wc.qpn} completed with ${wcStatusName(wc.status as never) ?? wc.status}`);
  }
}

export const isRecv = (wc: Wc) => wc.opcode === WcOpcode.Recv || wc.opcode === WcOpcode.RecvRdmaWithImm;

function check(side: PerfSide, wcs: Wc[]): Wc[] {
  for (const wc of wcs) {
    if (wc.status !== WcStatus.Success) {
      publish('sabre:perf:wc-error', () => ({ qpn: wc.qpn, wrId: String(wc.wrId), status: wcStatusName(wc.status as never), opcode: wc.opcode }));
      throw new CompletionError(wc);
    }
  }
  side.observe?.(wcs);
  return wcs;
}

/** Wait for at least one completion and return everything the CQ holds (up to `max`). */
export async function reap(side: PerfSide, max = 256, timeoutMs = 30_000): Promise<Wc[]> {
  let wcs = side.cq.poll(max) as Wc[];
  while (wcs.length === 0) {
    try {
      await side.cq.wait(timeoutMs);
    } catch (e) {
      if (e instanceof SabreError) throw new Error(`no completion in ${timeoutMs / 1000} s: the peer stopped answering`);
      throw e;
    }
    wcs = side.cq.poll(max) as Wc[];
  }
  return check(side, wcs);
}

/** What is there now, without waiting. */
export function pollNow(side: PerfSide, max = 256): Wc[] {
  return check(side, side.cq.poll(max) as Wc[]);
}

export interface Handlers {
  send?(wc: Wc, now: number): void;
  recv?(wc: Wc): void;
  /** After each batch (refill the send window once per batch, not once per completion). */
  batch?(): void;
}

/**
 * Route completions until `until()` holds. Waits in short slices so a condition set from
 * outside (the control channel's `finish`) is seen within `sliceMs`; the whole loop fails after
 * `idleMs` without a completion while `busy()` says work is outstanding.
 */
export async function pump(side: PerfSide, h: Handlers, until: () => boolean, busy: () => boolean = () => false, sliceMs = 20, idleMs = 30_000): Promise<void> {
  let idleSince = performance.now();
  while (!until()) {
    const wcs = side.cq.poll(256) as Wc[];
    if (wcs.length === 0) {
      try {
        await side.cq.wait(sliceMs);
      } catch (e) {
        if (!(e instanceof SabreError)) throw e;
        if (busy() && performance.now() - idleSince > idleMs) throw new Error(`no completion in ${idleMs / 1000} s: the peer stopped answering`);
      }
      continue;
    }
    check(side, wcs);
    const now = performance.now();
    idleSince = now;
    for (const wc of wcs) {
      if (isRecv(wc)) h.recv?.(wc);
      else h.send?.(wc, now);
    }
    h.batch?.();
  }
}
