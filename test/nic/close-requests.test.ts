// Connection requests that reach a device while it closes: the NIC thread may have handed one to
// this thread just before the close began, and the listener answers it while the close runs.
// The answer goes with the NIC's link; nothing throws into the message handler (a SabreError
// ERR_CLOSED from the slow-path call was an uncaught exception in the application).
import { afterEach, describe, expect, it } from 'vitest';
import { connect, listen, openDevice, type Device } from '../../src/index.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close().catch(() => undefined);
});

describe.each(['tcp', 'udp'] as const)('a %s device closing while connects arrive', (transport) => {
  it('answers none of them with a throw: no uncaught exception, every connect settles', { timeout: 60_000 }, async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown): void => void uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    try {
      for (let round = 0; round < 6; round++) {
        const server = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 1 });
        const client = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 0 });
        devs.push(server, client);
        const spd = server.allocPd();
        const scq = server.createCq({ depth: 256 });
        listen(server, { pd: spd, backlog: 1, qpInit: { sendCq: scq, recvCq: scq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 } });
        const cpd = client.allocPd();
        const ccq = client.createCq({ depth: 256 });
        const qpInit = { sendCq: ccq, recvCq: ccq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 };
        // A burst of connects (a backlog of one: most are answered busy and ask again), and the
        // server closes while they keep coming.
        const tries = Array.from({ length: 24 }, () => connect(client, server.address, { pd: cpd, qpInit, timeoutMs: 3000 }).then(() => 'ok', (e: { code?: string }) => e.code ?? 'error'));
        await new Promise((r) => setTimeout(r, 5 + round * 5));
        await server.close();
        await client.close(); // what still waits settles now (ERR_CLOSED)
        const settled = await Promise.all(tries);
        expect(settled.length).toBe(24);
      }
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});
