// How cheaply the UDP endpoint refuses hostile datagrams (issue #11), one core, sans-I/O (no
// socket: node:dgram's own ~5-10 µs a datagram comes on top of every row alike). Each case
// feeds 1000 prepared datagrams (valid CRC32C; the endpoints ask for integrity crc32c so they
// reach the checks named, docs/integrity.md) to endpoint.receive() and drains what it
// answers; the baseline is what the endpoint does for a datagram it accepts (an in-context
// ACK), measured in the same run.
// Run: npx tsc -p tsconfig.build.json && node bench/udp-refuse.bench.mjs
import { crc32c } from '@node-rs/crc32';
import { Bench } from 'tinybench';
import { UdpEndpoint } from '../dist/transport/udp/endpoint.js';
import { UdpType, encodeUdpHdr, udpHeaderLength } from '../dist/wire/udp.js';

const BATCH = 1000;
const A = { host: '10.0.0.1', port: 1 };
const B = { host: '10.0.0.2', port: 2 };
const ZERO_COOKIE = { time: 0, mac: new Uint8Array(8) };

function seal(h, payload = h.type === UdpType.Ack || h.type === UdpType.Reset ? new Uint8Array(0) : new Uint8Array(16)) {
  const hdr = { type: UdpType.Data, ackReq: false, retx: false, window: 16, srcCtx: 7, dstCtx: 0, psn: 0, ackPsn: 0, tsVal: 1, tsEcr: 0, dstQpn: 0, srcQpn: 0, sack: [], ...h };
  const hl = udpHeaderLength(hdr);
  const buf = Buffer.alloc(hl + payload.length + 4);
  encodeUdpHdr(hdr, buf, 0);
  buf.set(payload, hl);
  buf.writeUInt32LE(crc32c(buf.subarray(0, hl + payload.length)), hl + payload.length);
  return new Uint8Array(buf);
}

const bytes = (d) => new Uint8Array(Buffer.concat(d.parts));

/** B with a live context for A (a payload each way moved), and A's ids. */
function established() {
  const a = new UdpEndpoint({ mtu: 1472, integrity: 'crc32c' });
  const b = new UdpEndpoint({ mtu: 1472, integrity: 'crc32c' });
  a.send(B, new Uint8Array(16), 0);
  b.send(A, new Uint8Array(16), 0);
  for (let i = 0; i < 10; i++) {
    const ra = a.poll(0);
    const rb = b.poll(0);
    for (const d of ra.datagrams) b.receive(bytes(d), A, 0);
    for (const d of rb.datagrams) a.receive(bytes(d), B, 0);
    for (const d of ra.delivered) a.release(d.ctx);
    for (const d of rb.delivered) b.release(d.ctx);
  }
  const ca = a.context(B);
  return { b, aId: ca.localId, bId: ca.peerId };
}

const cases = [];
{
  const { b, aId, bId } = established();
  const acks = Array.from({ length: BATCH }, () => seal({ type: UdpType.Ack, srcCtx: aId, dstCtx: bId, ackPsn: 1 }));
  cases.push(['accepted: in-context ACK (baseline)', b, acks, A]);
}
{
  const { b, aId, bId } = established();
  const sacks = Array.from({ length: BATCH }, (_, i) => seal({ type: UdpType.Ack, srcCtx: aId, dstCtx: bId, ackPsn: 1, sack: [{ start: 2, end: 0x8000_0000 + i }] }));
  cases.push(['refused: on-path SACK [2, 2^31) (badSack)', b, sacks, A]);
}
{
  const ep = new UdpEndpoint({ mtu: 1472, integrity: 'crc32c' });
  const first = Array.from({ length: BATCH }, (_, i) => seal({ srcCtx: i + 1, cookie: ZERO_COOKIE }));
  cases.push(['refused: first contact, answered with a COOKIE', ep, first, A]);
}
{
  const ep = new UdpEndpoint({ mtu: 1472, integrity: 'crc32c' });
  const forged = Array.from({ length: BATCH }, (_, i) => seal({ srcCtx: i + 1, cookie: { time: 1, mac: new Uint8Array(8).fill(i) }, token: new Uint8Array(8) }));
  cases.push(['refused: forged cookie echo (bad mac), answered with a COOKIE', ep, forged, A]);
}
{
  const ep = new UdpEndpoint({ mtu: 1472, integrity: 'crc32c' });
  const stray = Array.from({ length: BATCH }, (_, i) => seal({ type: UdpType.Ack, srcCtx: i + 1, dstCtx: 0xdead0000 + i }));
  cases.push(['refused: unknown context, RESET rate-limited', ep, stray, A]);
}
{
  const ep = new UdpEndpoint({ mtu: 1472, integrity: 'crc32c' });
  const acks = Array.from({ length: BATCH }, (_, i) => seal({ type: UdpType.Ack, srcCtx: i + 1, sack: [{ start: 1, end: 0x8000_0000 }] }));
  cases.push(['refused: ACK from an unknown sender (the issue\'s 52 bytes)', ep, acks, A]);
}

const bench = new Bench({ name: 'udp endpoint refusals', time: 800, warmupTime: 200 });
let now = 1;
for (const [name, ep, batch, from] of cases) {
  bench.add(name, () => {
    now += 0.001;
    for (let i = 0; i < batch.length; i++) ep.receive(batch[i], from, now);
    ep.poll(now);
  });
}
await bench.run();
const base = bench.tasks[0].result.latency.mean;
console.table(bench.tasks.map((t) => {
  const perDatagramNs = (t.result.latency.mean * 1e6) / BATCH;
  return { case: t.name, ns_per_datagram: perDatagramNs.toFixed(0), datagrams_per_s: Math.round(1e9 / perDatagramNs), x_baseline: (t.result.latency.mean / base).toFixed(2) };
}));
for (const [name, ep] of cases) {
  const s = ep.stats();
  if (s.contexts > 1) throw new Error(`${name}: ${s.contexts} contexts`);
}
