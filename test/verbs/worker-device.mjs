// A device in a worker thread, reached over the inproc bridge (used by worker.test.ts).
import { parentPort, workerData } from 'node:worker_threads';
import { Access, Opcode, WcStatus, joinInprocBridge, openDevice } from '../../dist/index.js';

const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;
const bridge = joinInprocBridge(workerData);
const dev = await openDevice({ transport: 'inproc' });
const pd = dev.allocPd();
const cq = dev.createCq({ depth: 64 });
const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 4 });
const mr = pd.regMr(65536, ALL);
qp.postRecv({ wrId: 1, sgList: [{ addr: mr.addr + 32768, length: 1024, lkey: mr.lkey }] });

async function next() {
  for (;;) {
    const w = cq.poll(1);
    if (w.length) {
      if (w[0].status !== WcStatus.Success) throw new Error(`worker completion ${JSON.stringify(w[0], (k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
      return w[0];
    }
    await cq.wait(10000);
  }
}

parentPort.once('message', async (peer) => {
  try {
    await qp.connect({ address: peer.address, qpn: peer.qpn });
    parentPort.postMessage({ connected: true });
    const r = await next(); // main wrote mr[0, 4096) and then sent a message
    // Read 4096 bytes of main's region into mr[8192, …), then write mr[0,4096)+mr[8192,12288) back.
    qp.postSend({ wrId: 2, opcode: Opcode.RdmaRead, sgList: [{ addr: mr.addr + 8192, length: 4096, lkey: mr.lkey }], remoteAddr: peer.addr, rkey: peer.rkey });
    await next();
    qp.postSend({
      wrId: 3, opcode: Opcode.RdmaWrite, remoteAddr: peer.addr + 16384, rkey: peer.rkey,
      sgList: [{ addr: mr.addr, length: 4096, lkey: mr.lkey }, { addr: mr.addr + 8192, length: 4096, lkey: mr.lkey }],
    });
    await next();
    qp.postSend({ wrId: 4, opcode: Opcode.SendWithImm, imm: r.byteLen, sgList: [] });
    await next();
    parentPort.postMessage({ done: true, stats: dev.stats().directSegments });
  } catch (e) {
    parentPort.postMessage({ error: String(e?.stack ?? e) });
  } finally {
    await dev.close();
    bridge.close();
  }
});
parentPort.postMessage({ address: dev.address, qpn: qp.qpn, rkey: mr.rkey, addr: mr.addr });
