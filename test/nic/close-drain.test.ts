// Completions the NIC thread wrote while the application was away (nothing polled, nothing
// drained) are delivered as they are when the device closes — a Success stays a Success, never
// flushed as if the work were still outstanding — whether the NIC thread answers the close or
// has ended (the application drains its ring before it flushes what is left).
import type { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { Access, type CompletionQueue, type Device, Opcode, openDevice, WcStatus } from '../../src/index.js';

const blockFor = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** Without a turn of this thread's event loop (nothing of `a`'s drained meanwhile): until `cq` holds a completion. */
function awaySync(cq: CompletionQueue): void {
  for (let i = 0; i < 1000 && cq.count === 0 && cq.poll(1).length === 0; i++) blockFor(10);
  blockFor(100);
}

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function connected() {
  const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
  const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
  devs.push(b);
  const side = (d: Device) => {
    const pd = d.allocPd();
    const cq = d.createCq({ depth: 64 });
    return { cq, qp: pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 }), mr: pd.regMr(4096, Access.LocalWrite | Access.RemoteWrite) };
  };
  const x = side(a);
  const y = side(b);
  await Promise.all([x.qp.connect({ address: b.address, qpn: y.qp.qpn }), y.qp.connect({ address: a.address, qpn: x.qp.qpn })]);
  return { a, b, x, y };
}

/** What a closed CQ still hands out. */
function rest(cq: CompletionQueue): { wrId: unknown; status: number }[] {
  const out: { wrId: unknown; status: number }[] = [];
  for (;;) {
    let ws: { wrId: unknown; status: number }[];
    try {
      ws = cq.poll(64);
    } catch {
      return out;
    }
    if (ws.length === 0) return out;
    out.push(...ws);
  }
}

describe('completions in the ring at close', () => {
  it('a receive the NIC thread completed before close is delivered as a Success', { timeout: 30_000 }, async () => {
    const { a, x, y } = await connected();
    x.qp.postRecv({ wrId: 7, sgList: [{ addr: x.mr.addr, length: 64, lkey: x.mr.lkey }] });
    y.qp.postSend({ wrId: 1, opcode: Opcode.Send, sgList: [{ addr: y.mr.addr, length: 64, lkey: y.mr.lkey }] });
    // The peer's NIC thread sends; a's completes the receive; this thread takes no turn meanwhile,
    // so the completion is in a's ring, not drained, when the close begins.
    awaySync(y.cq);
    await a.close();
    expect(rest(x.cq).map((w) => [w.wrId, w.status])).toEqual([[7, WcStatus.Success]]);
  });

  it('the NIC thread ended after completing a receive: it is delivered as a Success, the rest flushed', { timeout: 30_000 }, async () => {
    const { a, b, x, y } = await connected();
    x.qp.postRecv({ wrId: 7, sgList: [{ addr: x.mr.addr, length: 64, lkey: x.mr.lkey }] });
    x.qp.postRecv({ wrId: 8, sgList: [{ addr: x.mr.addr, length: 64, lkey: x.mr.lkey }] });
    y.qp.postSend({ wrId: 1, opcode: Opcode.Send, sgList: [{ addr: y.mr.addr, length: 64, lkey: y.mr.lkey }] });
    for (let i = 0; i < 50 && y.cq.count === 0; i++) await new Promise((r) => setTimeout(r, 10));
    // The peer goes first and its last datagrams are in before the thread is ended: Node 20
    // aborts the whole process when a datagram reaches a worker whose termination is under way
    // (UDPWrap::OnRecv, FromJust on the terminating isolate; docs/nic.md, Limits).
    await b.close();
    await new Promise((r) => setTimeout(r, 100));
    const worker = (a.nic as unknown as { worker: Worker }).worker;
    await worker.terminate();
    // Its 'exit' event comes in a later turn: the device fails there (deviceFatal).
    await new Promise((r) => setTimeout(r, 50));
    await a.close();
    const got = rest(x.cq).map((w) => [w.wrId, w.status]);
    expect(got).toEqual([[7, WcStatus.Success], [8, WcStatus.WrFlushErr]]);
  });
});
