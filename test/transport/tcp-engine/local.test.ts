// Two tcp devices in one process, real sockets on 127.0.0.1: connect, every rc opcode with bytes
// compared, RNR between sabre peers, protection error → Terminate, QP ERROR on both sides.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, openDevice, Opcode, QpState, WcOpcode, WcStatus, type CompletionQueue, type Device, type WorkCompletion } from '../../../src/index.js';

const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;
const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function take(cq: CompletionQueue, n: number, timeoutMs = 10_000): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`${out.length}/${n} completions in ${timeoutMs} ms`);
    await cq.wait(left);
    out.push(...cq.poll(n - out.length));
  }
  return out;
}

function fill(b: Uint8Array, seed: number): void {
  let x = seed >>> 0 || 1;
  for (let i = 0; i < b.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
}

async function pair(init: { rnrRetry?: number } = {}) {
  const sides = [];
  for (let i = 0; i < 2; i++) {
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    devs.push(dev);
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 4096 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 256, maxRecvWr: 256, maxSge: 4, ...init });
    const mr = pd.regMr(1 << 20, ALL);
    sides.push({ dev, pd, cq, qp, mr });
  }
  const [a, b] = sides as [typeof sides[0], typeof sides[0]];
  await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
  return { a, b };
}

describe('tcp device, one process', () => {
  it('address, srd refused, connect', async () => {
    const { a, b } = await pair();
    expect(a.dev.address).toMatchObject({ transport: 'tcp', host: '127.0.0.1' });
    expect(a.qp.state).toBe(QpState.Rts);
    expect(b.qp.state).toBe(QpState.Rts);
    expect(() => a.pd.createQp({ type: 'srd', sendCq: a.cq, recvCq: a.cq, maxSendWr: 1, maxRecvWr: 1, maxSge: 1 })).toThrow(/connection-oriented/);
  });

  it('write, send, read, atomics: bytes compared', async () => {
    const { a, b } = await pair();
    const n = 300_000;
    fill(a.mr.buffer.subarray(0, n), 7);
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: a.mr.addr, length: n, lkey: a.mr.lkey }], remoteAddr: b.mr.addr, rkey: b.mr.rkey });
    expect(await take(a.cq, 1)).toMatchObject([{ wrId: 1, status: WcStatus.Success, opcode: WcOpcode.RdmaWrite, byteLen: n }]);
    expect(Buffer.compare(b.mr.buffer.subarray(0, n), a.mr.buffer.subarray(0, n))).toBe(0);

    b.qp.postRecv({ wrId: 9, sgList: [{ addr: b.mr.addr + 500_000, length: 200_000, lkey: b.mr.lkey }] });
    a.qp.postSend({ wrId: 2, opcode: Opcode.SendWithImm, imm: 0xdeadbeef, sgList: [{ addr: a.mr.addr + 1000, length: 150_000, lkey: a.mr.lkey }] });
    expect(await take(a.cq, 1)).toMatchObject([{ wrId: 2, status: WcStatus.Success }]);
    expect(await take(b.cq, 1)).toMatchObject([{ wrId: 9, status: WcStatus.Success, opcode: WcOpcode.Recv, byteLen: 150_000, imm: 0xdeadbeef }]);
    expect(Buffer.compare(b.mr.buffer.subarray(500_000, 650_000), a.mr.buffer.subarray(1000, 151_000))).toBe(0);

    fill(b.mr.buffer.subarray(700_000, 800_000), 3);
    a.qp.postSend({ wrId: 3, opcode: Opcode.RdmaRead, sgList: [{ addr: a.mr.addr + 400_000, length: 100_000, lkey: a.mr.lkey }], remoteAddr: b.mr.addr + 700_000, rkey: b.mr.rkey });
    expect(await take(a.cq, 1)).toMatchObject([{ wrId: 3, status: WcStatus.Success, byteLen: 100_000 }]);
    expect(Buffer.compare(a.mr.buffer.subarray(400_000, 500_000), b.mr.buffer.subarray(700_000, 800_000))).toBe(0);

    new DataView(b.mr.buffer.buffer, b.mr.buffer.byteOffset).setBigUint64(64, 40n, true);
    a.qp.postSend({ wrId: 4, opcode: Opcode.AtomicFetchAdd, sgList: [{ addr: a.mr.addr + 8, length: 8, lkey: a.mr.lkey }], remoteAddr: b.mr.addr + 64, rkey: b.mr.rkey, compareAdd: 2n });
    expect(await take(a.cq, 1)).toMatchObject([{ wrId: 4, status: WcStatus.Success }]);
    expect(new DataView(a.mr.buffer.buffer, a.mr.buffer.byteOffset).getBigUint64(8, true)).toBe(40n);
    expect(new DataView(b.mr.buffer.buffer, b.mr.buffer.byteOffset).getBigUint64(64, true)).toBe(42n);
  });

  it('RNR between sabre peers: the Send waits for the receive', async () => {
    const { a, b } = await pair({ rnrRetry: 1000 });
    a.mr.buffer.fill(0x5a, 0, 100);
    a.qp.postSend({ wrId: 1, opcode: Opcode.Send, sgList: [{ addr: a.mr.addr, length: 100, lkey: a.mr.lkey }] });
    a.qp.postSend({ wrId: 2, opcode: Opcode.RdmaWrite, sgList: [{ addr: a.mr.addr, length: 100, lkey: a.mr.lkey }], remoteAddr: b.mr.addr + 4096, rkey: b.mr.rkey });
    await new Promise((r) => setTimeout(r, 20));
    b.qp.postRecv({ wrId: 7, sgList: [{ addr: b.mr.addr, length: 200, lkey: b.mr.lkey }] });
    expect((await take(a.cq, 2)).map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.Success], [2, WcStatus.Success]]);
    expect(await take(b.cq, 1)).toMatchObject([{ wrId: 7, status: WcStatus.Success, byteLen: 100 }]);
    expect(b.mr.buffer[99]).toBe(0x5a);
    expect(b.dev.stats().rnrNaksSent).toBeGreaterThan(0);
  });

  it('protection violation: RemAccessErr, both QPs ERROR, responder memory untouched', async () => {
    const { a, b } = await pair();
    b.qp.postRecv({ wrId: 70, sgList: [] });
    a.mr.buffer.fill(1, 0, 64);
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }], remoteAddr: b.mr.addr + b.mr.length - 10, rkey: b.mr.rkey });
    a.qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [{ addr: a.mr.addr, length: 8, lkey: a.mr.lkey }] });
    expect((await take(a.cq, 2)).map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.RemAccessErr], [2, WcStatus.WrFlushErr]]);
    expect(await take(b.cq, 1)).toMatchObject([{ wrId: 70, status: WcStatus.WrFlushErr }]);
    expect(a.qp.state).toBe(QpState.Error);
    expect(b.qp.state).toBe(QpState.Error);
    expect(b.mr.buffer.subarray(b.mr.length - 10).every((x) => x === 0)).toBe(true);
  });
});
