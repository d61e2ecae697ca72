// With -D on a terminal: a status line while a size runs, redrawn every tick — the seconds run
// of the total and the rate over the last tick — so a long run shows that it is alive and how
// fast it goes now, not only the average the table prints at the end. Nothing when the
// Progress is off (stderr piped, --json).
import type { Progress } from '../progress.js';

export interface LiveRun {
  /** What runs: 'sabre perf write_bw: 65536 B'. */
  label: string;
  totalS: number;
  /** Operations completed so far (work completions, round trips). */
  count: () => number;
  /** The rate shown for `perSecond` operations a second. */
  rate: (perSecond: number) => string;
}

export interface Live {
  /** Redraws when a tick is due: for loops that keep the event loop's timers from running (inproc). */
  poke(): void;
  stop(): void;
}

/** Starts the line (redrawn from a timer, and from poke); the caller's Progress erases it. */
export function startLive(progress: Progress, run: LiveRun, intervalMs = 250, now: () => number = () => performance.now()): Live {
  if (!progress.enabled) return { poke: () => {}, stop: () => {} };
  const t0 = now();
  let lastT = t0;
  let lastN = run.count();
  const draw = (t: number) => {
    const n = run.count();
    const perS = ((n - lastN) * 1000) / Math.max(t - lastT, 1e-3);
    lastT = t;
    lastN = n;
    const el = Math.min((t - t0) / 1000, run.totalS);
    progress.update(`  ${run.label}  ${el.toFixed(1)} s of ${run.totalS} s  ${run.rate(perS)}`, true);
  };
  const poke = () => {
    const t = now();
    if (t - lastT >= intervalMs) draw(t);
  };
  const timer = setInterval(poke, intervalMs);
  return { poke, stop: () => clearInterval(timer) };
}

/** A `{ done }` counter (what runLatClient counts into) that pokes the line on each count. */
export class LiveCount {
  #done = 0;
  live: Live | undefined;
  get done(): number {
    return this.#done;
  }
  set done(n: number) {
    this.#done = n;
    this.live?.poke();
  }
}

/** Bandwidth tests: MiB/s (the table's unit) and messages a second. */
export const bwRate = (size: number) => (perS: number): string => `${((perS * size) / (1 << 20)).toFixed(2)} MiB/s  ${Math.round(perS)} msg/s`;

/** Latency tests: round trips (or reads, atomics) a second. */
export const latRate = (perS: number): string => `${Math.round(perS)} iterations/s`;
