// A region over ordinary (non-shared) memory on a device with a NIC thread is placed by the
// application's thread from the NIC's shared copy (M3's indirect path, docs/nic.md). A Write's
// Success means its bytes are visible at the responder (DESIGN §4): in one process, the
// requester's completion is not handed out before the responder's placement records are taken.
// Before: 5–9 of 20 writes completed Success while the responder's array still held the old
// bytes (the records were taken only when the responder's own completion ring woke it, and the
// NIC committed them after the step's acks had gone out).
import { afterEach, describe, expect, it } from 'vitest';
import { Access, openDevice, type Device } from '../../src/index.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

describe.each(['udp', 'tcp'] as const)('a Write into a region over a plain Uint8Array, NIC thread, %s', (transport) => {
  it('its bytes are in the array when the requester has its Success, every time', async () => {
    const a = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 1 });
    devs.push(a);
    const b = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 1 });
    devs.push(b);
    const [pa, pb] = [a.allocPd(), b.allocPd()];
    const src = pa.regMr(4096, Access.LocalWrite);
    const ext = new Uint8Array(8192);
    const dst = pb.regMr(ext, Access.LocalWrite | Access.RemoteWrite);
    const [ca, cb] = [a.createCq({ depth: 16 }), b.createCq({ depth: 16 })];
    const qi = { type: 'rc' as const, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 };
    const qa = pa.createQp({ ...qi, sendCq: ca, recvCq: ca });
    const qb = pb.createQp({ ...qi, sendCq: cb, recvCq: cb });
    await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);
    const stale: number[] = [];
    for (let i = 1; i <= 60; i++) {
      src.buffer.fill(i, 0, 100);
      const at = (i * 100) % 8000;
      await qa.write({ sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }], remoteAddr: dst.addr + at, rkey: dst.rkey });
      if (ext[at] !== i || ext[at + 99] !== i) stale.push(i);
    }
    expect(stale).toEqual([]);
  }, 30_000);
});
