// A forced, settled garbage collection for the memory benches: gc() whether or not node was
// started with --expose-gc (the flag is set at run time), run four times a turn apart so
// finalizers and the external memory they free have landed before a reading is taken.
import v8 from 'node:v8';
import vm from 'node:vm';

v8.setFlagsFromString('--expose-gc');
export const gc = globalThis.gc ?? vm.runInNewContext('gc');

export async function settle() {
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * settle() for this thread and, when `dev` runs its NIC on a thread of its own, for that
 * thread's heap too (an internal request of the device's port: the NIC thread collects when
 * --expose-gc is set, which importing this file does process-wide). Returns the NIC thread's
 * heap reading after the last collection ({ used, total, young, … }: thread-nic.ts), or
 * undefined for an inline device.
 */
export async function settleDevice(dev) {
  const nic = dev.workers > 0 && typeof dev.nic?.call === 'function' ? dev.nic : undefined;
  let reading;
  for (let i = 0; i < 4; i++) {
    gc();
    if (nic) reading = nic.call('heap', { gc: true });
    await new Promise((r) => setTimeout(r, 50));
  }
  return reading;
}

/** This thread's young generation, committed bytes (it grows with the allocation rate, not with what is held). */
export function youngBytes() {
  return v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
}
