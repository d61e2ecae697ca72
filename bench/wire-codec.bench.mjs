// The per-datagram codecs, one core, no I/O: DDP/RDMAP headers (src/wire/rdmap.ts), the UDP
// reliability header (src/wire/udp.ts), the UDP engine envelope (src/transport/udp/frame-codec.ts),
// FPDU framing without CRC (src/transport/tcp/fpdu.ts, src/wire/mpa.ts) and the NIC ring
// records (src/nic/wqe.ts). Given a second build (`node bench/wire-codec.bench.mjs <dist>`),
// each case runs on both builds in alternating rounds and the table shows this build's time
// over that one's (a ratio < 1: this build is faster), best of ROUNDS rounds each. Without one it
// prints this build's times.
// Run: npx tsc -p tsconfig.build.json && node bench/wire-codec.bench.mjs [/path/to/other/dist]
// (HERE=/path/to/dist measures that build in place of this checkout's; a build elsewhere needs
// its package.json beside its dist/, and build/ for the modules that load the data plane.)
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROUNDS = 15;
const OPS = 200_000;

async function load(dist) {
  const m = (p) => import(pathToFileURL(resolve(dist, p)).href);
  const [rdmap, udp, mpa, frame, fpdu, wqe] = await Promise.all([
    m('wire/rdmap.js'), m('wire/udp.js'), m('wire/mpa.js'), m('transport/udp/frame-codec.js'), m('transport/tcp/fpdu.js'), m('nic/wqe.js'),
  ]);
  return { rdmap, udp, mpa, frame, fpdu, wqe };
}

/** The cases: each returns a function doing one operation and giving back a number (kept live). */
function cases(c) {
  const tagged = new Uint8Array(64);
  c.rdmap.encodeDdp({ tagged: true, last: true, opcode: 0, stag: 0x1234, to: 0x1_0000_2000 }, tagged, 0);
  const untagged = new Uint8Array(64);
  c.rdmap.encodeDdp({ tagged: false, last: true, opcode: 3, ulp: 0, qn: 0, msn: 7, mo: 4096 }, untagged, 0);
  const udpHdr = {
    type: c.udp.UdpType.Data, ackReq: false, retx: false, window: 64, srcCtx: 7, dstCtx: 9, psn: 100, ackPsn: 50,
    tsVal: 1, tsEcr: 2, dstQpn: 3, srcQpn: 4, sack: [],
  };
  const udpBuf = new Uint8Array(128);
  c.udp.encodeUdpHdr(udpHdr, udpBuf, 0);
  const seg = { kind: 'seg', env: { srcQpn: 4, dstQpn: 3, ssn: 5, msgLen: 4096, off: 0, ack: 4 }, hdr: tagged.subarray(0, 14), payload: [new Uint8Array(64)] };
  const framed = c.frame.frameBytes(seg);
  const out = [];
  const fpduBuf = new Uint8Array(256);
  fpduBuf.set(untagged.subarray(0, 18), 2);
  c.mpa.sealFpdu(fpduBuf, 0, 18 + 32);
  const framer = new c.fpdu.FpduFramer({ dp: { u8: () => new Uint8Array(0), alloc: () => 0, free() {}, kernels: { crc32c: () => 0 } }, crc: false, markers: false });
  const txBuf = Buffer.alloc(1 << 16);
  let txAt = 0;
  const tx = { buf: txBuf, small(n) { if (txAt + n > txBuf.length) txAt = 0; const a = txAt; txAt += n; return a; }, view() {} };
  const hdr18 = untagged.subarray(0, 18);
  const pay = [new Uint8Array(100)];
  const ringBuf = new DataView(new ArrayBuffer(4096));
  const ring = { dv: ringBuf, reserve: () => 0 };
  const wqe = { qpn: 5, token: 9, opcode: 0, signaled: true, remoteAddr: 0x2_0000_1000, rkey: 77, sges: [{ addr: 0x1000, length: 4096, lkey: 3 }] };
  const into = { qpn: 0, token: 0, opcode: 0, signaled: false, sges: [] };
  const cqe = { cq: 1, token: 2, qpn: 3, status: 0, opcode: 0, byteLen: 4096 };
  const cqeInto = { cq: 0, token: 0, qpn: 0, status: 0, opcode: 0, byteLen: 0 };
  return {
    'decodeDdp tagged': () => { const r = c.rdmap.decodeDdp(tagged, 0, 64); return r.ok ? r.value.stag : 0; },
    'decodeDdp untagged': () => { const r = c.rdmap.decodeDdp(untagged, 0, 64); return r.ok ? r.value.msn : 0; },
    'encodeDdp tagged': () => c.rdmap.encodeDdp({ tagged: true, last: true, opcode: 0, stag: 0x1234, to: 0x1_0000_2000 }, tagged, 0),
    'decodeUdpHdr': () => { const r = c.udp.decodeUdpHdr(udpBuf, 0, 128); return r.ok ? r.value.psn : 0; },
    'encodeUdpHdr': () => c.udp.encodeUdpHdr(udpHdr, udpBuf, 0),
    'decodeFrames seg': () => { out.length = 0; return c.frame.decodeFrames(framed, 3, 4, out) + out.length; },
    'encodeFrame seg': () => c.frame.encodeFrame(seg, framed, 0),
    'openFpdu (no CRC)': () => { const r = c.mpa.openFpdu(fpduBuf, 0, 256); return r.ok ? r.value.ulpduLen : 0; },
    'FpduFramer.frameTo 118 B': () => framer.frameTo(hdr18, pay, tx),
    'writeSendWqe + readSendWqe': () => { c.wqe.writeSendWqe(ring, wqe); return c.wqe.readSendWqe(ringBuf, 0, into).qpn; },
    'writeCqe + readCqe': () => { c.wqe.writeCqe(ring, cqe); return c.wqe.readCqe(ringBuf, 0, cqeInto).byteLen; },
  };
}

function time(fn) {
  let sink = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < OPS; i++) sink += fn() | 0;
  const ns = Number(process.hrtime.bigint() - t0) / OPS;
  if (sink === 0.5) console.log(sink);
  return ns;
}

/** Best of the rounds: on a shared machine other processes only ever add time. */
const best = (xs) => Math.min(...xs);

const here = await load(process.env.HERE ?? resolve(import.meta.dirname, '../dist'));
const otherDir = process.argv[2];
const other = otherDir ? await load(otherDir) : undefined;
const builds = other ? [cases(here), cases(other)] : [cases(here)];
const names = Object.keys(builds[0]);
// Every case once before any is timed: decodeDdp sees tagged and untagged headers before it is
// optimised, rather than deoptimising in the middle of one build's rounds.
for (let w = 0; w < 3; w++) for (const b of builds) for (const name of names) time(b[name]);
const rows = [];
for (const name of names) {
  const ts = builds.map(() => []);
  for (let r = 0; r < ROUNDS; r++) {
    // Alternate which build goes first, so neither always runs on a warmer cache.
    const order = r % 2 === 0 ? builds.map((_, i) => i) : builds.map((_, i) => builds.length - 1 - i);
    for (const i of order) ts[i].push(time(builds[i][name]));
  }
  const [a, b] = ts.map(best);
  rows.push(other ? { case: name, 'this ns/op': a.toFixed(1), 'other ns/op': b.toFixed(1), 'this/other': (a / b).toFixed(3) } : { case: name, 'ns/op': a.toFixed(1) });
}
console.table(rows);
