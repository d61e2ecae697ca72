// The cm's counters of one device, shown as dev.stats().cm the first time the cm touches that
// device (its CM agent on udp / inproc, a listener on any transport). What hostile or excess
// requests cost a listener leaves a trace there, not only in a listener's own `counters`.
import type { Device } from '../verbs/device.js';

/** What the CM agent's sans-I/O core counts itself (./core.ts): read, not copied. */
export interface CoreCounts {
  readonly dropped: number;
  readonly refusedNoListener: number;
}

export interface CmStats {
  /** Messages at the CM QP that did not parse, named nothing known, or carried an id or QPN no sabre sends. */
  dropped: number;
  /** REQs for a service nobody listens to on this device (REJ). */
  refusedNoListener: number;
  /** Requests refused because a listener's backlog was full, or it was closing (busy REJ / busy MPA reject). */
  refusedBusy: number;
  /** Requests whose QP was still connecting, closed for a newer request when a backlog filled (all listeners). */
  halfOpenEvicted: number;
  /** REQs seen again (same source, same id) while their first answer stands: answered with the same REP, no new QP. */
  repeatedRequests: number;
  /** A listener's handler threw on a request: it was rejected, and the CM kept serving. */
  handlerErrors: number;
  /** 1 once the CM agent's completion loop stopped on a device still open (its waiting and later requests fail with why). */
  stopped: number;
}

export class CmCounters {
  refusedBusy = 0;
  halfOpenEvicted = 0;
  repeatedRequests = 0;
  handlerErrors = 0;
  stopped = 0;
  /** Set by the CM agent (udp, inproc): its core's own counts. */
  core: CoreCounts | undefined;

  snapshot(): CmStats {
    return {
      dropped: this.core?.dropped ?? 0,
      refusedNoListener: this.core?.refusedNoListener ?? 0,
      refusedBusy: this.refusedBusy,
      halfOpenEvicted: this.halfOpenEvicted,
      repeatedRequests: this.repeatedRequests,
      handlerErrors: this.handlerErrors,
      stopped: this.stopped,
    };
  }
}

const tables = new WeakMap<Device, CmCounters>();

/** The cm's counters of `dev`, made (and shown in dev.stats() as `cm`) on first use. */
export function cmCounters(dev: Device): CmCounters {
  let c = tables.get(dev);
  if (!c) {
    const made = new CmCounters();
    dev.addStatsSource('cm', () => made.snapshot() as unknown as Record<string, unknown>);
    tables.set(dev, (c = made));
  }
  return c;
}
