// The pass criteria a live campaign checks while it runs, independent of the transport:
// - no uncaught exception or unhandled rejection in the process;
// - no event-loop stall over 50 ms of the process's own work: a 10 ms interval probe measures
//   each wake-up's lateness and the process CPU time spent meanwhile; a late wake-up counts as
//   a stall only when the CPU time covers it too (on this shared 2-vCPU machine the process is
//   also descheduled for hundreds of ms, which is not the device's doing: both maxima are
//   reported), less the V8 GC pauses inside it (reported apart: the heap bound judges memory);
// - a bounded heap: heapUsed + arrayBuffers sampled after a full GC, against a baseline taken
//   after warm-up; the bound is the campaign's (docs/fuzzing.md);
// - the last inputs kept in a ring, to be written out on failure with the seed and index.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export const STALL_MS = 50;

/**
 * CPU time of this thread (the event loop's), ms: Linux's schedstat for the main thread (its tid
 * is the pid), else the whole process's. The process's counts the NIC threads too: a busy NIC
 * thread and a main thread descheduled meanwhile read as a stall of the event loop.
 */
function mainThreadCpuMs(): number {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    const c = process.cpuUsage();
    return (c.user + c.system) / 1000;
  }
}

let gcFn: (() => void) | undefined;
/** A full GC (exposed at run time: vitest's workers do not start with --expose-gc). */
export function fullGc(): void {
  if (gcFn === undefined) {
    const g = (globalThis as { gc?: () => void }).gc;
    if (typeof g === 'function') gcFn = g;
    else {
      setFlagsFromString('--expose-gc');
      gcFn = runInNewContext('gc') as () => void;
    }
  }
  gcFn();
  gcFn();
}

export function heapBytes(): number {
  fullGc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

export class Monitor {
  readonly errors: string[] = [];
  /** Worst lateness of the probe (wall clock), and of those the process's CPU time covers. */
  maxLateMs = 0;
  maxStallMs = 0;
  stalls = 0;
  heapBase = 0;
  heapMax = 0;
  /** The input the campaign was at (it sets this), and where the worst stall happened. */
  index = 0;
  worstStall = { index: -1, atMs: 0, gcMs: 0 };
  /** Longest single GC pause seen (V8's own, reported by the gc performance entries). */
  maxGcMs = 0;
  #gcInInterval = 0;
  readonly #gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      this.#gcInInterval += e.duration;
      if (e.duration > this.maxGcMs) this.maxGcMs = e.duration;
    }
  });
  readonly #h = monitorEventLoopDelay({ resolution: 10 });
  #timer: NodeJS.Timeout | undefined;
  /** The next probe interval holds our own full GC (a heap sample): not the device's stall. */
  #skip = false;
  #onErr = (e: unknown): void => {
    this.errors.push(e instanceof Error ? `${e.name}: ${e.message}\n${e.stack ?? ''}` : String(e));
  };

  start(): void {
    process.on('uncaughtException', this.#onErr);
    process.on('unhandledRejection', this.#onErr);
    this.#h.enable();
    this.#gc.observe({ entryTypes: ['gc'] });
    const t0 = performance.now();
    let t = t0;
    let cpu = mainThreadCpuMs();
    this.#timer = setInterval(() => {
      const now = performance.now();
      const c = mainThreadCpuMs();
      const late = now - t - 10;
      const cpuMs = c - cpu;
      t = now;
      cpu = c;
      const gcMs = this.#gcInInterval;
      this.#gcInInterval = 0;
      if (this.#skip) {
        this.#skip = false;
        return;
      }
      if (late > this.maxLateMs) this.maxLateMs = late;
      // The main thread's CPU time (mainThreadCpuMs): V8's parallel GC helpers are not in it.
      // V8's GC pauses (wall clock, stretched by descheduling here) are reported on their own
      // (maxGcMs) and taken out: the heap bound is what judges memory.
      const own = Math.min(late, cpuMs - 10) - gcMs;
      if (own > this.maxStallMs) {
        this.maxStallMs = own;
        this.worstStall = { index: this.index, atMs: Math.round(now - t0), gcMs: Math.round(gcMs * 10) / 10 };
      }
      if (own > STALL_MS) this.stalls++;
    }, 10);
  }

  /**
   * Baseline heap, and the start of the stall watch: both after warm-up (opening devices,
   * connecting, the first verified round are not under attack).
   */
  baseline(): void {
    this.stalls = 0;
    this.maxStallMs = 0;
    this.maxLateMs = 0;
    this.maxGcMs = 0;
    this.worstStall = { index: -1, atMs: 0, gcMs: 0 };
    this.#h.reset();
    this.#skip = true;
    this.heapBase = heapBytes();
    this.heapMax = this.heapBase;
  }

  sampleHeap(): number {
    this.#skip = true;
    const h = heapBytes();
    if (h > this.heapMax) this.heapMax = h;
    return h;
  }

  /** p99 / max of the event-loop delay histogram, ms (wall clock, descheduling included). */
  loopDelay(): { p99: number; max: number } {
    return { p99: this.#h.percentile(99) / 1e6, max: this.#h.max / 1e6 };
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#h.disable();
    this.#gc.disconnect();
    process.off('uncaughtException', this.#onErr);
    process.off('unhandledRejection', this.#onErr);
  }
}

/** The last inputs sent, for the failure report. */
export class InputRing {
  readonly #items: { index: number; cls: string; role: string; bytes: Uint8Array }[] = [];
  constructor(readonly size = 256) {}
  push(index: number, role: string, cls: string, bytes: Uint8Array): void {
    if (this.#items.length >= this.size) this.#items.shift();
    this.#items.push({ index, role, cls, bytes });
  }
  /** Write the ring to dir/<transport>-seed<seed>-input<index>.json; returns the path. */
  save(dir: string, transport: string, seed: number, index: number, reason: string): string {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, `${transport}-seed${seed}-input${index}.json`);
    writeFileSync(path, JSON.stringify({
      transport, seed, index, reason,
      inputs: this.#items.map((x) => ({ index: x.index, role: x.role, cls: x.cls, hex: Buffer.from(x.bytes).toString('hex') })),
    }, null, 1));
    return path;
  }
}
