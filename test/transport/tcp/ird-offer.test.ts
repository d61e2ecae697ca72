// The IRD a tcp device offers in its MPA Reply is no more than limits.maxIrd, the engine's own
// bound on reads and atomics answered and not yet acknowledged: a conforming standard peer then
// never meets the engine's Terminate for too many (it offered 16 whatever maxIrd said).
import { afterEach, expect, it } from 'vitest';
import { openDevice, listen } from '../../../src/index.js';
import { rawConnect } from './raw-mpa.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

it.each([[undefined, 16], [4, 4], [64, 16]] as const)('limits.maxIrd %s: the MPA Reply offers IRD %i', async (maxIrd, offered) => {
  const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0, ...(maxIrd !== undefined ? { limits: { maxIrd } } : {}) });
  cleanup.push(() => dev.close());
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 8 });
  const l = listen(dev, { pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 } });
  cleanup.push(() => l.close());
  const raw = await rawConnect((dev.address as { port: number }).port);
  cleanup.push(() => void raw.s.destroy());
  for (let i = 0; i < 500 && raw.received().length < 24; i++) await new Promise((r) => setTimeout(r, 5));
  const reply = raw.received();
  // MPA Reply: key (16), flags/rev (2), private data length (2), then the v2 block: IRD, ORD (14 bits each).
  expect(((reply[20]! << 8) | reply[21]!) & 0x3fff).toBe(offered);
});
