// A device in a real worker thread talking to a device on this thread through the inproc
// shared-memory bridge: write, send, read and write-back, bytes compared.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus, createInprocBridge } from '../../src/index.js';
import { ALL, fill, side, take } from './helpers.js';

describe('inproc across worker threads', () => {
  it('rc write/send/read between a worker device and a main-thread device', async () => {
    const bridge = createInprocBridge({ ringBytes: 1 << 20 });
    const worker = new Worker(new URL('./worker-device.mjs', import.meta.url), { workerData: bridge.init });
    const msgs: Record<string, unknown>[] = [];
    let wake: (() => void) | undefined;
    worker.on('message', (m) => { msgs.push(m); wake?.(); });
    worker.on('error', (e) => { msgs.push({ error: String(e) }); wake?.(); });
    const nextMsg = async (): Promise<Record<string, unknown>> => {
      while (msgs.length === 0) await new Promise<void>((r) => (wake = r));
      const m = msgs.shift()!;
      if (m.error) throw new Error(String(m.error));
      return m;
    };
    const peer = (await nextMsg()) as { address: { transport: string; id: string }; qpn: number; rkey: number; addr: number };
    await bridge.ready;
    const s = await side();
    const mr = s.pd.regMr(65536, ALL);
    fill(mr.buffer, 123);
    s.qp.postRecv({ wrId: 50 });
    worker.postMessage({ address: s.dev.address, qpn: s.qp.qpn, rkey: mr.rkey, addr: mr.addr });
    await s.qp.connect({ address: peer.address, qpn: peer.qpn });
    expect(await nextMsg()).toMatchObject({ connected: true });
    // Write 4096 bytes into the worker's region, then a Send it is waiting for.
    s.qp.postSend({ wrId: 0, opcode: Opcode.RdmaWrite, sgList: [{ addr: mr.addr + 50000, length: 4096, lkey: mr.lkey }], remoteAddr: peer.addr, rkey: peer.rkey });
    s.qp.postSend({ wrId: 1, opcode: Opcode.Send, sgList: [{ addr: mr.addr + 40000, length: 1000, lkey: mr.lkey }] });
    expect((await take(s.cq, 2)).map((w) => [w.wrId, w.status])).toEqual([[0, WcStatus.Success], [1, WcStatus.Success]]);
    const [r] = await take(s.cq, 1);
    expect(r).toMatchObject({ wrId: 50, status: WcStatus.Success, imm: 1000, byteLen: 0 });
    expect(await nextMsg()).toMatchObject({ done: true });
    // The worker read our mr[0,4096) and wrote [what we wrote to it] + [what it read] to mr[16384, 24576).
    expect(Buffer.from(mr.buffer.subarray(16384, 20480)).equals(Buffer.from(mr.buffer.subarray(50000, 54096)))).toBe(true);
    expect(Buffer.from(mr.buffer.subarray(20480, 24576)).equals(Buffer.from(mr.buffer.subarray(0, 4096)))).toBe(true);
    await worker.terminate();
    bridge.close();
    await s.dev.close();
  });
});
