// Memory the UDP endpoint holds per peer context, and during a flood of first contacts and
// stray datagrams (issue #11, docs/resource-bounds.md). Heap after a full GC, sans-I/O.
// Run: npx tsc -p tsconfig.build.json && node --expose-gc bench/udp-context-memory.mjs
import { crc32c } from '@node-rs/crc32';
import { UdpEndpoint } from '../dist/transport/udp/endpoint.js';
import { UdpType, decodeUdpHdr, encodeUdpHdr, udpHeaderLength } from '../dist/wire/udp.js';

if (typeof gc !== 'function') throw new Error('run with node --expose-gc');
const heap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
};
function seal(h, payload = new Uint8Array(h.type === UdpType.Ack ? 0 : 16)) {
  const hdr = { type: UdpType.Data, ackReq: false, retx: false, window: 16, srcCtx: 7, dstCtx: 0, psn: 0, ackPsn: 0, tsVal: 1, tsEcr: 0, dstQpn: 0, srcQpn: 0, sack: [], ...h };
  const hl = udpHeaderLength(hdr);
  const buf = Buffer.alloc(hl + payload.length + 4);
  encodeUdpHdr(hdr, buf, 0);
  buf.set(payload, hl);
  buf.writeUInt32LE(crc32c(buf.subarray(0, hl + payload.length)), hl + payload.length);
  return new Uint8Array(buf);
}
const ZERO = { time: 0, mac: new Uint8Array(8) };

// A flood of first contacts, forged echoes, stray datagrams and RESETs from 200 000 addresses.
{
  const ep = new UdpEndpoint({ mtu: 1472, integrity: 'crc32c' });
  const h0 = heap();
  for (let i = 0; i < 200_000; i++) {
    const from = { host: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, port: 1 + (i % 60_000) };
    const k = i % 4;
    const d = k === 0 ? seal({ srcCtx: i + 1, cookie: ZERO })
      : k === 1 ? seal({ srcCtx: i + 1, cookie: { time: 5, mac: new Uint8Array(8) }, token: new Uint8Array(8) })
      : k === 2 ? seal({ type: UdpType.Ack, srcCtx: i + 1, dstCtx: i })
      : seal({ type: UdpType.Reset, srcCtx: i + 1, dstCtx: i, token: new Uint8Array(8) });
    ep.receive(d, from, i / 100);
    if (i % 1000 === 999) ep.poll(i / 100);
  }
  ep.poll(2000);
  const h1 = heap();
  const s = ep.stats();
  console.log(`flood of 200000 datagrams from 200000 hosts: ${s.contexts} contexts, ${s.resetHosts} per-host RESET buckets, heap + ${((h1 - h0) / 1e6).toFixed(2)} MB after GC`);
}

// Validated peers: every context a peer can make us create (default options, mtu 1472 and 65000).
for (const mtu of [1472, 65000]) {
  const ep = new UdpEndpoint({ mtu, maxContextsPerHost: 1 << 20, integrity: 'crc32c' });
  const h0 = heap();
  const N = 1024;
  for (let i = 0; i < N; i++) {
    const from = { host: `10.1.${i >> 8}.${i & 255}`, port: 1 };
    ep.receive(seal({ srcCtx: i + 1, cookie: ZERO }), from, 0);
    const c = ep.poll(0).datagrams.map((d) => Buffer.concat(d.parts))[0];
    const cookie = decodeUdpHdr(c, 0, c.length - 4).value.cookie;
    ep.receive(seal({ srcCtx: i + 1, cookie, token: new Uint8Array(8) }), from, 0);
    for (const d of ep.poll(0).delivered) ep.release(d.ctx);
  }
  const h1 = heap();
  console.log(`mtu ${mtu}: ${ep.contexts} contexts, ${((h1 - h0) / ep.contexts / 1024).toFixed(1)} KiB each (heap + array buffers, after GC)`);
}

