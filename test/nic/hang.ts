// A NIC thread that hangs (./hang-nic.mjs): devices opened through openHangable() can have a
// NIC thread's event loop blocked, as a thread stuck in a loop, and released again.
import { type Device, type OpenDeviceOptions, openDevice } from '../../src/index.js';
import type { MultiPort } from '../../src/nic/multi-port.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';

const HOOK = `--import=${new URL('./hang-nic.mjs', import.meta.url).href}`;

/** The device's NIC threads, first first. */
export function nicThreads(dev: Device): readonly ThreadPort[] {
  const nic = dev.nic as unknown as ThreadPort | MultiPort;
  return 'threads' in nic ? nic.threads : [nic];
}

/** A device whose NIC threads load the hang hook (the NIC thread inherits this process's flags). */
export async function openHangable(opts: OpenDeviceOptions): Promise<Device> {
  process.execArgv.push(HOOK);
  try {
    return await openDevice(opts);
  } finally {
    process.execArgv.splice(process.execArgv.indexOf(HOOK), 1);
  }
}

/** Block NIC thread `t`'s event loop; resolves once it is blocked, with the call that releases it. */
export async function hang(t: ThreadPort): Promise<() => void> {
  const words = new Int32Array(new SharedArrayBuffer(8));
  const bc = new BroadcastChannel('sabre-test-hang-nic');
  bc.postMessage({ threadId: t.worker.threadId, release: words.buffer });
  bc.close();
  for (let i = 0; i < 1000 && Atomics.load(words, 1) === 0; i++) await new Promise((r) => setTimeout(r, 5));
  if (Atomics.load(words, 1) === 0) throw new Error('the NIC thread did not take the hang (is the hook loaded?)');
  return () => {
    Atomics.store(words, 0, 1);
    Atomics.notify(words, 0);
  };
}
