// UDP transport goodput between two processes on 127.0.0.1, against raw node:dgram moving
// the same bytes between the same two processes in the same run; then the transport under
// 1% and 5% receive-side loss (a seeded drop hook) as a fraction of its lossless goodput.
// A plain timed script (tinybench's per-iteration model does not fit a streaming transfer).
// Run: npx tsc -p tsconfig.build.json && node bench/udp.bench.mjs
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { UdpSockets } from '../dist/transport/udp/socket.js';

const BYTES = Number(process.env.UDP_BENCH_BYTES ?? 64 << 20);

if (process.argv[2] === '--peer') {
  // The receiving process: a raw socket and transports, driven by JSON lines on stdin.
  const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
  let raw;
  let rawBytes = 0;
  let rawLast = 0;
  let t;
  let rxBytes = 0;
  createInterface({ input: process.stdin }).on('line', async (line) => {
    const m = JSON.parse(line);
    if (m.raw) {
      rawBytes = 0;
      raw = dgram.createSocket("udp4");
      raw.on('message', (msg) => {
        rawBytes += msg.length;
        rawLast = performance.now();
      });
      await new Promise((r) => raw.bind(0, '127.0.0.1', r));
      try { raw.setRecvBufferSize(4 << 20); } catch {}
      out({ rawPort: raw.address().port });
    } else if (m.rawReport) {
      out({ rawBytes, rawLast: rawLast + performance.timeOrigin });
      raw.close();
    } else if (m.open) {
      let seed = 12345;
      const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
      rxBytes = 0;
      t = await UdpSockets.open(
        { mtu: m.mtu, rxFilter: m.loss > 0 ? () => rnd() >= m.loss : undefined },
        { onDelivery(d) { rxBytes += d.payload.length; } },
      );
      out({ addr: t.address });
    } else if (m.close) {
      out({ rxBytes });
      await t.close();
    } else if (m.exit) {
      process.exit(0);
    }
  });
} else {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--peer'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  const queue = [];
  let waiter;
  lines.on('line', (l) => {
    queue.push(JSON.parse(l));
    waiter?.();
  });
  const ask = async (msg) => {
    child.stdin.write(JSON.stringify(msg) + '\n');
    while (queue.length === 0) await new Promise((r) => (waiter = r));
    waiter = undefined;
    return queue.shift();
  };

  async function rawRun(size) {
    const { rawPort } = await ask({ raw: true });
    const s = dgram.createSocket('udp4');
    await new Promise((r) => s.bind(0, '127.0.0.1', r));
    s.connect(rawPort, '127.0.0.1');
    await new Promise((r) => s.once('connect', r));
    const buf = new Uint8Array(size).fill(7);
    const n = Math.ceil(BYTES / size);
    const t0 = performance.now();
    let sent = 0;
    // Blast in batches, yielding so the send queue drains (raw UDP has no flow control).
    await new Promise((resolve) => {
      const pump = () => {
        for (let i = 0; i < 64 && sent < n; i++, sent++) s.send(buf);
        if (sent < n) setImmediate(pump);
        else resolve();
      };
      pump();
    });
    await new Promise((r) => setTimeout(r, 300));
    const { rawBytes, rawLast } = await ask({ rawReport: true });
    s.close();
    const secs = (rawLast - performance.timeOrigin - t0) / 1000;
    return { sent: n * size, received: rawBytes, mbps: rawBytes / secs / 1e6, lossPct: (100 * (1 - rawBytes / (n * size))) };
  }

  async function transportRun(mtu, loss) {
    const { addr } = await ask({ open: true, mtu, loss });
    let acked = 0;
    let failed = 0;
    let done;
    const t = await UdpSockets.open({ mtu }, {
      onAcked(ids) { acked += ids.length; pump(); },
      onFailed(f) { failed += f.length; pump(); },
    });
    const size = t.endpoint.maxPayload;
    const payload = new Uint8Array(size).fill(9);
    const n = Math.ceil(BYTES / size);
    let sent = 0;
    const t0 = performance.now();
    const finished = new Promise((r) => (done = r));
    function pump() {
      while (sent < n && sent - acked - failed < 1024) {
        t.send(addr, payload);
        sent++;
      }
      if (acked + failed === n) done();
    }
    pump();
    await finished;
    const secs = (performance.now() - t0) / 1000;
    const ctx = t.endpoint.context(addr)?.counters;
    const { rxBytes } = await ask({ close: true });
    await t.close();
    return { bytes: n * size, rxBytes, failed, mbps: (n * size) / secs / 1e6, retransmits: ctx?.retransmits ?? 0, timeouts: ctx?.timeouts ?? 0 };
  }

  const rows = [];
  const raw64 = await rawRun(65000 - 120);
  rows.push({ case: 'raw node:dgram, 64 KB datagrams (lossy, no recovery)', 'MB/s': raw64.mbps.toFixed(0), note: `${raw64.lossPct.toFixed(1)}% lost` });
  const rel64 = await transportRun(65000, 0);
  rows.push({ case: 'sabre udp, mtu 65000', 'MB/s': rel64.mbps.toFixed(0), note: `ratio vs raw ${(rel64.mbps / raw64.mbps).toFixed(2)}; retx ${rel64.retransmits}` });
  const raw1k = await rawRun(1472 - 80);
  rows.push({ case: 'raw node:dgram, 1392 B datagrams (lossy, no recovery)', 'MB/s': raw1k.mbps.toFixed(0), note: `${raw1k.lossPct.toFixed(1)}% lost` });
  const rel1k = await transportRun(1472, 0);
  rows.push({ case: 'sabre udp, mtu 1472', 'MB/s': rel1k.mbps.toFixed(0), note: `ratio vs raw ${(rel1k.mbps / raw1k.mbps).toFixed(2)}; retx ${rel1k.retransmits}` });
  for (const loss of [0.01, 0.05]) {
    const r = await transportRun(1472, loss);
    rows.push({ case: `sabre udp, mtu 1472, ${loss * 100}% rx loss`, 'MB/s': r.mbps.toFixed(0), note: `${(r.mbps / rel1k.mbps).toFixed(2)} of lossless; retx ${r.retransmits}, RTOs ${r.timeouts}, failed ${r.failed}` });
  }
  console.log(`UDP transport goodput, ${BYTES >> 20} MiB per case, 2 processes on 127.0.0.1`);
  console.table(rows);
  await ask({ exit: true }).catch(() => {});
  child.kill();
}
