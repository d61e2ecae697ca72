#!/usr/bin/env node
// Writes the fuzz corpus test/wire/corpus/*.bin once (committed; rerun only to extend it).
// Names say which decoder a file targets and whether it must decode: <decoder>-ok-*.bin /
// <decoder>-bad-*.bin. corpus.test.ts replays every file through every decoder.
// Needs the compiled codecs: npx tsc -p tsconfig.build.json && node test/wire/make-corpus.mjs
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { crc32c } from '@node-rs/crc32';

const here = dirname(fileURLToPath(import.meta.url));
const R = await import(join(here, '../../dist/wire/rdmap.js'));
const M = await import(join(here, '../../dist/wire/mpa.js'));
const U = await import(join(here, '../../dist/wire/udp.js'));
const out = join(here, 'corpus');
mkdirSync(out, { recursive: true });

const crc = (b, o, n) => crc32c(Buffer.from(b.buffer, b.byteOffset + o, n)) >>> 0;
let seed = 0x5eed;
const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) & 0xff;
const enc = (f) => { const b = new Uint8Array(2048); return b.slice(0, f(b, 0)); };
const put = (name, bytes) => writeFileSync(join(out, `${name}.bin`), bytes);
const flip = (b, i, bit) => { const x = b.slice(); x[i] ^= 1 << bit; return x; };

// DDP
const w = enc((b, o) => R.encodeDdp({ tagged: true, last: true, opcode: 0, stag: 0x1234, to: 0x10000 }, b, o));
const s = enc((b, o) => R.encodeDdp({ tagged: false, last: false, opcode: 3, ulp: 0, qn: 0, msn: 1, mo: 1448 }, b, o));
const rr = enc((b, o) => R.encodeDdp({ tagged: false, last: true, opcode: 1, ulp: 0, qn: 1, msn: 9, mo: 0 }, b, o));
put('ddp-ok-write', w);
put('ddp-ok-send', s);
put('ddp-ok-readreq-hdr', rr);
put('ddp-ok-write-payload', Uint8Array.from([...w, ...Array.from({ length: 40 }, rnd)]));
put('ddp-bad-trunc-tagged', w.slice(0, 13));
put('ddp-bad-trunc-untagged', s.slice(0, 17));
put('ddp-bad-empty', new Uint8Array(0));
put('ddp-bad-dv0', flip(w, 0, 0));
put('ddp-bad-rv2', flip(w, 1, 7));
put('ddp-bad-opcode15', Uint8Array.from([0xc1, 0x4f, ...w.slice(2)]));
put('ddp-bad-tagged-send', Uint8Array.from([0xc1, 0x43, ...w.slice(2)]));
put('ddp-bad-untagged-write', Uint8Array.from([0x41, 0x40, ...s.slice(2)]));
put('ddp-bad-to-2p53', Uint8Array.from([...w.slice(0, 6), 0x00, 0x20, 0, 0, 0, 0, 0, 0]));
put('ddp-bad-to-max', Uint8Array.from([...w.slice(0, 6), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]));

// RDMAP payloads
put('readRequest-ok', enc((b, o) => R.encodeReadRequest({ sinkStag: 1, sinkTo: 0x2000, size: 4096, srcStag: 2, srcTo: 0x3000 }, b, o)));
put('readRequest-bad-trunc', enc((b, o) => R.encodeReadRequest({ sinkStag: 1, sinkTo: 0, size: 1, srcStag: 2, srcTo: 0 }, b, o)).slice(0, 27));
const rv = enc((b, o) => R.encodeReadRequestV({ srcs: [{ stag: 1, to: 0, len: 100 }, { stag: 1, to: 4096, len: 28 }], sinks: [{ stag: 9, to: 64, len: 128 }] }, b, o));
put('readRequestV-ok', rv);
put('readRequestV-bad-zero-sinks', Uint8Array.from([rv[0], rv[1], 0, 0, ...rv.slice(4)]));
put('readRequestV-bad-count-65535', Uint8Array.from([0xff, 0xff, 0xff, 0xff, ...rv.slice(4)]));
put('readRequestV-bad-total', Uint8Array.from([...rv.slice(0, 7), 129, ...rv.slice(8)]));
put('readRequestV-bad-trunc', rv.slice(0, rv.length - 1));
put('readComplete-ok', enc((b, o) => R.encodeReadComplete({ imm: 7, len: 128 }, b, o)));
put('immediateData-ok', enc((b, o) => R.encodeImmediateData({ imm: 0xdeadbeef, len: 0 }, b, o)));
put('immediateData-bad-trunc', Uint8Array.from([1, 2, 3, 4, 5, 6, 7]));
const aq = enc((b, o) => R.encodeAtomicRequest({ op: 'fetchAdd', reqId: 1, stag: 5, to: 64, addOrSwap: 1n, addOrSwapMask: 0n, compare: 0n, compareMask: 0n }, b, o));
put('atomicRequest-ok', aq);
put('atomicRequest-bad-subcode1', Uint8Array.from([0, 0, 0, 1, ...aq.slice(4)]));
put('atomicRequest-bad-to', Uint8Array.from([...aq.slice(0, 12), 0xff, ...aq.slice(13)]));
put('atomicResponse-ok', enc((b, o) => R.encodeAtomicResponse({ reqId: 1, value: 41n }, b, o)));
const tcopy = Uint8Array.from([0x00, 0x0e, ...w]);
put('terminate-ok-plain', enc((b, o) => R.encodeTerminate({ layer: 0, etype: 0, ecode: 0xff }, b, o)));
put('terminate-ok-ddp-copy', enc((b, o) => R.encodeTerminate({ layer: 1, etype: 1, ecode: 0, m: true, d: true, hdrCopy: tcopy }, b, o)));
put('terminate-bad-promises-rdmap', Uint8Array.from([0x00, 0x01, 0x20, 0x00, 1, 2, 3]));
put('terminate-bad-promises-ddp', Uint8Array.from([0x01, 0x01, 0x40, 0x00, 0x00]));

// MPA
const req = enc((b, o) => M.encodeMpaFrame({ reply: false, markers: false, crc: true, reject: false, enhanced: false, revision: 1, privateData: new Uint8Array(0) }, b, o));
const pd = new Uint8Array(8);
M.encodeMpaV2Private({ p2p: true, zeroLenSendRtr: true, writeRtr: false, readRtr: true, ird: 8, ord: 8 }, pd, 0);
const rep = enc((b, o) => M.encodeMpaFrame({ reply: true, markers: true, crc: true, reject: false, enhanced: true, revision: 2, privateData: pd }, b, o));
put('mpaFrame-ok-req', req);
put('mpaFrame-ok-rep-v2', rep);
put('mpaFrame-bad-key', Uint8Array.from([0x4d, 0x50, 0x41, 0x20, ...req.slice(4, 8), 0x58, ...req.slice(9)]));
put('mpaFrame-bad-rev3', Uint8Array.from([...req.slice(0, 17), 3, ...req.slice(18)]));
put('mpaFrame-bad-pd-over-512', Uint8Array.from([...req.slice(0, 18), 0x02, 0x01]));
put('mpaFrame-bad-trunc-pd', rep.slice(0, rep.length - 1));
put('mpaV2Private-ok', pd.slice(0, 4));
put('mpaMarker-ok', enc((b, o) => M.encodeMarker(100, b, o)));
const fp = new Uint8Array(64);
fp.set(s, 2);
const fpn = M.sealFpdu(fp, 0, s.length, crc);
put('fpdu-ok-send', fp.slice(0, fpn));
put('fpdu-bad-crc', flip(fp.slice(0, fpn), 5, 3));
put('fpdu-bad-trunc', fp.slice(0, fpn - 1));
put('fpdu-bad-len-ffff', Uint8Array.from([0xff, 0xff, ...fp.slice(2, fpn)]));

// UDP
const hdr = { type: 1, ackReq: true, retx: false, window: 32, srcCtx: 0x1111, dstCtx: 0x2222, psn: 10, ackPsn: 3, tsVal: 99, tsEcr: 98, dstQpn: 5, srcQpn: 6, sack: [{ start: 5, end: 7 }] };
const uh = enc((b, o) => U.encodeUdpHdr(hdr, b, o));
put('udpHdr-ok-sack', uh);
put('udpHdr-ok-ack', enc((b, o) => U.encodeUdpHdr({ ...hdr, type: 2, sack: [] }, b, o)));
put('udpHdr-bad-version', Uint8Array.from([0x11, ...uh.slice(1)]));
put('udpHdr-bad-type', Uint8Array.from([0x2f, ...uh.slice(1)]));
const echo = { ...hdr, dstCtx: 0, cookie: { time: 77, mac: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8) }, token: Uint8Array.of(8, 7, 6, 5, 4, 3, 2, 1) };
const ue = enc((b, o) => U.encodeUdpHdr(echo, b, o));
put('udpHdr-ok-cookie-token', ue);
put('udpHdr-bad-cookie-trunc', ue.slice(0, 40));
const ck = new Uint8Array(128);
let ckn = U.encodeUdpHdr({ ...hdr, type: 4, sack: [] }, ck, 0);
put('udpDatagram-bad-cookie-missing', ck.slice(0, U.sealUdpDatagram(ck, 0, ckn, crc)));
ckn = U.encodeUdpHdr({ ...hdr, type: 4, sack: [], cookie: echo.cookie }, ck, 0);
put('udpDatagram-ok-cookie', ck.slice(0, U.sealUdpDatagram(ck, 0, ckn, crc)));
put('udpHdr-bad-sack-count', Uint8Array.from([...uh.slice(0, 36), 200, ...uh.slice(37)]));
put('udpHdr-bad-sack-trunc', uh.slice(0, 44));
const dg = new Uint8Array(256);
let dn = U.encodeUdpHdr(hdr, dg, 0);
dg.set(w, dn);
dn = U.sealUdpDatagram(dg, 0, dn + w.length, crc);
put('udpDatagram-ok-write', dg.slice(0, dn));
put('udpDatagram-bad-crc', flip(dg.slice(0, dn), 20, 0));
put('udpDatagram-bad-trunc', dg.slice(0, 30));

// Pure noise
for (let i = 0; i < 4; i++) put(`noise-${i}`, Uint8Array.from({ length: 16 + i * 40 }, rnd));
