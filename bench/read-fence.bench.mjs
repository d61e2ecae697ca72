// The cost of the deregister fence on the read path (issue #11 hole 5): the responder copies
// the source bytes of every RdmaRead it answers. Two devices in one process over tcp and udp
// on 127.0.0.1; RdmaRead goodput of 256 KiB reads against RdmaWrite goodput of the same size
// in the same run (writes go out as views, zero-copy), with CPU per GB (process.cpuUsage: all
// threads). A smoke on a shared machine: compare ratios within one run, not absolute numbers.
// Run: npm run build:ts && node bench/read-fence.bench.mjs   (READ_FENCE_MIB, default 256)
import { Access, openDevice, Opcode, WcStatus } from '../dist/index.js';

const MIB = Number(process.env.READ_FENCE_MIB ?? 256);
const MSG = 256 << 10;
const WINDOW = 16;
const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead;

async function pair(transport) {
  const mk = async () => {
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0 });
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 1024 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 256, maxRecvWr: 16, maxSge: 1 });
    const mr = pd.regMr(MSG * WINDOW, ALL);
    return { dev, cq, qp, mr };
  };
  const a = await mk();
  const b = await mk();
  await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
  return [a, b];
}

async function run(a, b, opcode) {
  const total = Math.floor((MIB << 20) / MSG);
  let posted = 0;
  let done = 0;
  const post = () => {
    const slot = posted % WINDOW;
    a.qp.postSend({ wrId: posted, opcode, sgList: [{ addr: a.mr.addr + slot * MSG, length: MSG, lkey: a.mr.lkey }], remoteAddr: b.mr.addr + slot * MSG, rkey: b.mr.rkey });
    posted++;
  };
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  while (posted < Math.min(WINDOW, total)) post();
  while (done < total) {
    await a.cq.wait(30_000);
    for (const wc of a.cq.poll(64)) {
      if (wc.status !== WcStatus.Success) throw new Error(`status ${wc.status}`);
      done++;
      if (posted < total) post();
    }
  }
  const s = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const gb = (total * MSG) / 1e9;
  return { mbps: (total * MSG) / s / 1e6, cpuPerGb: (c.user + c.system) / 1e6 / gb };
}

const rows = [];
for (const transport of ['tcp', 'udp']) {
  const [a, b] = await pair(transport);
  await run(a, b, Opcode.RdmaWrite); // warm-up
  const w = await run(a, b, Opcode.RdmaWrite);
  const r = await run(a, b, Opcode.RdmaRead);
  rows.push({ transport, 'write MB/s': w.mbps.toFixed(0), 'read MB/s': r.mbps.toFixed(0), 'read/write': (r.mbps / w.mbps).toFixed(2), 'write CPU s/GB': w.cpuPerGb.toFixed(2), 'read CPU s/GB': r.cpuPerGb.toFixed(2) });
  await a.dev.close();
  await b.dev.close();
}
console.table(rows);
