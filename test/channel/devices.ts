// udp devices on 127.0.0.1 for the channel tests that need real ones, each closed after its test.
import { afterEach } from 'vitest';
import { type Device, openDevice } from '../../src/index.js';

/** Call at a test file's top level: the returned opener's devices are closed after each test. */
export function udpDevices(): () => Promise<Device> {
  const devs: Device[] = [];
  afterEach(async () => {
    for (const d of devs.splice(0)) await d.close();
  });
  return async () => {
    const d = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(d);
    return d;
  };
}
