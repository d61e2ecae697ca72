// The NIC thread's heap. node:dgram hands every datagram over in a Buffer of its own, whose
// bytes are external memory: at tens of thousands of 64 KiB datagrams a second the thread
// allocates hundreds of MB/s outside its heap, and the Buffers die at once. V8 frees them when
// a scavenge sweeps the young generation, and scavenges come as the young generation fills —
// with V8's default young generation (16 MiB semi-spaces) and a receive path that allocates
// few JavaScript objects per datagram, tens of MB of dead Buffers piled up between two. V8
// counts them against a global limit derived from the small old generation (~9 MB live here),
// so a udp target's NIC thread started incremental marking and ran a full mark-compact every
// 30–50 ms of a 64 KiB write stream (~45 ms of CPU each, marking threads included).
//
// A 3 MiB young generation (1 MiB semi-spaces) scavenges often enough that the dead Buffers
// never reach that limit: no full collection in the stream, the receiving NIC thread's CPU per
// GB down by 35–40%, its process's peak RSS down ~20 MiB, and no change for tcp, for 64 B
// messages, or for idle channels' RSS (docs/benchmarks.md). A Worker's own resource limit, so
// the application's heap and its other workers are untouched. (Raising the old generation's
// initial limit to 64 MiB did as much for the CPU but cost ~1 KiB more RSS per idle channel,
// and it is a process-wide V8 flag.)
import { constants as perfConstants, PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';

export const NIC_RESOURCE_LIMITS = Object.freeze({ maxYoungGenerationSizeMb: 3 });

/** Full (mark-compact) collections this thread has run since its first heap reading (the file comment says why they matter). */
let majorGcs = 0;
let gcObserver: PerformanceObserver | undefined;

/**
 * This thread's V8 heap, for the memory benches (reached through the device's port, not public
 * API): with `gc`, a full collection first — only when the process allows one (the benches set
 * --expose-gc at run time, a process-wide flag a new context picks up); otherwise none is run
 * and `collected` says so, rather than the library changing V8's flags itself. `young`: the
 * young generation's committed bytes, which grow with the allocation rate, not with what is held.
 * `majorGcs`: full collections counted from the first reading on.
 */
export function heapReading(gc: boolean): { used: number; total: number; external: number; young: number; collected: boolean; majorGcs: number } {
  if (gcObserver === undefined) {
    gcObserver = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) if ((e as { detail?: { kind?: number } }).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) majorGcs++;
    });
    gcObserver.observe({ entryTypes: ['gc'] });
  }
  let collected = false;
  if (gc) {
    const fn = vm.runInNewContext('typeof gc === "function" ? gc : undefined') as (() => void) | undefined;
    if (fn) {
      fn();
      collected = true;
    }
  }
  const h = v8.getHeapStatistics();
  const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
  return { used: h.used_heap_size, total: h.total_heap_size, external: h.external_memory, young, collected, majorGcs };
}

