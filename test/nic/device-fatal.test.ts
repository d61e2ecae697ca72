// A NIC thread that ends on its own (a crash, a thread killed) is the NIC gone: the device
// raises 'device-fatal' (ibverbs' IBV_EVENT_DEVICE_FATAL) and closes — its waits, connects and
// completions settle with ERR_CLOSED at once — and the application's process goes on. Before,
// nothing listened to the thread: its error was thrown in the application, and every verbs call
// after it blocked for the mailbox's 5 s deadline.
import { describe, expect, it } from 'vitest';
import { Access, type DeviceEvent, openDevice } from '../../src/index.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';

describe('a NIC thread that ends on its own', () => {
  it.each(['udp', 'tcp'] as const)('%s: device-fatal, the device closes, a waiting cq.wait rejects ERR_CLOSED at once', { timeout: 30_000 }, async (transport) => {
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 1 });
    const events: DeviceEvent[] = [];
    dev.on('event', (ev: DeviceEvent) => events.push(ev));
    const pd = dev.allocPd();
    pd.regMr(4096, Access.LocalWrite);
    const cq = dev.createCq({ depth: 8 });
    const waiting = cq.wait(20_000).catch((e: unknown) => e);
    const t0 = performance.now();
    await (dev.nic as unknown as ThreadPort).worker.terminate();
    expect(await waiting).toMatchObject({ code: 'ERR_CLOSED' });
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(events.map((e) => e.type)).toEqual(['device-fatal']);
    expect(dev.closed).toBe(true);
    expect(() => pd.regMr(4096, Access.LocalWrite)).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }));
    await dev.close(); // again: resolves
  });
});
