// TCP transport vs raw node:net, two processes on loopback, same run.
//   goodput: 64 KiB RDMA Writes framed as FPDUs (MULPDU-sized DDP segments, CRC32C by the WASM
//            kernel on both ends, receiver stages in device memory and places the payload with a
//            copy) vs raw net.Socket writes of the same 64 KiB buffers (receiver only counts).
//   latency: 64 B Send round trip (FPDU both ways, echoed by the peer) vs a raw 64 B ping-pong,
//            both with setNoDelay.
// Run: npx tsc -p tsconfig.build.json && node bench/tcp.bench.mjs
import { fork } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { DeviceMemory } from '../dist/dataplane/device-memory.js';
import { MpaConnector } from '../dist/transport/tcp/connector.js';
import { encodeDdp, RdmapOpcode } from '../dist/wire/rdmap.js';

const MSG = 64 * 1024;
const MSGS = Number(process.env.TCP_BENCH_MSGS ?? 4000);
const RTS = Number(process.env.TCP_BENCH_RTS ?? 5000);
const ROUNDS = 3;
// TCP_BENCH_CRC=0 turns CRC off on both sides (to see what the CRC costs).
const CRC = process.env.TCP_BENCH_CRC !== '0';

async function child() {
  const dm = await DeviceMemory.create({ initialBytes: 32 << 20, regionEntries: 16, workerSlots: 0 });
  const sink = dm.alloc(MSG * 2);
  // Raw server: counts bytes, acks each full batch; echoes in ping-pong mode.
  const raw = net.createServer({ noDelay: true }, (s) => {
    let mode = null;
    let need = 0;
    s.on('data', (b) => {
      if (mode === null) {
        mode = b[0];
        b = b.subarray(1);
      }
      if (mode === 1) {
        need += b.length;
        if (need >= MSG * MSGS) {
          need -= MSG * MSGS;
          s.write(Buffer.of(1));
        }
      } else {
        s.write(b);
      }
    });
  });
  await new Promise((r) => raw.listen(0, '127.0.0.1', r));
  const ep = await MpaConnector.listen({ dp: dm, connection: { mpa: { crc: CRC } } });
  ep.onConnectRequest((req) => {
    void req.accept(2).then((c) => {
      let got = 0;
      const echo = new Uint8Array(18);
      c.onUlpdus((batch, u8) => {
        for (const u of batch) {
          const tagged = (u8[u.ptr] & 0x80) !== 0;
          if (tagged) {
            // Place: the payload after the 14-byte tagged header goes to the sink at its TO.
            const to = (u8[u.ptr + 10] << 24 | u8[u.ptr + 11] << 16 | u8[u.ptr + 12] << 8 | u8[u.ptr + 13]) >>> 0;
            const len = u.len - 14;
            u8.copyWithin(sink + to, u.ptr + 14, u.ptr + 14 + len);
            got += len;
            if (got >= MSG * MSGS) {
              got -= MSG * MSGS;
              encodeDdp({ tagged: false, last: true, opcode: RdmapOpcode.Send, ulp: 0, qn: 0, msn: 1, mo: 0 }, echo, 0);
              c.send(echo);
            }
          } else {
            // Echo the Send back (header + payload copied out of the staging area).
            c.send(u8.slice(u.ptr, u.ptr + 18), [u8.subarray(u.ptr + 18, u.ptr + u.len)]);
          }
        }
      });
    });
  });
  process.send({ raw: raw.address().port, sabre: ep.address });
}

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: s[Math.floor(s.length / 2)], p99: s[Math.floor(s.length * 0.99)], mean: s.reduce((a, b) => a + b, 0) / s.length };
}

async function rawGoodput(port, payload) {
  const s = net.connect({ host: '127.0.0.1', port, noDelay: true });
  await new Promise((r) => s.once('connect', r));
  s.write(Buffer.of(1));
  const done = new Promise((r) => s.once('data', r));
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < MSGS; i++) {
    if (!s.write(payload)) await new Promise((r) => s.once('drain', r));
  }
  await done;
  const ns = Number(process.hrtime.bigint() - t0);
  s.destroy();
  return (MSG * MSGS) / (ns / 1e9);
}

async function rawPingPong(port) {
  const s = net.connect({ host: '127.0.0.1', port, noDelay: true });
  await new Promise((r) => s.once('connect', r));
  s.write(Buffer.of(2));
  const msg = Buffer.alloc(64, 7);
  const lat = [];
  let pending = 0;
  let resolve;
  s.on('data', (b) => {
    pending -= b.length;
    if (pending <= 0) resolve();
  });
  for (let i = 0; i < RTS; i++) {
    pending = 64;
    const p = new Promise((r) => (resolve = r));
    const t0 = process.hrtime.bigint();
    s.write(msg);
    await p;
    lat.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  s.destroy();
  return stats(lat.slice(100));
}

async function main() {
  const kid = fork(fileURLToPath(import.meta.url), ['child'], { stdio: 'inherit' });
  const ports = await new Promise((r) => kid.once('message', r));
  const dm = await DeviceMemory.create({ initialBytes: 32 << 20, regionEntries: 16, workerSlots: 0 });
  const ep = await MpaConnector.listen({ dp: dm, fallbackMs: 0, connection: { mpa: { crc: CRC } } });
  const conn = await ep.connectQp(1, { address: ports.sabre, qpn: 2 });
  // The source buffer lives in device memory, like a registered region: CRC runs on it in place.
  const src = dm.alloc(MSG);
  dm.u8().subarray(src, src + MSG).forEach((_, i, a) => (a[i] = (i * 13) & 0xff));
  const srcView = () => dm.u8().subarray(src, src + MSG);
  const plain = Buffer.from(srcView());

  let onMsg = null;
  conn.onUlpdus((batch) => {
    for (let i = 0; i < batch.length; i++) onMsg?.();
  });
  const hdrLen = 14;
  const segPayload = conn.mulpdu - hdrLen;
  const hdrs = [];
  for (let off = 0; off < MSG; off += segPayload) {
    const h = new Uint8Array(hdrLen);
    encodeDdp({ tagged: true, last: off + segPayload >= MSG, opcode: RdmapOpcode.RdmaWrite, stag: 0x100, to: off }, h, 0);
    hdrs.push({ h, off, len: Math.min(segPayload, MSG - off) });
  }

  async function sabreGoodput() {
    const done = new Promise((r) => (onMsg = r));
    const t0 = process.hrtime.bigint();
    const v = srcView();
    for (let i = 0; i < MSGS; i++) {
      let ok = true;
      for (const s of hdrs) ok = conn.send(s.h, [v.subarray(s.off, s.off + s.len)]);
      if (!ok) await new Promise((r) => conn.once('drain', r));
    }
    await done;
    const ns = Number(process.hrtime.bigint() - t0);
    return (MSG * MSGS) / (ns / 1e9);
  }

  async function sabrePingPong() {
    const hdr = new Uint8Array(18);
    encodeDdp({ tagged: false, last: true, opcode: RdmapOpcode.Send, ulp: 0, qn: 0, msn: 1, mo: 0 }, hdr, 0);
    const payload = new Uint8Array(64).fill(7);
    const lat = [];
    for (let i = 0; i < RTS; i++) {
      const p = new Promise((r) => (onMsg = r));
      const t0 = process.hrtime.bigint();
      conn.send(hdr, [payload]);
      await p;
      lat.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
    return stats(lat.slice(100));
  }

  const gp = { raw: [], sabre: [] };
  for (let r = 0; r < ROUNDS; r++) {
    gp.raw.push(await rawGoodput(ports.raw, plain));
    gp.sabre.push(await sabreGoodput());
  }
  const rawLat = await rawPingPong(ports.raw);
  const sabreLat = await sabrePingPong();
  const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const rows = [
    { case: '64 KiB write goodput, raw node:net', value: `${(med(gp.raw) / 1e9).toFixed(2)} GB/s`, runs: gp.raw.map((x) => (x / 1e9).toFixed(2)).join(' ') },
    { case: '64 KiB RDMA Write goodput, sabre MPA/FPDU+CRC', value: `${(med(gp.sabre) / 1e9).toFixed(2)} GB/s`, runs: gp.sabre.map((x) => (x / 1e9).toFixed(2)).join(' ') },
    { case: '64 B round trip, raw net (p50 / p99 / mean µs)', value: `${rawLat.p50.toFixed(1)} / ${rawLat.p99.toFixed(1)} / ${rawLat.mean.toFixed(1)}`, runs: '' },
    { case: '64 B Send round trip, sabre (p50 / p99 / mean µs)', value: `${sabreLat.p50.toFixed(1)} / ${sabreLat.p99.toFixed(1)} / ${sabreLat.mean.toFixed(1)}`, runs: '' },
  ];
  console.table(rows);
  console.log(`goodput ratio sabre/raw (median of ${ROUNDS}): ${(med(gp.sabre) / med(gp.raw)).toFixed(2)}x  (target >= 0.7)`);
  console.log(`round-trip ratio sabre/raw: p50 ${(sabreLat.p50 / rawLat.p50).toFixed(2)}x, mean ${(sabreLat.mean / rawLat.mean).toFixed(2)}x  (target <= 1.5)`);
  console.log(`MULPDU ${conn.mulpdu} (EMSS 65483 loopback), ${hdrs.length} FPDUs per 64 KiB message, CRC ${conn.result.crc ? 'on' : 'off'}`);
  conn.close();
  await ep.close();
  kid.kill();
}

if (process.argv[2] === 'child') await child();
else await main();
