// Test helpers for devices of several NIC threads (src/nic/multi-port.ts).
import { type Device, openDevice } from '../../src/index.js';
import type { MultiPort } from '../../src/nic/multi-port.js';

/** Devices a test file opens (`open`), all closed by `closeAll` (its afterEach). */
export function deviceList(): { open(transport: 'udp' | 'tcp', workers: number): Promise<Device>; closeAll(): Promise<void> } {
  const devs: Device[] = [];
  return {
    async open(transport, workers) {
      const d = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
      devs.push(d);
      return d;
    },
    closeAll: async () => void (await Promise.all(devs.splice(0).map((d) => d.close()))),
  };
}

/** Bytes each NIC thread of `d` (a device of several) placed into its regions. */
export function placedPerThread(d: Device): number[] {
  return (d.nic as unknown as MultiPort).threads.map((t) => t.stats(0).counters.directBytes);
}
