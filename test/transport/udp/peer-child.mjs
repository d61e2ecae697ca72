// One end of a two-process UDP transfer (also run inside a network namespace). Speaks JSON
// lines: prints {"ready": address}; reads {"peer": {host, port}} and then sends `sendBytes`
// of generated payloads to it while checking every payload it receives against its own copy
// of the generator; prints {"done": stats} once its sends are all acked and `expectBytes`
// arrived; exits on {"close": true} or after `maxMs`.
import { createInterface } from 'node:readline';
import { UdpSockets } from '../../../dist/transport/udp/socket.js';

const cfg = JSON.parse(process.argv[2]);

// Same generator as sim.ts makePayload (kept in step by the tests comparing both ways).
function makePayload(index, len) {
  const b = new Uint8Array(len);
  b[0] = index >>> 24; b[1] = index >>> 16; b[2] = index >>> 8; b[3] = index;
  let x = (Math.imul(index, 2654435761) >>> 0) || 1;
  for (let i = 4; i < len; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    b[i] = x;
  }
  return b;
}
function sizeFor(i, max) {
  return i % 5 === 4 ? 4 + ((i * 131) % 200) : max;
}

const got = new Map();
let bytesOk = 0;
let bad = 0;
let dupes = 0;
let acked = 0;
let failed = 0;
let sent = 0;
let sentBytes = 0;
let peer;
let doneSent = false;
const t0 = Date.now();

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const t = await UdpSockets.open(
  { host: cfg.host, port: cfg.port ?? 0, mtu: cfg.mtu ?? 65000, sockets: cfg.sockets ?? 1 },
  {
    onDelivery(d) {
      const p = d.payload;
      const idx = ((p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]) >>> 0;
      if (got.has(idx)) dupes++;
      got.set(idx, 1);
      const want = makePayload(idx, p.length);
      let ok = p.length === sizeFor(idx, t.endpoint.maxPayload);
      for (let i = 0; ok && i < p.length; i++) if (p[i] !== want[i]) ok = false;
      if (ok) bytesOk += p.length;
      else bad++;
      check();
    },
    onAcked(ids) {
      acked += ids.length;
      pump();
      check();
    },
    onFailed(f) {
      failed += f.length;
      check();
    },
  },
);

function pump() {
  if (!peer) return;
  const max = t.endpoint.maxPayload;
  while (sentBytes < cfg.sendBytes && sent - acked < (cfg.inflight ?? 512)) {
    const len = sizeFor(sent, max);
    t.send(peer, makePayload(sent, len));
    sent++;
    sentBytes += len;
  }
}

// Exactly what the peer sends: its payloads in order until their sum reaches expectBytes (the
// last one overshoots). Waiting for only expectBytes let a reordered small payload still be in
// flight when "done" was reported, once the overshoot exceeded its size.
let expectTotal = -1;
function peerTotal() {
  if (expectTotal < 0) {
    const max = t.endpoint.maxPayload;
    expectTotal = 0;
    for (let i = 0; expectTotal < cfg.expectBytes; i++) expectTotal += sizeFor(i, max);
  }
  return expectTotal;
}

function check() {
  if (doneSent) return;
  if ((sentBytes >= cfg.sendBytes && acked + failed === sent && bytesOk >= peerTotal()) || failed > 0) {
    doneSent = true;
    out({ done: { sent, sentBytes, acked, failed, received: got.size, bytesOk, bad, dupes, ms: Date.now() - t0, counters: t.endpoint.counters, ctx: peer ? t.endpoint.context(peer)?.counters : undefined } });
  }
}

out({ ready: t.address });
const rl = createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  const m = JSON.parse(line);
  if (m.peer) {
    peer = m.peer;
    pump();
    check();
  }
  if (m.close) {
    await t.close();
    rl.close();
    process.exit(0);
  }
});
setTimeout(async () => {
  out({ timeout: { sent, acked, failed, received: got.size, bytesOk, bad, dupes, counters: t.endpoint.counters } });
  await t.close();
  process.exit(2);
}, cfg.maxMs ?? 60000).unref();
