// The transport's own cost per payload in each integrity mode, without sockets: two sans-I/O
// endpoints (src/transport/udp/endpoint.ts) hand each other every datagram in one process, so
// what is timed is framing, trailer, checks and the reliability layer — no kernel, no libuv.
// 64 B payloads one at a time (a ping-pong's datagrams: "64 B not worse than today", today
// being crc32c) and 64,000-byte payloads (what fits a 65000-byte datagram) in windows of 32 (datagram copy included: each crosses as
// one joined buffer, as a socket would hand it over). Ratios against crc32c in the same run.
// Run: npm run build && node bench/udp-integrity.bench.mjs
import { UdpEndpoint } from '../dist/transport/udp/endpoint.js';
import { crc32cIn } from '../dist/kernels/crc32c-any.js';
import { own } from '../dist/kernels/scratch.js';

// The CRC32C the udp link uses (byte table up to 256 bytes, the kernel above), not the
// endpoint's copy-always default: "today" as a device runs it.
const ownMem = { u8: () => own.u8, kernels: own.kernels };
const crc32c = (d, prev = 0) => crc32cIn(ownMem, d, prev);

const A = { host: '10.0.0.1', port: 1 };
const B = { host: '10.0.0.2', port: 2 };
const MODES = (process.env.UDP_INTEGRITY_MODES ?? 'crc32c,xxh3,none').split(',');
const REPS = Number(process.env.UDP_INTEGRITY_REPS ?? 3);

function pair(mode) {
  const a = new UdpEndpoint({ mtu: 65000, integrity: mode, crc32c });
  const b = new UdpEndpoint({ mtu: 65000, integrity: mode, crc32c });
  let now = 0;
  const join = (parts) => {
    if (parts.length === 1) return parts[0];
    let n = 0;
    for (const p of parts) n += p.length;
    const o = new Uint8Array(n);
    let at = 0;
    for (const p of parts) {
      o.set(p, at);
      at += p.length;
    }
    return o;
  };
  const turn = () => {
    now += 0.01;
    const ra = a.poll(now);
    for (const d of ra.datagrams) b.receive(join(d.parts), A, now);
    const rb = b.poll(now);
    for (const d of rb.delivered) b.release(d.ctx);
    for (const d of rb.datagrams) a.receive(join(d.parts), B, now);
    return rb.delivered.length;
  };
  return { a, b, turn, get now() { return now; } };
}

function run(mode, size, n, window) {
  const p = pair(mode);
  const payload = new Uint8Array(size).fill(7);
  // Handshake and warm-up.
  for (let i = 0; i < 200; i++) {
    p.a.send(B, payload, p.now);
    for (let k = 0; k < 4; k++) p.turn();
  }
  if (p.a.integrityOf(B) !== mode) throw new Error(`${mode}: settled ${p.a.integrityOf(B)}`);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let sent = 0;
  let got = 0;
  while (got < n) {
    while (sent < n && sent - got < window) {
      p.a.send(B, payload, p.now);
      sent++;
    }
    got += p.turn();
  }
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { usPerPayload: ((c.user + c.system) / n), wallUsPerPayload: (wall * 1000) / n };
}

const rows = [];
for (const [size, n, window] of [[64, 100_000, 1], [64_000, 20_000, 32]]) {
  const res = {};
  for (let rep = 0; rep < REPS; rep++) {
    for (const mode of MODES) {
      const r = run(mode, size, n, window);
      if (!res[mode] || r.usPerPayload < res[mode].usPerPayload) res[mode] = r;
    }
  }
  for (const mode of MODES) {
    rows.push({ payload: size, window, mode, 'CPU µs / payload': res[mode].usPerPayload.toFixed(2), '÷ crc32c': res.crc32c ? (res[mode].usPerPayload / res.crc32c.usPerPayload).toFixed(2) : '-' });
  }
}
console.log(`sabre udp endpoints, both in this process, no sockets: CPU per payload delivered and acked (best of ${REPS})`);
console.table(rows);
