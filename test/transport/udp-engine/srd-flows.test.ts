// Issue #11 hole 3 on real sockets: a udp device that listen()s runs the CM agent on an srd QP
// (CM_QPN), and every (peer address, source QPN) that sends it a message used to get a flow
// record for the device's life. A validated peer sending from 300 QPNs (the flood
// used 200 000 datagrams) now gets at most maxSrdFlowsPerPeer flows on that QP; the rest are
// refused and counted, and the listener still accepts a genuine connect — from the flood's own
// host (another port: a host holds up to half the table, rdmap/bounds.ts hostFlowCap, so the
// other processes of one host are not locked out; test/attack/srd-flows-one-host).
import { afterEach, describe, expect, it } from 'vitest';
import { connect, listen, openDevice, Opcode, type Device } from '../../../src/index.js';
import { CM_QPN } from '../../../src/verbs/reserved.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

describe('hole 3: srd flows of the CM QP under a flood of source QPNs', () => {
  it('300 srd QPs of one peer each send to the listener\'s CM QP: ≤ 64 flows kept, the rest refused, a real connect still works', async () => {
    // Inline (workers: 0): the test reads the CM QP's flow table in the engine.
    const server = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 0 });
    const flood = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const client = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(server, flood, client);
    const spd = server.allocPd();
    const scq = server.createCq({ depth: 64 });
    const l = listen(server, { pd: spd, qpInit: { sendCq: scq, recvCq: scq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 } });
    const fpd = flood.allocPd();
    const fcq = flood.createCq({ depth: 4096 });
    const buf = fpd.regMr(64, 0x1);
    const ah = fpd.createAh({ address: server.address });
    for (let i = 0; i < 300; i++) {
      const qp = fpd.createQp({ type: 'srd', sendCq: fcq, recvCq: fcq, maxSendWr: 2, maxRecvWr: 1, maxSge: 1, timeoutMs: 60_000 });
      qp.postSend({ wrId: i, opcode: Opcode.Send, sgList: [{ addr: buf.addr, length: 64, lkey: buf.lkey }], ah, remoteQpn: CM_QPN, signaled: false });
    }
    const cmQp = server.engine.qps.get(CM_QPN)!;
    const end = Date.now() + 15_000;
    while (server.stats().srdFlowsRefused + cmQp.flows.size < 300 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(cmQp.flows.size).toBeLessThanOrEqual(64);
    expect(server.stats().srdFlowsRefused).toBeGreaterThanOrEqual(236);
    // A genuine client (the same host, another port) still connects.
    const cpd = client.allocPd();
    const ccq = client.createCq({ depth: 16 });
    const [qp] = await Promise.all([
      connect(client, server.address, { pd: cpd, qpInit: { sendCq: ccq, recvCq: ccq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 } }),
      l.accept(10_000),
    ]);
    expect(qp.qpn).toBeGreaterThan(0);
    l.close();
  }, 60_000);
});
