// The NIC thread's heap. node:dgram hands every datagram over in a Buffer of its own, whose
// bytes are external memory: at tens of thousands of 64 KiB datagrams a second the thread
// allocates hundreds of MB/s outside its heap. V8 counts external memory against a global
// limit derived from the old generation's, and a NIC thread's heap is small (~9 MB live), so
// that limit was hit every 30–50 ms: a full mark-compact each time, though the Buffers
// themselves die young and the scavenges free them. With the old generation's initial limit at
// 64 MiB (`--initial-old-space-size`, the knee: 48 did little, 128 no more) the thread ran no
// mark-compact in a 512 MiB stream, and the receiving NIC thread's CPU per GB fell by 35–45%
// (docs/benchmarks.md). The heap's size did not grow: the garbage is the external bytes, and
// the scavenges free those.
//
// V8 reads the flag when an isolate is created, and flags are per process: it is set just
// before a NIC thread's Worker is made and put back to its default (0: not configured) once
// every thread started under it is running, so isolates made later (the application's own
// workers) are not affected. A process started with the flag of its own keeps it untouched.
import v8 from 'node:v8';
import type { Worker } from 'node:worker_threads';

const NIC_OLD_SPACE_MB = 64;
const FLAG = '--initial-old-space-size';

/** Whether the process was started with its own initial old-space size (then left alone). */
function ownFlag(): boolean {
  const opts = `${process.execArgv.join(' ')} ${process.env['NODE_OPTIONS'] ?? ''}`;
  return opts.includes(FLAG) || opts.includes('--initial_old_space_size');
}

let starting = 0;

/** Make a NIC thread's Worker with the heap it needs (see the file comment). */
export function withNicHeap(make: () => Worker): Worker {
  if (ownFlag()) return make();
  if (starting++ === 0) v8.setFlagsFromString(`${FLAG}=${NIC_OLD_SPACE_MB}`);
  let w: Worker;
  try {
    w = make();
  } catch (e) {
    done();
    throw e;
  }
  // 'online': the thread runs, so its isolate (and heap) exist. A thread that fails first
  // ends with 'error' or 'exit' instead: each puts the flag back once.
  const settle = (): void => {
    w.off('online', settle).off('error', settle).off('exit', settle);
    done();
  };
  w.on('online', settle).on('error', settle).on('exit', settle);
  return w;
}

function done(): void {
  if (--starting === 0) v8.setFlagsFromString(`${FLAG}=0`);
}
