// Connector endpoints for a test file: one device memory for all of them, made before the file's
// tests, every endpoint closed after them.
import { afterAll, beforeAll } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { MpaConnector, type MpaConnectorOptions } from '../../../src/transport/tcp/connector.js';

/** Registers the file's hooks; `listen` opens an endpoint on the shared memory (closed after all). */
export function connectorEndpoints(): { listen(o?: Omit<MpaConnectorOptions, 'dp'>): Promise<MpaConnector> } {
  let dm: DeviceMemory;
  const eps: MpaConnector[] = [];
  beforeAll(async () => {
    dm = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 64 << 20, regionEntries: 16, workerSlots: 0 });
  });
  afterAll(async () => {
    await Promise.all(eps.map((e) => e.close()));
  });
  return {
    async listen(o = {}) {
      const e = await MpaConnector.listen({ ...o, dp: dm });
      eps.push(e);
      return e;
    },
  };
}
