// Message channels (M2) between two processes on 127.0.0.1, each against a baseline measured in
// the same run:
//   1. 64 B message rate: ch.send with highWaterMark sends outstanding (the receiver iterating)
//      vs raw node:dgram moving the same 64 B messages with a 32-datagram window acked every 8
//      (udp), and vs node:net moving them length-prefixed on one connection (tcp);
//   2. 1 MiB rendezvous goodput: ch.send of 1 MiB messages (4 outstanding; the receiver pulls
//      each with one RDMA READ) vs raw node:dgram (65000 B datagrams, the same window) / node:net
//      (1 MiB writes) moving the same bytes;
//   3. latency of a 3000-byte message that makes the channel enlarge (phase 0 → 1: ENLARGE,
//      GRANT, SWITCH, then the write) vs the same message at phase 1 already, and a 64 B message
//      at phase 0 — send() to "placed at the peer", p50 and p99.
// A plain timed script (streams and round trips do not fit tinybench's per-iteration model).
// Run: npx tsc -p tsconfig.build.json && node bench/channel.bench.mjs
//   CHAN_BENCH_TRANSPORTS (default "udp,tcp"), CHAN_BENCH_MSGS (64 B messages, default 100000),
//   CHAN_BENCH_MIB (1 MiB messages, default 512), CHAN_BENCH_LAT (samples per latency case, 300)
import dgram from 'node:dgram';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { forkPeer, servePeer } from './lib/peer.mjs';
import { connectChannel, listenChannels, openDevice } from '../dist/index.js';

const TRANSPORTS = (process.env.CHAN_BENCH_TRANSPORTS ?? 'udp,tcp').split(',');
const MSGS = Number(process.env.CHAN_BENCH_MSGS ?? 100_000);
const MIB = Number(process.env.CHAN_BENCH_MIB ?? 512);
const LAT = Number(process.env.CHAN_BENCH_LAT ?? 300);
const WINDOW = 32;
const now = () => performance.now() + performance.timeOrigin;

if (process.argv.includes('--peer')) {
  let dev;
  let listener;
  let count = { msgs: 0, bytes: 0, last: 0 };
  let raw;
  const chans = [];
  servePeer({
    async open({ transport, opts }) {
      dev = await openDevice({ transport, host: '127.0.0.1', port: 0 });
      listener = listenChannels(dev, { service: 1, ...opts });
      (async () => {
        for await (const ch of listener) {
          chans.push(ch);
          (async () => {
            for await (const m of ch) {
              count.msgs++;
              count.bytes += m.length;
              count.last = now();
            }
          })().catch(() => {});
        }
      })();
      return dev.address;
    },
    reset() {
      count = { msgs: 0, bytes: 0, last: 0 };
    },
    count() {
      return count;
    },
    async close() {
      for (const c of chans.splice(0)) await c.close();
      listener.close();
      await dev.close();
    },
    async rawDgram() {
      count = { msgs: 0, bytes: 0, last: 0 };
      const ack = new Uint32Array(1);
      raw = dgram.createSocket('udp4');
      raw.on('message', (msg, rinfo) => {
        count.msgs++;
        count.bytes += msg.length;
        count.last = now();
        if (count.msgs % 8 === 0) {
          ack[0] = count.msgs;
          raw.send(ack, rinfo.port, rinfo.address);
        }
      });
      await new Promise((r) => raw.bind(0, '127.0.0.1', r));
      try {
        raw.setRecvBufferSize(4 << 20);
      } catch {}
      return raw.address().port;
    },
    async rawNet() {
      count = { msgs: 0, bytes: 0, last: 0 };
      raw = net.createServer((sock) => {
        // Length-prefixed messages (u32 little-endian), counted as they complete; the body is
        // skipped in place (no reassembly copy), the 4-byte header may straddle chunks.
        const hdr = Buffer.alloc(4);
        let hdrHave = 0;
        let body = 0;
        sock.on('data', (d) => {
          let o = 0;
          while (o < d.length) {
            if (body > 0) {
              const k = Math.min(body, d.length - o);
              body -= k;
              o += k;
              count.bytes += k;
              if (body === 0) count.msgs++;
              continue;
            }
            const k = Math.min(4 - hdrHave, d.length - o);
            d.copy(hdr, hdrHave, o, o + k);
            hdrHave += k;
            o += k;
            if (hdrHave === 4) {
              hdrHave = 0;
              body = hdr.readUInt32LE(0);
              if (body === 0) count.msgs++;
            }
          }
          count.last = now();
        });
      });
      await new Promise((r) => raw.listen(0, '127.0.0.1', r));
      return raw.address().port;
    },
    rawClose() {
      raw.close();
    },
    exit() {
      setImmediate(() => process.exit(0));
    },
  });
} else {
  const { call } = forkPeer(fileURLToPath(import.meta.url));
  const rows = [];
  const fmt = (n) => n.toFixed(0);

  async function waitCount(msgs) {
    for (;;) {
      const c = await call('count');
      if (c.msgs >= msgs) return c;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** n messages of `size` bytes, at most `inflight` sends outstanding; returns msgs/s and MB/s at the receiver. */
  async function channelRun(transport, size, n, inflight, opts = {}) {
    const address = await call('open', { transport, opts });
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0 });
    const ch = await connectChannel(dev, address, { service: 1, highWaterMark: inflight, ...opts });
    const msg = new Uint8Array(size).fill(7);
    // Warm-up (and the enlargement a big message size makes), not timed.
    await Promise.all(Array.from({ length: Math.min(inflight, 64) }, () => ch.send(msg)));
    await waitCount(Math.min(inflight, 64));
    await call('reset');
    const t0 = now();
    let sent = 0;
    await new Promise((resolve, reject) => {
      let out = 0;
      const pump = () => {
        while (out < inflight && sent < n) {
          out++;
          sent++;
          ch.send(msg).then(() => {
            out--;
            if (sent < n) pump();
            else if (out === 0) resolve();
          }, reject);
        }
      };
      pump();
    });
    const c = await waitCount(n);
    const secs = (c.last - t0) / 1000;
    const st = ch.stats();
    await ch.close();
    await call('close');
    await dev.close();
    return { perSec: n / secs, mbps: c.bytes / secs / 1e6, st };
  }

  async function rawDgramRun(size, n) {
    const port = await call('rawDgram');
    const s = dgram.createSocket('udp4');
    await new Promise((r) => s.bind(0, '127.0.0.1', r));
    s.connect(port, '127.0.0.1');
    await new Promise((r) => s.once('connect', r));
    const buf = new Uint8Array(size).fill(7);
    let sent = 0;
    let acked = 0;
    const t0 = now();
    await new Promise((resolve) => {
      const pump = () => {
        while (sent < n && sent - acked < WINDOW) {
          s.send(buf);
          sent++;
        }
      };
      const stall = setTimeout(resolve, 500);
      s.on('message', (m) => {
        acked = new DataView(m.buffer, m.byteOffset, 4).getUint32(0, true);
        stall.refresh();
        if (acked >= n - (n % 8)) {
          clearTimeout(stall);
          resolve();
        } else pump();
      });
      pump();
    });
    const c = await call('count');
    s.close();
    await call('rawClose');
    const secs = (c.last - t0) / 1000;
    return { perSec: c.msgs / secs, mbps: c.bytes / secs / 1e6, lost: 1 - c.msgs / n };
  }

  async function rawNetRun(size, n) {
    const port = await call('rawNet');
    const sock = net.connect(port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    sock.setNoDelay(true);
    const frame = Buffer.alloc(4 + size, 7);
    frame.writeUInt32LE(size, 0);
    const t0 = now();
    let sent = 0;
    await new Promise((resolve) => {
      const pump = () => {
        while (sent < n) {
          sent++;
          if (!sock.write(frame)) return sock.once('drain', pump);
        }
        resolve();
      };
      pump();
    });
    const c = await waitCount(n);
    sock.destroy();
    await call('rawClose');
    const secs = (c.last - t0) / 1000;
    return { perSec: c.msgs / secs, mbps: c.bytes / secs / 1e6 };
  }

  const pct = (a, p) => {
    const s = [...a].sort((x, y) => x - y);
    return s[Math.min(s.length - 1, Math.floor(p * s.length))];
  };

  /** send() → placed latencies (µs) of `size`-byte messages; `fresh`: wait until the receiver shrank back to phase 0 before each. */
  async function latency(transport, size, fresh) {
    const opts = fresh ? { shrinkAfterMs: 10 } : { shrinkAfterMs: 0 };
    const address = await call('open', { transport, opts });
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0 });
    const ch = await connectChannel(dev, address, { service: 1, ...opts });
    const msg = new Uint8Array(size).fill(3);
    const lat = [];
    let enlarged = 0;
    for (let i = 0; i < LAT + 20; i++) {
      if (fresh) {
        // The sender knows the receiver's phase from the GRANTs: wait for the shrink.
        while (ch.stats().sendEagerSize !== 256) await new Promise((r) => setTimeout(r, 2));
      }
      const before = ch.stats().enlargeRequests;
      const t = performance.now();
      await ch.send(msg);
      const us = (performance.now() - t) * 1000;
      if (i >= 20) {
        lat.push(us);
        if (ch.stats().enlargeRequests > before) enlarged++;
      }
    }
    await ch.close();
    await call('close');
    await dev.close();
    return { p50: pct(lat, 0.5), p99: pct(lat, 0.99), enlarged };
  }

  for (const transport of TRANSPORTS) {
    const raw = transport === 'udp' ? rawDgramRun : rawNetRun;
    const rawName = transport === 'udp' ? `node:dgram, ${WINDOW} unacked` : 'node:net, length-prefixed';
    const c64 = await channelRun(transport, 64, MSGS, 64);
    const r64 = await raw(64, MSGS);
    rows.push({ case: `${transport}: 64 B messages, channel (64 outstanding)`, result: `${fmt(c64.perSec)} msg/s`, ratio: '' });
    rows.push({ case: `${transport}: 64 B messages, raw ${rawName}`, result: `${fmt(r64.perSec)} msg/s`, ratio: `channel/raw ${(c64.perSec / r64.perSec).toFixed(2)}` });

    const c1m = await channelRun(transport, 1 << 20, MIB, 4, { maxBufferedBytes: 64 << 20, maxReads: 4 });
    const r1m = transport === 'udp' ? await rawDgramRun(65000, Math.ceil((MIB << 20) / 65000)) : await rawNetRun(1 << 20, MIB);
    rows.push({ case: `${transport}: 1 MiB rendezvous, channel (4 outstanding)`, result: `${fmt(c1m.mbps)} MB/s`, ratio: `${c1m.st.rendezvousSent} by READ` });
    rows.push({ case: `${transport}: 1 MiB, raw ${transport === 'udp' ? 'node:dgram 65000 B datagrams, 32 unacked' : 'node:net 1 MiB writes'}`, result: `${fmt(r1m.mbps)} MB/s`, ratio: `channel/raw ${(c1m.mbps / r1m.mbps).toFixed(2)}` });

    const steady = await latency(transport, 3000, false);
    const grow = await latency(transport, 3000, true);
    const small = await latency(transport, 64, false);
    rows.push({ case: `${transport}: 3000 B at phase 1 already, send→placed`, result: `p50 ${fmt(steady.p50)} µs, p99 ${fmt(steady.p99)} µs`, ratio: '' });
    rows.push({ case: `${transport}: 3000 B from phase 0 (enlarges first)`, result: `p50 ${fmt(grow.p50)} µs, p99 ${fmt(grow.p99)} µs`, ratio: `enlarging/steady p50 ${(grow.p50 / steady.p50).toFixed(2)} (${grow.enlarged}/${LAT} enlarged)` });
    rows.push({ case: `${transport}: 64 B at phase 0`, result: `p50 ${fmt(small.p50)} µs, p99 ${fmt(small.p99)} µs`, ratio: '' });
  }
  console.table(rows);
  await call('exit').catch(() => {});
  process.exit(0);
}
