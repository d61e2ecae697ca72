// Two devices in one process over the UDP transport on 127.0.0.1: the adapter's framing,
// batching and addressing with real sockets, before the two-process tests.
import { describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { Access, Opcode, WcStatus } from '../../../src/index.js';
import { UdpLink } from '../../../src/transport/udp/link.js';
import { Device } from '../../../src/verbs/device.js';

const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic;

async function dev(mtu?: number): Promise<Device> {
  const mem = await DeviceMemory.create({ maximumBytes: 256 << 20, workerSlots: 0 });
  const t = await UdpLink.open({ host: '127.0.0.1', port: 0, ...(mtu ? { mtu } : {}) });
  return new Device(mem, t, { mss: t.mss });
}

describe('udp transport under the engine (one process)', () => {
  it('rc write + send + read, multi-segment, bytes compared', async () => {
    const a = await dev(1500);
    const b = await dev(1500);
    expect(a.address).toEqual({ transport: 'udp', host: '127.0.0.1', port: expect.any(Number) });
    expect((a.address as unknown as { port: number }).port).toBeGreaterThan(0);
    const pa = a.allocPd(), pb = b.allocPd();
    const cqa = a.createCq({ depth: 64 }), cqb = b.createCq({ depth: 64 });
    const qa = pa.createQp({ type: 'rc', sendCq: cqa, recvCq: cqa, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 });
    const qb = pb.createQp({ type: 'rc', sendCq: cqb, recvCq: cqb, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 });
    await Promise.all([qa.connect({ address: { ...b.address }, qpn: qb.qpn }), qb.connect({ address: JSON.parse(JSON.stringify(a.address)), qpn: qa.qpn })]);
    const src = pa.regMr(100_000, ALL), dst = pb.regMr(100_000, ALL);
    for (let i = 0; i < src.length; i++) src.buffer[i] = (i * 7 + 3) & 0xff;
    qa.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 50_000, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    qb.postRecv({ wrId: 9, sgList: [{ addr: dst.addr + 60_000, length: 20_000, lkey: dst.lkey }] });
    qa.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [{ addr: src.addr + 50_000, length: 10_000, lkey: src.lkey }] });
    qa.postSend({ wrId: 3, opcode: Opcode.RdmaRead, sgList: [{ addr: src.addr + 80_000, length: 5000, lkey: src.lkey }], remoteAddr: dst.addr + 1000, rkey: dst.rkey });
    const wcs = [];
    while (wcs.length < 3) { await cqa.wait(5000); wcs.push(...cqa.poll(8)); }
    expect(wcs.map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.Success], [2, WcStatus.Success], [3, WcStatus.Success]]);
    await cqb.wait(5000);
    expect(cqb.poll(8).map((w) => [w.wrId, w.status, w.byteLen])).toEqual([[9, WcStatus.Success, 10_000]]);
    expect(Buffer.from(dst.buffer.subarray(0, 50_000)).equals(Buffer.from(src.buffer.subarray(0, 50_000)))).toBe(true);
    expect(Buffer.from(dst.buffer.subarray(60_000, 70_000)).equals(Buffer.from(src.buffer.subarray(50_000, 60_000)))).toBe(true);
    expect(Buffer.from(src.buffer.subarray(80_000, 85_000)).equals(Buffer.from(dst.buffer.subarray(1000, 6000)))).toBe(true);
    await a.close();
    await b.close();
  });
});
