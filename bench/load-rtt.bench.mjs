// A small message's round trip while bulk data flows between the same two processes, against
// raw node:net doing the same in the same run:
//   - sabre: a channel ping-pong of 200 B messages, idle and while a second channel of the same
//     two devices streams 1 MiB messages (8 outstanding) the same way;
//   - raw: a 200 B ping-pong on one node:net connection, idle and while a second connection
//     streams 1 MiB writes (8 outstanding, each answered by a 1-byte ack).
// The question (issue: the software NIC): how much a bulk stream delays everything else on the
// same devices, inline (`workers: 0`) and through NIC threads (`workers: 1`), where every message
// crosses two more threads each way. p50 / p90 / max over LOAD_RTT_PINGS pings, after 200 warm,
// each pair first warmed by LOAD_RTT_WARMUP idle pings untimed: sabre's ping path is a few hundred
// functions that V8 compiles over its first ~2,000 round trips (on two vCPUs the compiler threads
// take the cores the round trip needs), so without it "idle" measured the JIT, 3-10x steady state.
// A plain timed script (round trips under a stream do not fit tinybench's model).
// Run: npm run build:ts && node bench/load-rtt.bench.mjs
//   LOAD_RTT_TRANSPORTS (default "udp,tcp"), LOAD_RTT_WORKERS (default "0,1"), LOAD_RTT_PINGS (300),
//   LOAD_RTT_WARMUP (5000)
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { forkPeer, isPeer, servePeer } from './lib/peer.mjs';
import { connectChannel, listenChannels, openDevice } from '../dist/index.js';

const TRANSPORTS = (process.env.LOAD_RTT_TRANSPORTS ?? 'udp,tcp').split(',');
const WORKERS = (process.env.LOAD_RTT_WORKERS ?? '0,1').split(',').map(Number);
const PINGS = Number(process.env.LOAD_RTT_PINGS ?? 300);
const WARM = 200;
const WARMUP = Number(process.env.LOAD_RTT_WARMUP ?? 5000);
const BULK = 1 << 20;
const DEPTH = 8;

/** Call `each(body)` for every whole length-prefixed (u32 big-endian) frame `s` brings. */
function onFrames(s, each) {
  let buf = Buffer.alloc(0);
  s.on('data', (d) => {
    buf = buf.length ? Buffer.concat([buf, d]) : d;
    while (buf.length >= 4) {
      const n = buf.readUInt32BE(0);
      if (buf.length < 4 + n) break;
      const body = buf.subarray(4, 4 + n);
      buf = buf.subarray(4 + n);
      each(body);
    }
  });
}
const frame = (b) => {
  const h = Buffer.alloc(4);
  h.writeUInt32BE(b.length);
  return Buffer.concat([h, b]);
};

if (isPeer) {
  let dev;
  let server;
  servePeer({
    // sabre: every channel echoes what is small and takes what is large.
    async open({ transport, workers }) {
      dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
      const l = listenChannels(dev, { service: 9 });
      (async () => {
        for await (const ch of l) {
          (async () => {
            for await (const m of ch) if (m.length < 1024) await ch.send(m);
          })().catch(() => {});
        }
      })().catch(() => {});
      return dev.address;
    },
    async close() {
      await dev?.close();
      dev = undefined;
    },
    // raw: echo small frames; ack each 1 MiB with a byte (length-prefixed frames).
    async rawOpen() {
      server = net.createServer((s) => {
        s.setNoDelay(true);
        onFrames(s, (body) => s.write(body.length < 1024 ? frame(body) : frame(Buffer.from([1]))));
        s.on('error', () => {});
      });
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      return server.address().port;
    },
    async rawClose() {
      server?.close();
    },
  });
} else {
  const peer = forkPeer(fileURLToPath(import.meta.url));
  const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))];
  const show = (xs) => {
    xs.sort((a, b) => a - b);
    return `p50 ${pct(xs, 0.5).toFixed(2)} p90 ${pct(xs, 0.9).toFixed(2)} max ${xs[xs.length - 1].toFixed(2)} ms`;
  };

  /** node:net: one connection that answers framed messages in order. */
  async function rawConn(port) {
    const s = net.connect({ host: '127.0.0.1', port, noDelay: true });
    await new Promise((r) => s.once('connect', r));
    const waiters = [];
    onFrames(s, () => waiters.shift()?.());
    return {
      send: (b) => new Promise((r) => (waiters.push(r), s.write(frame(b)))),
      close: () => s.destroy(),
    };
  }

  /** The untimed idle pings a pair starts with (see the file comment). */
  async function warmUp(ping) {
    for (let i = 0; i < WARMUP; i++) await ping();
  }

  async function measure(ping, bulkSend) {
    let stop = false;
    const pump = bulkSend
      ? (async () => {
        const out = [];
        while (!stop) {
          out.push(bulkSend());
          if (out.length >= DEPTH) await out.shift();
        }
        await Promise.all(out);
      })()
      : Promise.resolve();
    const lat = [];
    for (let i = 0; i < WARM + PINGS; i++) {
      const t0 = performance.now();
      await ping();
      if (i >= WARM) lat.push(performance.now() - t0);
    }
    stop = true;
    await pump;
    return lat;
  }

  const small = new Uint8Array(200);
  const big = new Uint8Array(BULK);
  console.log(`# load-rtt: ${PINGS} round trips of 200 B (after ${WARMUP} + ${WARM}), idle and under a stream of 1 MiB messages, ${DEPTH} outstanding, on the same two processes`);

  const port = await peer.call('rawOpen');
  const rawPing = await rawConn(port);
  const rawBulk = await rawConn(port);
  await warmUp(() => rawPing.send(small));
  const rawIdle = await measure(() => rawPing.send(small));
  const rawLoad = await measure(() => rawPing.send(small), () => rawBulk.send(big));
  rawPing.close();
  rawBulk.close();
  await peer.call('rawClose');
  console.log(`raw node:net         idle: ${show(rawIdle)}; under the stream: ${show(rawLoad)}`);

  for (const transport of TRANSPORTS) {
    for (const workers of WORKERS) {
      const address = await peer.call('open', { transport, workers });
      const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
      const ch = await connectChannel(dev, address, { service: 9 });
      const bulk = await connectChannel(dev, address, { service: 9 });
      const it = ch[Symbol.asyncIterator]();
      const ping = async () => {
        await ch.send(small);
        await it.next();
      };
      await warmUp(ping);
      const idle = await measure(ping);
      const load = await measure(ping, () => bulk.send(big));
      console.log(`${transport} workers: ${workers}  idle: ${show(idle)}; under the stream: ${show(load)}`);
      await dev.close();
      await peer.call('close');
    }
  }
  process.exit(0);
}
