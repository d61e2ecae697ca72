// What a campaign returns and prints, and the refusal counters it sums (dev.stats()).

export interface CampaignOptions {
  inputs: number;
  seed: number;
  /** Progress lines (rate, stats) go here. */
  log?: (line: string) => void;
  /** Print progress every this many inputs (default inputs / 10). */
  progressEvery?: number;
  /** Where a failure's last inputs are written (default fuzz-failures/). */
  failDir?: string;
  /** Heap growth allowed over the post-warm-up baseline (heapUsed + arrayBuffers after GC). */
  heapBoundBytes?: number;
  /** Which attackers take part (default all of the transport's). */
  roles?: string[];
  /** udp: the integrity the victim and its peer ask for (default: the seed picks, odd xxh3, even crc32c). */
  integrity?: 'xxh3' | 'crc32c';
}

export interface CampaignResult {
  transport: 'udp' | 'tcp';
  seed: number;
  /** udp: the integrity the victim's real connection settled. */
  integrity?: string;
  inputs: number;
  seconds: number;
  rate: number;
  byRole: Record<string, number>;
  byClass: Record<string, number>;
  rounds: number;
  transferBytes: number;
  qpState: string;
  /** Inputs whose every field the device must refuse, and how many the refusal counters moved. */
  refusedSent: number;
  refusalsDelta: number;
  /** Datagrams / bytes sent that the device never read (kernel buffer overflow): the slack of the refusal check. */
  lostInKernel: number;
  counters: Record<string, number>;
  tables: Record<string, number>;
  maxStallMs: number;
  maxLateMs: number;
  loopDelay: { p99: number; max: number };
  heapBase: number;
  heapMax: number;
  heapEnd: number;
  failures: string[];
  savedTo?: string;
  extra: Record<string, number>;
  /** The real peer's counters that moved (what reached it through the victim and the path). */
  peerCounters?: Record<string, number>;
}

export const DEFAULT_HEAP_BOUND = 64 * 1024 * 1024;

/** Sum of the named counters of a flat or nested stats object. */
export function sumOf(stats: Record<string, unknown>, keys: readonly string[]): number {
  let n = 0;
  for (const k of keys) {
    const v = stats[k];
    if (typeof v === 'number') n += v;
  }
  return n;
}

export function delta(after: Record<string, number>, before: Record<string, number>, keys: readonly string[]): Record<string, number> {
  const d: Record<string, number> = {};
  for (const k of keys) {
    const x = (after[k] ?? 0) - (before[k] ?? 0);
    if (x !== 0) d[k] = x;
  }
  return d;
}

export function top(m: Map<string, number>, n = 40): Record<string, number> {
  return Object.fromEntries([...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n));
}

export function mib(b: number): string {
  return `${(b / 1048576).toFixed(1)} MiB`;
}

export function summary(r: CampaignResult): string {
  return [
    `${r.transport} seed ${r.seed}${r.integrity ? ` (integrity ${r.integrity})` : ''}: ${r.inputs} inputs in ${r.seconds.toFixed(1)} s (${Math.round(r.rate)}/s); roles ${JSON.stringify(r.byRole)}`,
    `  transfer: ${r.rounds} rounds, ${r.transferBytes} bytes verified, QP ${r.qpState}`,
    `  refusals: ${r.refusalsDelta} counted for ${r.refusedSent} certainly-refused inputs (${r.lostInKernel} lost in the kernel)`,
    `  loop: max stall (own CPU) ${r.maxStallMs.toFixed(1)} ms, max lateness ${r.maxLateMs.toFixed(1)} ms, delay p99 ${r.loopDelay.p99.toFixed(1)} ms`,
    `  heap: base ${mib(r.heapBase)}, max ${mib(r.heapMax)}, end ${mib(r.heapEnd)}`,
    `  tables: ${JSON.stringify(r.tables)}`,
    `  counters moved: ${JSON.stringify(r.counters)}`,
    `  peer counters moved: ${JSON.stringify(r.peerCounters ?? {})}; extra ${JSON.stringify(r.extra)}`,
    r.failures.length ? `  FAILURES:\n    ${r.failures.join('\n    ')}${r.savedTo ? `\n  inputs saved to ${r.savedTo}` : ''}` : '  no failures',
  ].join('\n');
}
