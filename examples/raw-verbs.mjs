// Raw verbs, as an ibverbs program writes them: two devices exchange { address, qpn } out of
// band (here: in one process), connect their rc QPs, and move bytes with postSend / postRecv /
// poll. Run: node examples/raw-verbs.mjs [udp|tcp|inproc]
import { inspect } from 'node:util';
import { Access, Opcode, openDevice, WcStatus } from 'sabre';

const transport = process.argv[2] ?? 'udp';
const open = () => openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
const a = await open();
const b = await open();
const pdA = a.allocPd();
const pdB = b.allocPd();
const src = pdA.regMr(65536, Access.LocalWrite);
const dst = pdB.regMr(65536, Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead);
const cqA = a.createCq({ depth: 64 });
const cqB = b.createCq({ depth: 64 });
const qpA = pdA.createQp({ type: 'rc', sendCq: cqA, recvCq: cqA, maxSendWr: 16, maxRecvWr: 16, maxSge: 2 });
const qpB = pdB.createQp({ type: 'rc', sendCq: cqB, recvCq: cqB, maxSendWr: 16, maxRecvWr: 16, maxSge: 2 });
await Promise.all([
  qpA.connect({ address: b.address, qpn: qpB.qpn }),
  qpB.connect({ address: a.address, qpn: qpA.qpn }),
]);

// An RDMA WRITE with immediate: the data lands in dst, the immediate consumes a posted receive.
qpB.postRecv({ wrId: 100, sgList: [] });
src.buffer.set(new TextEncoder().encode('hello'));
qpA.postSend({
  wrId: 1, opcode: Opcode.RdmaWriteWithImm, imm: 0xc0ffee,
  sgList: [{ addr: src.addr, length: 5, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey,
});
await cqA.wait(5000);
const [wcA] = cqA.poll(1);
await cqB.wait(5000);
const [wcB] = cqB.poll(1);
console.log(inspect(wcA));
console.log(inspect(wcB));
if (wcA.status !== WcStatus.Success || wcB.imm !== 0xc0ffee) throw new Error('unexpected completion');
console.log(`dst holds "${new TextDecoder().decode(dst.buffer.subarray(0, 5))}"`);
await a.close();
await b.close();
