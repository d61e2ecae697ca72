// The device-wide not-ready word on tcp (rdmap/not-ready.ts): a connection's control names its
// own QPs only, so the link sends one control ack on each connection to a sabre peer. Only on a
// live one: a connection whose peer ended it (its FIN read) is closed before its 'close' event
// takes it out of the link's table, and a word sent there failed in the connection and was
// counted as a dropped segment. The closed connection is made here by closing it by hand, which
// leaves it in the same state.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DEVICE_QPN } from '../../../src/core/frame.js';
import type { Outbound } from '../../../src/core/link.js';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { Access, Opcode, WcStatus } from '../../../src/index.js';
import { MpaConnection } from '../../../src/transport/tcp/connection.js';
import { TcpLink } from '../../../src/transport/tcp/link.js';
import { Device } from '../../../src/verbs/device.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function device(): Promise<{ dev: Device; t: TcpLink }> {
  const mem = await DeviceMemory.create({ maximumBytes: 64 << 20, workerSlots: 0 });
  const t = await TcpLink.open({ dp: mem, host: '127.0.0.1', port: 0 });
  const dev = new Device(mem, t);
  cleanup.push(() => dev.close());
  return { dev, t };
}

async function side(dev: Device) {
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 64 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
  const mr = pd.regMr(4096, Access.LocalWrite | Access.RemoteWrite);
  return { pd, cq, qp, mr };
}

describe('tcp: the not-ready word', () => {
  it('goes on each live connection to a sabre peer, not on one already closed', async () => {
    const a = await device();
    const b = await device();
    const pairs = [];
    for (let i = 0; i < 2; i++) {
      const x = await side(a.dev);
      const y = await side(b.dev);
      await Promise.all([x.qp.connect({ address: b.dev.address, qpn: y.qp.qpn }), y.qp.connect({ address: a.dev.address, qpn: x.qp.qpn })]);
      x.qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: x.mr.addr, length: 8, lkey: x.mr.lkey }], remoteAddr: y.mr.addr, rkey: y.mr.rkey });
      await x.cq.wait(5_000);
      expect(x.cq.poll(1)).toMatchObject([{ wrId: i, status: WcStatus.Success }]);
      pairs.push({ x, y });
    }
    const send = MpaConnection.prototype.send;
    const sent: { conn: MpaConnection; state: string }[] = [];
    vi.spyOn(MpaConnection.prototype, 'send').mockImplementation(function (this: MpaConnection, ...args: Parameters<MpaConnection['send']>) {
      sent.push({ conn: this, state: this.state });
      return send.apply(this, args);
    });
    const word: Outbound[] = [{ to: b.dev.address, frame: { kind: 'ack', srcQpn: DEVICE_QPN, dstQpn: DEVICE_QPN, ssn: 0 } }];
    const before = { ...a.t.counters };
    a.t.transmit(word);
    expect(sent.map((s) => s.state)).toEqual(['established', 'established']);
    expect(a.t.counters.controlOut - before.controlOut).toBe(2);
    const [gone, live] = [sent[0]!.conn, sent[1]!.conn];
    sent.length = 0;
    gone.close();
    expect(gone.state).toBe('closed');
    a.t.transmit(word);
    expect(sent.map((s) => [s.conn === live, s.state])).toEqual([[true, 'established']]);
    expect(a.t.counters.controlOut - before.controlOut).toBe(3);
    expect(a.t.counters.dropped).toBe(before.dropped);
  });
});
