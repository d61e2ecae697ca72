// A peer process for the async-event tests: opens a device (argv[2]: udp | tcp), makes an rc
// QP, prints { address, qpn }, reads the other side's { address, qpn } from stdin, connects,
// prints "ready" and waits to be killed (SIGKILL: no close, no goodbye on the wire).
import { createInterface } from 'node:readline';
import { Access, openDevice } from '../../dist/index.js';

const dev = await openDevice({ transport: process.argv[2], host: '127.0.0.1', port: 0 });
const pd = dev.allocPd();
const cq = dev.createCq({ depth: 64 });
const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
const mr = pd.regMr(65536, Access.LocalWrite | Access.RemoteWrite);
console.log(JSON.stringify({ address: dev.address, qpn: qp.qpn, addr: mr.addr, rkey: mr.rkey }));
const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const peer = JSON.parse(line);
  await qp.connect({ address: peer.address, qpn: peer.qpn });
  console.log('ready');
}
