// The target of test/nic/offload.test.ts, in its own process: one device (the transport and
// `workers` from argv) with a 1 MiB region open to remote writes and reads. Prints one JSON
// line with its address, QP and key; then takes commands on stdin:
//   block MS   busy-wait the main thread for MS milliseconds (as a busy service does)
//   elu MS     print the main thread's event-loop utilization over the next MS milliseconds
//   exit       close the device and exit
// Imports the built package (dist/), as a user's service would.
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { Access, openDevice } from '../../dist/index.js';

const [transport, workers] = [process.argv[2], Number(process.argv[3])];
const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
const pd = dev.allocPd();
const mr = pd.regMr(1 << 20, Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead);
const cq = dev.createCq({ depth: 64 });
const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
console.log(JSON.stringify({ address: dev.address, qpn: qp.qpn, addr: mr.addr, rkey: mr.rkey }));
// The requester's QPN comes next; then both connect.
const peer = JSON.parse((await lines.next()).value);
await qp.connect({ address: peer.address, qpn: peer.qpn });
console.log('connected');

for (let r = await lines.next(); !r.done; r = await lines.next()) {
  const [cmd, arg] = r.value.trim().split(/\s+/);
  if (cmd === 'block') {
    const end = performance.now() + Number(arg);
    while (performance.now() < end);
    console.log('blocked');
  } else if (cmd === 'elu') {
    const a = performance.eventLoopUtilization();
    await new Promise((res) => setTimeout(res, Number(arg)));
    console.log(JSON.stringify({ elu: performance.eventLoopUtilization(a).utilization }));
  } else if (cmd === 'exit') break;
}
await dev.close();
process.exit(0);
