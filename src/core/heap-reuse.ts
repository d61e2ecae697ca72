// Node allocates a fresh 64 KiB buffer for every socket read. node:dgram then copies each
// datagram into a second, exact-size buffer that V8 zero-fills (UDPWrap::OnRecv); node:net
// shrinks its buffer in place. Those buffers are freed only when V8 collects them, so tens of
// MiB pile up between collections, and glibc's default trim threshold (128 KiB) hands the freed
// heap top back to the kernel after each collection, to be page-faulted in again by the next
// reads. On a udp file-service put the server took several minor faults per 64 KB datagram,
// and the zero-fill that touches them was a large share of its main thread; raising the
// thresholds cut the faults and the server's CPU (measured in docs/benchmarks.md).
//
// glibc raises its thresholds itself once a process frees a large mmap'd block (its "dynamic
// mmap threshold": mmap threshold = that block's size, at most 32 MiB; trim threshold = twice
// it), which many processes do sooner or later by chance. We make it happen once a process has
// received 16 MiB through its links (short commands never pay): a worker thread writes a
// 10 Mi-character string to the null device, which goes through one 30 MiB malloc'd conversion
// buffer, freed before the write returns. The thresholds are process-wide, so the worker's free
// sets them for the main thread's reads too; the CPU it takes (the worker's start and 10 MiB
// of page faults) runs beside the event loop, which is blocked only briefly (the same write on
// the main thread blocked it far longer). The cost
// afterwards: up to 60 MiB of freed heap may stay mapped (resident) instead of going back to
// the kernel. On other allocators this is one harmless write.
import { Worker } from 'node:worker_threads';

const AFTER_BYTES = 16 << 20;
const RAISE = `const fs = require('node:fs'); const fd = fs.openSync(require('node:os').devNull, 'w');
try { fs.writeSync(fd, 'x'.repeat(10 << 20)); } finally { fs.closeSync(fd); }`;

let received = 0;
let raised: Promise<void> | undefined;

/** Raise the thresholds now (see above); resolves once they are. Once per process; never rejects. */
export function keepFreedHeapMapped(): Promise<void> {
  raised ??= new Promise<void>((resolve) => {
    try {
      // Not unref'd: a caller awaiting this keeps its process alive until it is done (a
      // process ending meanwhile waits for it). A failure only costs the optimisation.
      const w = new Worker(RAISE, { eval: true });
      w.on('error', () => resolve());
      w.on('exit', () => resolve());
    } catch {
      resolve();
    }
  });
  return raised;
}

/** A link received `n` bytes: past AFTER_BYTES in all, raise the thresholds. */
export function noteReceived(n: number): void {
  if (raised !== undefined) return;
  received += n;
  if (received >= AFTER_BYTES) void keepFreedHeapMapped();
}
