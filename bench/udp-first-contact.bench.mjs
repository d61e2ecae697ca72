// What the cookie handshake (issue #11) costs a first contact: two fresh udp devices on
// 127.0.0.1 (one process, real sockets), rc QPs connected from both sides, then one 64-byte
// RdmaWrite — timed from connect() to that write's completion — against, in the same run, a
// raw node:dgram 64-byte ping-pong and the same 64-byte write on the now-warm QP (median of 21
// per pair: one sabre round trip, what the handshake's extra round trip should cost).
// Run: npx tsc -p tsconfig.build.json && node bench/udp-first-contact.bench.mjs
//   FIRST_CONTACT_N=200 (iterations, default 40). SABRE_DIST_B=/path/to/other/dist loads a
//   second build (e.g. the code before the handshake) into the same process and alternates the
//   two, iteration by iteration, so both see the same machine.
import dgram from 'node:dgram';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const dists = [resolve(new URL('../dist', import.meta.url).pathname), ...(process.env.SABRE_DIST_B ? [resolve(process.env.SABRE_DIST_B)] : [])];
const builds = await Promise.all(dists.map((d) => import(pathToFileURL(`${d}/index.js`).href)));
const N = Number(process.env.FIRST_CONTACT_N ?? 40);

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * q))];
};

async function rawRtt(n) {
  const a = dgram.createSocket('udp4');
  const b = dgram.createSocket('udp4');
  await Promise.all([a, b].map((s) => new Promise((r) => s.bind(0, '127.0.0.1', r))));
  b.on('message', (m, r) => b.send(m, r.port, r.address));
  const msg = Buffer.alloc(64);
  const out = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await new Promise((r) => {
      a.once('message', r);
      a.send(msg, b.address().port, '127.0.0.1');
    });
    out.push(performance.now() - t0);
  }
  a.close();
  b.close();
  return out;
}

async function write({ Opcode, WcStatus }, qp, cq, mr, remote, wrId) {
  qp.postSend({ wrId, opcode: Opcode.RdmaWrite, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }], remoteAddr: remote.addr, rkey: remote.rkey });
  for (;;) {
    await cq.wait(5000);
    const [wc] = cq.poll(1);
    if (wc) {
      if (wc.status !== WcStatus.Success) throw new Error(`write ${wrId}: status ${wc.status}`);
      return;
    }
  }
}

async function once(m) {
  const ALL = m.Access.LocalWrite | m.Access.RemoteWrite | m.Access.RemoteRead;
  const [a, b] = await Promise.all([m.openDevice({ transport: 'udp', mtu: 1500 }), m.openDevice({ transport: 'udp', mtu: 1500 })]);
  const side = (d) => {
    const pd = d.allocPd();
    const cq = d.createCq({ depth: 16 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
    return { qp, cq, mr: pd.regMr(4096, ALL) };
  };
  const x = side(a);
  const y = side(b);
  const t0 = performance.now();
  await Promise.all([x.qp.connect({ address: b.address, qpn: y.qp.qpn }), y.qp.connect({ address: a.address, qpn: x.qp.qpn })]);
  await write(m, x.qp, x.cq, x.mr, y.mr, 1);
  const first = performance.now() - t0;
  // The same write once the context exists: the median of 21 more.
  const ws = [];
  for (let i = 0; i < 21; i++) {
    const t1 = performance.now();
    await write(m, x.qp, x.cq, x.mr, y.mr, 2 + i);
    ws.push(performance.now() - t1);
  }
  const warm = quantile(ws, 0.5);
  await a.close();
  await b.close();
  return { first, warm };
}

for (const m of builds) await once(m); // warm up the JIT and the wasm compile cache
const rtt = await rawRtt(Math.max(200, N * 5));
const first = builds.map(() => []);
const warm = builds.map(() => []);
for (let i = 0; i < N; i++) {
  for (let k = 0; k < builds.length; k++) {
    const r = await once(builds[k]);
    first[k].push(r.first);
    warm[k].push(r.warm);
  }
}
const base = quantile(rtt, 0.5);
const rows = [{ case: 'raw node:dgram 64 B round trip (baseline)', xs: rtt }];
dists.forEach((d, k) => {
  rows.push({ case: `[${k ? 'B' : 'A'}] 64 B RdmaWrite on a warm QP`, xs: warm[k] });
  rows.push({ case: `[${k ? 'B' : 'A'}] first contact: connect both sides + first 64 B RdmaWrite`, xs: first[k] });
});
console.log(`A: ${dists[0]}${dists[1] ? `\nB: ${dists[1]}` : ''}\n${N} fresh device pairs each, alternated`);
console.table(rows.map((r) => ({
  case: r.case, p25_ms: quantile(r.xs, 0.25).toFixed(3), p50_ms: quantile(r.xs, 0.5).toFixed(3), p50_x_raw_rtt: (quantile(r.xs, 0.5) / base).toFixed(1),
})));
