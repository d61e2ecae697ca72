// Node allocates a fresh 64 KiB buffer for every socket read. node:dgram then copies each
// datagram into a second, exact-size buffer that V8 zero-fills (UDPWrap::OnRecv); node:net
// shrinks its buffer in place. Those buffers are freed only when V8 collects them, so tens of
// MiB pile up between collections, and glibc's default trim threshold (128 KiB) hands the freed
// heap top back to the kernel after each collection, to be page-faulted in again by the next
// reads. Measured on a udp file-service put of 512 MiB (2026-11-26): 49 884 minor faults in the
// server, 6 per 64 KB datagram, with the zero-fill that touches them a third of its main
// thread; after the call below 18 571 faults and 34% less server CPU.
//
// glibc raises its thresholds itself once a process frees a large mmap'd block (its "dynamic
// mmap threshold": mmap threshold = that block's size, at most 32 MiB; trim threshold = twice
// it), which many processes do sooner or later by chance. We make it happen once, when the
// first udp or tcp link opens: a 10 Mi-character string written to the null device goes
// through one 30 MiB malloc'd conversion buffer, freed before the write returns. The cost: up
// to 60 MiB of freed heap may stay mapped (resident) instead of going back to the kernel. On
// other allocators this is one harmless write.
import fs from 'node:fs';
import os from 'node:os';

let done = false;

/** Once per process: keep freed socket buffers mapped (see above). Never throws. */
export function keepFreedHeapMapped(): void {
  if (done) return;
  done = true;
  try {
    const fd = fs.openSync(os.devNull, 'w');
    try {
      fs.writeSync(fd, 'x'.repeat(10 << 20));
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // Only an optimisation.
  }
}
