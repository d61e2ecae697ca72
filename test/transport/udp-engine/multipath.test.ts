// Multipath: a udp device with several sockets stripes its datagrams over all of them once the
// peer knows its transport context, and the peer takes them from any of them: one transport
// context per peer device, not per socket.
import { describe, expect, it } from 'vitest';
import { Access, Opcode, openDevice, WcStatus, type CompletionQueue, type WorkCompletion } from '../../../src/index.js';

async function take(cq: CompletionQueue, n: number): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  while (out.length < n) {
    await cq.wait(10_000);
    out.push(...cq.poll(n - out.length));
  }
  return out;
}

describe('udp multipath', () => {
  it('3 sockets per device: 16 MiB of writes and reads striped over all of them, bytes exact, one context each side', async () => {
    const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, sockets: 3 });
    const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, sockets: 3 });
    try {
      const pdA = a.allocPd();
      const pdB = b.allocPd();
      const cqA = a.createCq({ depth: 512 });
      const cqB = b.createCq({ depth: 512 });
      const qpA = pdA.createQp({ type: 'rc', sendCq: cqA, recvCq: cqA, maxSendWr: 64, maxRecvWr: 8, maxSge: 1 });
      const qpB = pdB.createQp({ type: 'rc', sendCq: cqB, recvCq: cqB, maxSendWr: 64, maxRecvWr: 8, maxSge: 1 });
      await Promise.all([qpA.connect({ address: b.address, qpn: qpB.qpn }), qpB.connect({ address: a.address, qpn: qpA.qpn })]);
      const MB = 1 << 20;
      const src = pdA.regMr(4 * MB, Access.LocalWrite);
      const dst = pdB.regMr(4 * MB, Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead);
      for (let i = 0; i < src.length; i++) src.buffer[i] = (i * 2654435761) >>> 24;
      for (let round = 0; round < 4; round++) {
        for (let i = 0; i < 64; i++) {
          qpA.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * 65536, length: 65536, lkey: src.lkey }], remoteAddr: dst.addr + i * 65536, rkey: dst.rkey });
        }
        expect((await take(cqA, 64)).every((w) => w.status === WcStatus.Success)).toBe(true);
      }
      expect(Buffer.from(dst.buffer).equals(Buffer.from(src.buffer))).toBe(true);
      const back = pdA.regMr(4 * MB, Access.LocalWrite);
      for (let i = 0; i < 64; i++) {
        qpA.postSend({ wrId: i, opcode: Opcode.RdmaRead, sgList: [{ addr: back.addr + i * 65536, length: 65536, lkey: back.lkey }], remoteAddr: dst.addr + i * 65536, rkey: dst.rkey });
      }
      expect((await take(cqA, 64)).every((w) => w.status === WcStatus.Success)).toBe(true);
      expect(Buffer.from(back.buffer).equals(Buffer.from(src.buffer))).toBe(true);
      const la = a.stats().link!;
      const lb = b.stats().link!;
      for (const l of [la, lb]) {
        expect(l.contexts).toBe(1);
        for (const k of ['txSocket0', 'txSocket1', 'txSocket2']) expect(l[k], `${k} of ${JSON.stringify(l)}`).toBeGreaterThan(10);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('rejects a socket count outside 1..16', async () => {
    await expect(openDevice({ transport: 'udp', sockets: 0 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    await expect(openDevice({ transport: 'udp', sockets: 17 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});
