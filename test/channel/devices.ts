// udp (or tcp) devices on 127.0.0.1 for the channel tests that need real ones, each closed after its test.
import { afterEach } from 'vitest';
import { type Channel, type Device, openDevice } from '../../src/index.js';

/** Call at a test file's top level: the returned opener's devices are closed after each test. */
export function udpDevices(transport: 'udp' | 'tcp' = 'udp'): () => Promise<Device> {
  const devs: Device[] = [];
  afterEach(async () => {
    for (const d of devs.splice(0)) await d.close();
  });
  return async () => {
    const d = await openDevice({ transport, host: '127.0.0.1', port: 0 });
    devs.push(d);
    return d;
  };
}

/**
 * Open a channel the listener will refuse and keep sending on it: resolves never, rejects with
 * the refusal. A send may complete before the refusal arrives (the peer's NIC took it while its
 * application had not yet refused), so one send alone proves nothing; bounded: 50 sends, 20 ms apart.
 */
export async function sendUntilRefused(open: () => Promise<Channel>, bytes: Uint8Array): Promise<void> {
  const c = await open();
  for (let i = 0; i < 50; i++) {
    await c.send(bytes);
    await new Promise((r) => setTimeout(r, 20));
  }
}
