// A burst of channel connects to one listener: N connectChannel calls at once from one device
// to another in this process (its listener at the default backlog of 128, an accept loop
// taking channels as they come), on udp and tcp. Reports how many connected, how many failed
// and why, and how long until the last settled. A full backlog refuses for now and the dialer
// asks again until its deadline (docs/tcp-framing.md §3), so every connect should get in.
// Run: npm run build:ts && node bench/connect-burst.bench.mjs
//   BURST_N (default 500 udp; tcp is capped at 120 by maxConnectionsPerHost 128 per source host,
//   less the listener's own), BURST_TRANSPORTS (udp,tcp)
import { connectChannel, listenChannels, openDevice } from '../dist/index.js';

const N = Number(process.env.BURST_N ?? 500);
const transports = (process.env.BURST_TRANSPORTS ?? 'udp,tcp').split(',');

for (const transport of transports) {
  const n = transport === 'tcp' ? Math.min(N, 120) : N;
  const a = await openDevice({ transport, host: '127.0.0.1', port: 0 });
  const b = await openDevice({ transport, host: '127.0.0.1', port: 0 });
  const l = listenChannels(b, { service: 7, maxChannelsPerPeer: n + 8 });
  let accepted = 0;
  const loop = (async () => {
    for await (const _ of l) if (++accepted === n) break;
  })().catch(() => {});
  const t0 = performance.now();
  const rs = await Promise.allSettled(Array.from({ length: n }, () => connectChannel(a, b.address, { service: 7 })));
  const ms = performance.now() - t0;
  const bad = rs.filter((r) => r.status === 'rejected');
  const why = [...new Set(bad.map((r) => `${r.reason.code}: ${r.reason.message}`))].slice(0, 3);
  console.log(`${transport}: ${n} at once, ${n - bad.length} connected, ${bad.length} failed, all settled in ${ms.toFixed(0)} ms${why.length ? ' — ' + why.join(' | ') : ''}`);
  l.close();
  await loop;
  await a.close();
  await b.close();
}
