// A QP's whole send queue posted at once (maxSendWr 65,536, its largest) of 8-byte RDMA Writes,
// between two devices over real sockets: every write completes and lands. The responder's
// out-of-order budget (4,096 messages) filled within one receive step with messages that were
// placed and in order, and refused the rest with a Terminate (RemInvReqErr from 8,192 writes
// on). (udp's other limit, the transport queue for one peer, is not reached here: the small
// writes pack many to a datagram; test/transport/udp/send-queue-full.test.ts drives it.)
import { afterEach, describe, expect, it } from 'vitest';
import { Access, type Device, openDevice, WcStatus } from '../../src/index.js';

const N = 65_536;
const devs: Device[] = [];
afterEach(async () => {
  await Promise.all(devs.splice(0).map((d) => d.close()));
});

describe('a full send queue of small writes', () => {
  it.each(['udp', 'tcp'] as const)('%s: 65,536 writes posted at once all complete, every byte in place', { timeout: 60_000 }, async (transport) => {
    const [dev, peer] = await Promise.all([0, 1].map(() => openDevice({ transport, host: '127.0.0.1', port: 0 })));
    devs.push(dev!, peer!);
    const pd = dev!.allocPd();
    const mr = pd.regMr(N * 8, Access.LocalWrite | Access.RemoteWrite);
    const ppd = peer!.allocPd();
    const src = ppd.regMr(N * 8, Access.LocalWrite);
    for (let i = 0; i < N; i++) src.buffer.set([i & 255, i >> 8, 7, 7, 7, 7, 7, 9], i * 8);
    const cq = dev!.createCq({ depth: 4 });
    const pcq = peer!.createCq({ depth: 4 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    const pqp = ppd.createQp({ type: 'rc', sendCq: pcq, recvCq: pcq, maxSendWr: N, maxRecvWr: 4, maxSge: 1 });
    await Promise.all([qp.connect({ address: peer!.address, qpn: pqp.qpn }), pqp.connect({ address: dev!.address, qpn: qp.qpn })]);
    for (let i = 0; i < N; i++) {
      pqp.postSend({ wrId: i, opcode: 0 /* RdmaWrite */, signaled: i === N - 1, sgList: [{ addr: src.addr + i * 8, length: 8, lkey: src.lkey }], remoteAddr: mr.addr + i * 8, rkey: mr.rkey });
    }
    const wcs = [];
    for (let tries = 0; wcs.length === 0 && tries < 200; tries++) {
      await pcq.wait(200).catch(() => undefined);
      wcs.push(...pcq.poll(1));
    }
    expect(wcs.map((w) => [w.wrId, w.status])).toEqual([[N - 1, WcStatus.Success]]);
    expect(Buffer.compare(mr.buffer, src.buffer)).toBe(0);
  });
});
