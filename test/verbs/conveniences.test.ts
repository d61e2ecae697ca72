// Conveniences on top of the verbs contract: a promise per work request, async iteration of a
// CQ, and completions that util.inspect prints by name.
import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { Access, ErrorCode, Opcode, openDevice, WcOpcode, WcStatus, WorkRequestError, type Device } from '../../src/index.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function pair(transport: 'udp' | 'tcp' | 'inproc') {
  const mk = async () => {
    const dev = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
    devs.push(dev);
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 64 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
    const mr = pd.regMr(4096, Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead);
    return { dev, pd, cq, qp, mr };
  };
  const a = await mk();
  const b = await mk();
  await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
  return [a, b] as const;
}

describe.each(['udp', 'tcp', 'inproc'] as const)('promise helpers over %s', (transport) => {
  it('await qp.write / read / send / recv resolve to their WorkCompletion; none shows up in poll', async () => {
    const [a, b] = await pair(transport);
    a.mr.buffer.set([1, 2, 3, 4]);
    const w = await a.qp.write({ sgList: [{ addr: a.mr.addr, length: 4, lkey: a.mr.lkey }], remoteAddr: b.mr.addr, rkey: b.mr.rkey });
    expect(w).toMatchObject({ status: WcStatus.Success, opcode: WcOpcode.RdmaWrite, byteLen: 4 });
    expect([...b.mr.buffer.subarray(0, 4)]).toEqual([1, 2, 3, 4]);
    const r = await a.qp.read({ sgList: [{ addr: a.mr.addr + 100, length: 4, lkey: a.mr.lkey }], remoteAddr: b.mr.addr, rkey: b.mr.rkey });
    expect(r).toMatchObject({ status: WcStatus.Success, opcode: WcOpcode.RdmaRead });
    expect([...a.mr.buffer.subarray(100, 104)]).toEqual([1, 2, 3, 4]);
    const got = b.qp.recv({ sgList: [{ addr: b.mr.addr + 512, length: 64, lkey: b.mr.lkey }] });
    const s = await a.qp.send({ sgList: [{ addr: a.mr.addr, length: 4, lkey: a.mr.lkey }], imm: transport === 'tcp' ? undefined : 42 });
    expect(s.status).toBe(WcStatus.Success);
    expect(await got).toMatchObject({ status: WcStatus.Success, opcode: WcOpcode.Recv, byteLen: 4 });
    expect(a.cq.poll(16)).toEqual([]);
    expect(b.cq.poll(16)).toEqual([]);
  });

  it('an error status rejects with WorkRequestError (ERR_WR_FAILED, .status); misuse throws synchronously', async () => {
    const [a, b] = await pair(transport);
    const p = a.qp.write({ sgList: [{ addr: a.mr.addr, length: 4, lkey: a.mr.lkey }], remoteAddr: b.mr.addr, rkey: b.mr.rkey ^ 0xff });
    await expect(p).rejects.toBeInstanceOf(WorkRequestError);
    await expect(p).rejects.toMatchObject({ code: ErrorCode.WrFailed, status: WcStatus.RemAccessErr });
    expect(() => a.qp.write({ sgList: [{ addr: a.mr.addr, length: 4, lkey: 12345 }], remoteAddr: b.mr.addr, rkey: b.mr.rkey })).toThrow(expect.objectContaining({ code: ErrorCode.LocalProtection }));
  });

  it('a promise pending when the device closes rejects with ERR_CLOSED', async () => {
    const [a] = await pair(transport);
    const p = a.qp.recv({ sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }] });
    await a.dev.close();
    await expect(p).rejects.toMatchObject({ code: ErrorCode.Closed, status: WcStatus.WrFlushErr });
  });
});

describe('CQ iteration and inspect', () => {
  it('for await (const wc of cq) yields completions in order and ends when the device closes', async () => {
    const [a, b] = await pair('inproc');
    for (let i = 0; i < 5; i++) a.qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: a.mr.addr, length: 8, lkey: a.mr.lkey }], remoteAddr: b.mr.addr, rkey: b.mr.rkey });
    const ids: unknown[] = [];
    for await (const wc of a.cq) {
      ids.push(wc.wrId);
      if (ids.length === 5) break;
    }
    expect(ids).toEqual([0, 1, 2, 3, 4]);
    // A loop waiting on the CQ ends (after the flushed receive) when the device closes.
    a.qp.postRecv({ wrId: 9, sgList: [] });
    const rest: unknown[] = [];
    const loop = (async () => {
      for await (const wc of a.cq) rest.push([wc.wrId, wc.status]);
    })();
    await a.dev.close();
    await loop;
    expect(rest).toEqual([[9, WcStatus.WrFlushErr]]);
  });

  it('util.inspect prints status and opcode by name; equality and JSON are unchanged', async () => {
    const [a, b] = await pair('inproc');
    a.qp.postSend({ wrId: 7n, opcode: Opcode.RdmaWrite, sgList: [{ addr: a.mr.addr, length: 8, lkey: a.mr.lkey }], remoteAddr: b.mr.addr, rkey: b.mr.rkey });
    await a.cq.wait(5000);
    const [wc] = a.cq.poll(1);
    expect(inspect(wc)).toBe(`WorkCompletion { wrId: 7n, status: Success, opcode: RdmaWrite, byteLen: 8, qpn: ${a.qp.qpn} }`);
    expect(JSON.parse(JSON.stringify({ ...wc, wrId: 7 }))).toEqual({ wrId: 7, status: 0, opcode: WcOpcode.RdmaWrite, byteLen: 8, qpn: a.qp.qpn });
    expect(wc).toEqual({ wrId: 7n, status: 0, opcode: WcOpcode.RdmaWrite, byteLen: 8, qpn: a.qp.qpn });
  });
});
