// Loaded into every NIC thread of a test that asks for it (test/nic/hang.ts: --import): told
// its thread id, the NIC thread hangs — its event loop blocked in Atomics.wait until released —
// as a NIC thread stuck in a loop would (it answers nothing, sends nothing).
import { isMainThread, threadId } from 'node:worker_threads';

if (!isMainThread) {
  const bc = new BroadcastChannel('sabre-test-hang-nic');
  bc.onmessage = (m) => {
    if (m.data.threadId !== threadId) return;
    const words = new Int32Array(m.data.release);
    // Word 1 says the thread is hung now; word 0 releases it.
    Atomics.store(words, 1, 1);
    Atomics.wait(words, 0, 0);
  };
  // Never what keeps the thread alive.
  bc.unref();
}
