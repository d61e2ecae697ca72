// Address-handle ids (an srd send names its destination by an id the NIC thread resolves) were
// never given up: a server answering every client at its source address grew both tables — the
// application's and the NIC thread's — by one entry per client, for good. Now each holds at most
// AH_MAX (4096): the least recently used ids go, the NIC thread forgets them, a destination whose
// id went gets a new one at its next send, and dev.stats().nic counts both (ahs, ahEvictions).
import { describe, expect, it } from 'vitest';
import { Access, type DeviceAddress, Opcode, openDevice, WcStatus } from '../../src/index.js';
import { addressKey } from '../../src/core/address.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';
import { take } from '../verbs/helpers.js';

const AH_MAX = 4096;

describe('address-handle ids of a NIC thread', () => {
  it('udp: past AH_MAX destinations both tables stay bounded, evictions are counted, and an evicted destination is still reached', { timeout: 60_000 }, async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    const peer = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 0 });
    try {
      const pd = dev.allocPd();
      const cq = dev.createCq({ depth: 64 });
      const mr = pd.regMr(4096, Access.LocalWrite);
      const qp = pd.createQp({ type: 'srd', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
      const ppd = peer.allocPd();
      const pcq = peer.createCq({ depth: 64 });
      const pmr = ppd.regMr(4096, Access.LocalWrite);
      const pqp = ppd.createQp({ type: 'srd', sendCq: pcq, recvCq: pcq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
      const ah = pd.createAh({ address: peer.address });
      const sendOnce = async (wrId: number): Promise<void> => {
        pqp.postRecv({ wrId, sgList: [{ addr: pmr.addr, length: 64, lkey: pmr.lkey }] });
        qp.postSend({ wrId, opcode: Opcode.Send, ah, remoteQpn: pqp.qpn, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] });
        expect((await take(cq, 1)).map((w) => [Number(w.wrId), w.status])).toEqual([[wrId, WcStatus.Success]]);
        expect((await take(pcq, 1)).map((w) => w.status)).toEqual([WcStatus.Success]);
      };
      await sendOnce(1);
      // As many more destinations as a server answering that many clients names (nothing is
      // sent to them: an id is made when a send names its destination).
      const port = dev.nic as unknown as ThreadPort;
      const base = dev.address as DeviceAddress & { port: number };
      for (let i = 0; i < AH_MAX + 1000; i++) {
        const address = { ...base, port: 1024 + i } as DeviceAddress;
        port.ahId({ address, key: addressKey(address), remoteQpn: 0 });
      }
      const nic = dev.stats().nic!;
      expect(nic.ahs).toBeGreaterThan(0);
      expect(nic.ahs).toBeLessThanOrEqual(AH_MAX);
      expect(nic.ahEvictions).toBeGreaterThanOrEqual(1001);
      // The peer's id went long ago (least recently used): its next send gets a new one.
      await sendOnce(2);
    } finally {
      await peer.close();
      await dev.close();
    }
  });
});
