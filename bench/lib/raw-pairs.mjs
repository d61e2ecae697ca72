// The many-socket raw baseline of the multi-QP bench: n worker-thread pairs of ack-clocked
// node:dgram (src/cli/baseline/raw-dgram.ts), each pair its own socket on both sides. Each sink
// thread copies every datagram into a SharedArrayBuffer (as a NIC thread must place what it
// receives into registered memory), so the pairs measure what node:dgram itself moves over n
// cores, the floor the NIC threads of `workers: n` are held against.
//   target: const sinks = await startSinks(n)  → sinks.ports ([{ port, rcvbuf }]), sinks.close() → bytes received
//   requester: await runSenders(sinks.ports, bytesEach) → { bytes, secs }
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';

const SIZE = 64000;
const SLOTS = 16;
const RAW = new URL('../../dist/cli/baseline/raw-dgram.js', import.meta.url).href;

function spawn(data) {
  const w = new Worker(fileURLToPath(import.meta.url), { workerData: data });
  const next = () => new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  return { w, next };
}

/** n sink threads; each answers its { port, rcvbuf } at once and its byte count when told to close. */
export async function startSinks(n) {
  const ws = Array.from({ length: n }, () => spawn({ role: 'sink' }));
  const ports = await Promise.all(ws.map((x) => x.next()));
  return {
    ports,
    async close() {
      const counts = await Promise.all(ws.map((x) => { const p = x.next(); x.w.postMessage('close'); return p; }));
      await Promise.all(ws.map((x) => x.w.terminate()));
      return counts.reduce((a, b) => a + b, 0);
    },
  };
}

/** One sender thread per sink, bytesEach each; the aggregate over the first start to the last ack. */
export async function runSenders(ports, bytesEach) {
  const ws = ports.map((p) => spawn({ role: 'send', ...p, messages: Math.ceil(bytesEach / SIZE) }));
  const rs = await Promise.all(ws.map((x) => x.next()));
  await Promise.all(ws.map((x) => x.w.terminate()));
  const t0 = Math.min(...rs.map((r) => r.t0));
  const t1 = Math.max(...rs.map((r) => r.t1));
  return { bytes: rs.reduce((a, r) => a + r.bytes, 0), secs: (t1 - t0) / 1000 };
}

if (!isMainThread && workerData?.role) {
  const { RawDgramSink, sendRawDgram } = await import(RAW);
  if (workerData.role === 'sink') {
    const region = new Uint8Array(new SharedArrayBuffer(SLOTS * SIZE));
    let slot = 0;
    const sink = await RawDgramSink.open('127.0.0.1', 4 << 20, {
      work: (msg) => {
        region.set(msg.subarray(4), slot * SIZE);
        slot = (slot + 1) % SLOTS;
      },
    });
    parentPort.postMessage({ port: sink.port, rcvbuf: sink.rcvbuf });
    parentPort.once('message', async () => {
      const st = sink.stats();
      await sink.close();
      parentPort.postMessage(st.bytes);
    });
  } else {
    const t0 = performance.timeOrigin + performance.now();
    const r = await sendRawDgram({ host: '127.0.0.1', port: workerData.port, rcvbuf: workerData.rcvbuf, size: SIZE, messages: workerData.messages });
    const t1 = performance.timeOrigin + r.completed[r.acked - 1];
    parentPort.postMessage({ t0, t1, bytes: r.acked * SIZE });
  }
}
