// A sabre device in its own process, driven over the fork IPC channel (advanced serialization,
// so Uint8Arrays and bigints pass as they are). The test process owns the other device and
// asks this one to register memory, create QPs, post work, poll and hand back bytes: every
// check compares real memory on both sides of real sockets on 127.0.0.1 (udp or tcp, as `open` says).
import { connect as cmConnect, openDevice } from '../../../dist/index.js';

let dev;
let pd;
let cq;
const qps = [];
const mrs = [];
const ahs = [];

function fill(buf, seed) {
  let x = seed >>> 0 || 1;
  for (let i = 0; i < buf.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    buf[i] = x & 0xff;
  }
}

async function take(n, timeoutMs) {
  const out = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`child: ${out.length}/${n} completions in ${timeoutMs} ms`);
    await cq.wait(left);
    out.push(...cq.poll(n - out.length));
  }
  return out;
}

function wrOf(w) {
  const x = { ...w };
  if (x.ah !== undefined) x.ah = ahs[x.ah];
  return x;
}

const ops = {
  async open({ transport, mtu, memoryBytes, host }) {
    dev = await openDevice({ transport, host: host ?? '127.0.0.1', port: 0, ...(mtu ? { mtu } : {}), ...(memoryBytes ? { memoryBytes } : {}) });
    pd = dev.allocPd();
    cq = dev.createCq({ depth: 1 << 16 });
    return dev.address;
  },
  mr({ length, access, seed }) {
    const mr = pd.regMr(length, access);
    if (seed) fill(mr.buffer, seed);
    mrs.push(mr);
    return { h: mrs.length - 1, addr: mr.addr, length: mr.length, lkey: mr.lkey, rkey: mr.rkey };
  },
  qp(init) {
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 4096, maxRecvWr: 4096, maxSge: 16, ...init });
    qps.push(qp);
    return { h: qps.length - 1, qpn: qp.qpn };
  },
  async connect({ qp, address, qpn }) {
    await qps[qp].connect({ address, qpn });
  },
  /** rdma_cm-style connect to a listener; the QP is kept like any other. */
  async cmConnect({ address, service }) {
    const qp = await cmConnect(dev, address, { pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 4096, maxRecvWr: 4096, maxSge: 16 }, service });
    qps.push(qp);
    return { h: qps.length - 1, qpn: qp.qpn };
  },
  /** Post `count` writes of `len` bytes back to back (a long transfer to be killed in). */
  stream({ qp, mr, len, count, remoteAddr, rkey }) {
    const m = mrs[mr];
    for (let i = 0; i < count; i++) qps[qp].postSend({ wrId: i, opcode: 2, sgList: [{ addr: m.addr, length: len, lkey: m.lkey }], remoteAddr, rkey, signaled: false });
  },
  ah({ address }) {
    ahs.push(pd.createAh({ address }));
    return ahs.length - 1;
  },
  postRecv({ qp, wrs }) {
    for (const w of wrs) qps[qp].postRecv(w);
  },
  postSend({ qp, wrs }) {
    for (const w of wrs) qps[qp].postSend(wrOf(w));
  },
  poll({ n, timeoutMs }) {
    return take(n, timeoutMs ?? 10_000);
  },
  bytes({ mr, off, len }) {
    return mrs[mr].buffer.slice(off, off + len);
  },
  setBytes({ mr, off, data }) {
    mrs[mr].buffer.set(data, off);
  },
  fill({ mr, seed }) {
    fill(mrs[mr].buffer, seed);
  },
  dereg({ mr }) {
    mrs[mr].deregister();
  },
  state({ qp }) {
    return qps[qp].state;
  },
  stats() {
    return dev.stats();
  },
  async close() {
    await dev.close();
    setImmediate(() => process.exit(0));
  },
};

process.on('message', async (m) => {
  try {
    const value = await ops[m.op](m.args ?? {});
    process.send({ id: m.id, ok: true, value });
  } catch (e) {
    process.send({ id: m.id, ok: false, error: String(e?.stack ?? e), code: e?.code });
  }
});
process.on('disconnect', () => process.exit(0));
