// A NIC thread (a worker_threads Worker): opens the device's memory and link here, runs the
// driver on this thread's event loop, and serves the application's thread (./thread-nic.ts).
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { markMailboxGone } from './mailbox.js';
import { openInline } from './open.js';
import { providerFor } from './providers.js';
import { attachShared, serveArenas } from './thread-arena.js';
import { NicThread } from './thread-nic.js';
import { type NicReady, type NicThreadInit, toWireError } from './thread-proto.js';

const init = workerData as NicThreadInit & { buffers: MessagePort };
const up = parentPort!;
// However this thread ends (closed, or an uncaught error), a call the application's thread is
// blocked in fails now rather than at its deadline: that thread cannot see this thread's 'exit'
// event while it blocks.
process.on('exit', () => markMailboxGone(init.mailbox));

// A function, not top-level await: the linked form of this script is CommonJS (scripts/link.mjs).
async function main(): Promise<void> {
  const provider = providerFor(init.transport);
  // The data-plane workers of the inline mode are not started under a NIC thread.
  const shared = init.attach ? await attachShared(init.attach) : undefined;
  const port = await openInline(provider, { ...init.opts, transport: init.transport, workers: 0 }, init.limits, shared);
  // The first of several threads: served until it closes (the others have closed by then).
  const stopArenas = init.arenas ? serveArenas(port.memory.dm, init.arenas) : undefined;
  // Closed by the application's 'close' request (thread-nic.ts): the ports go, the thread ends.
  new NicThread(port, init, init.buffers, (m) => up.postMessage(m), () => {
    stopArenas?.();
    init.buffers.close();
    up.close();
  });
  const link = port.link;
  const ready: NicReady = {
    kind: 'ready', memory: port.memory.dm.memory, module: port.memory.dm.module, map: { ...port.memory.dm.map }, maximumBytes: port.memory.dm.maximumBytes, address: { ...port.address }, mss: port.mss, maxControl: port.maxControl,
    bounds: { ...port.bounds }, linkServices: port.linkServices,
    ...(link.mtu !== undefined ? { mtu: link.mtu } : {}), ...(link.integrity !== undefined ? { integrity: link.integrity } : {}),
  };
  up.postMessage(ready);
}

main().catch((e: unknown) => {
  up.postMessage({ kind: 'failed', error: toWireError(e) } satisfies NicReady);
  init.buffers.close();
  up.close();
});
