// Memory per idle channel (M2), two processes on 127.0.0.1: this process opens N channels to a
// forked peer that accepts them, both go idle, and each side reports what the channels cost it —
// resident memory (RSS, after a full GC) and device memory registered by the channels
// (channelStats().registeredBytes) — divided by N. Three configurations in the same run:
//   1. the default ladder (256 B × 4 → 4 KiB × 8 → 32 KiB × 8), idle at phase 0;
//   2. the same channels after each sent one 20 KiB message (phase 2) and then went idle past
//      shrinkAfterMs: they must be back at the phase-0 figure (shrink after idle);
//   3. the baseline: channels configured statically at the largest phase (one rung, 32 KiB × 8 =
//      256 KiB of receive slots per connection, the seed's reference case) — at
//      CHAN_MEM_STATIC channels (default 1000) because 10,000 of them do not fit in memory.
// Memory, not CPU: not timing-sensitive. RSS deltas include everything a channel drags in (its
// QP in the engine, the transport's per-QP state, JS objects, the device memory it touches).
// Run: npx tsc -p tsconfig.build.json && node --expose-gc bench/channel-memory.bench.mjs
//   CHAN_MEM_N (default 10000), CHAN_MEM_STATIC (1000), CHAN_MEM_TRANSPORT (udp | tcp; default udp;
//   tcp fits CHAN_MEM_N=1000 CHAN_MEM_STATIC=500: each connection's 512 KiB deframer lives in device memory)
import { fileURLToPath } from 'node:url';
import { settle } from './lib/gc.mjs';
import { forkPeer, servePeer } from './lib/peer.mjs';
import { channelStats, connectChannel, listenChannels, openDevice } from '../dist/index.js';

const N = Number(process.env.CHAN_MEM_N ?? 10_000);
const NSTATIC = Number(process.env.CHAN_MEM_STATIC ?? 1000);
const TRANSPORT = process.env.CHAN_MEM_TRANSPORT ?? 'udp';
const STATIC = [{ slotSize: 32768, slots: 8 }];
const SHRINK_MS = 1500;


async function measure(dev) {
  await settle();
  const m = process.memoryUsage();
  const c = channelStats(dev);
  return { rss: m.rss, heap: m.heapUsed, external: m.external, registered: c.registeredBytes, channels: c.channels, deviceUsed: dev.stats().memory.used };
}

function devOpts(n, ladder) {
  // (The ladder reaches the peer as a copy: compare by content.)
  // tcp: every MPA connection also takes a 512 KiB FPDU deframer out of device memory (the
  // transport's, not the channel's): 10,000 tcp channels would need 5 GiB, past wasm32's 4.
  const perChannel = (ladder?.[0]?.slotSize === STATIC[0].slotSize ? 600 * 1024 : 64 * 1024) + (TRANSPORT === 'tcp' ? 576 * 1024 : 0);
  return {
    transport: TRANSPORT, host: '127.0.0.1', port: 0,
    maxMr: 3 * n + 64,
    maximumMemoryBytes: Math.min(4 * 1024 ** 3 - 65536, 256 * 1024 * 1024 + n * perChannel),
  };
}

if (process.argv.includes('--peer')) {
  let dev;
  let listener;
  const chans = [];
  servePeer({
    async open({ n, ladder }) {
      dev = await openDevice(devOpts(n, ladder));
      listener = listenChannels(dev, { service: 1, backlog: 1 << 16, ladder, shrinkAfterMs: SHRINK_MS });
      (async () => {
        for await (const ch of listener) {
          chans.push(ch);
          (async () => {
            for await (const _ of ch);
          })().catch(() => {});
        }
      })();
      return { address: dev.address, base: await measure(dev) };
    },
    async measure({ n }) {
      while (chans.length < n) await new Promise((r) => setTimeout(r, 20));
      return measure(dev);
    },
    phases() {
      const p = {};
      for (const ch of chans) p[ch.stats().phase] = (p[ch.stats().phase] ?? 0) + 1;
      return p;
    },
    async close() {
      for (const ch of chans.splice(0)) await ch.close();
      listener.close();
      await dev.close();
      return true;
    },
    exit() {
      setImmediate(() => process.exit(0));
    },
  });
} else {
  const { call } = forkPeer(fileURLToPath(import.meta.url));
  const kib = (b) => (b / 1024).toFixed(2);

  async function run(n, ladder, label, bigThenIdle) {
    const peer = await call('open', { n, ladder });
    const dev = await openDevice(devOpts(n, ladder));
    const base = await measure(dev);
    const chans = [];
    const t0 = performance.now();
    const BATCH = 24;
    for (let i = 0; i < n; i += BATCH) {
      const k = Math.min(BATCH, n - i);
      chans.push(...(await Promise.all(Array.from({ length: k }, () => connectChannel(dev, peer.address, { service: 1, ladder, shrinkAfterMs: SHRINK_MS })))));
    }
    const connectMs = performance.now() - t0;
    const rows = [];
    const row = async (what) => {
      const mine = await measure(dev);
      const theirs = await call('measure', { n });
      const per = (a, b, k) => (a[k] - b[k]) / n;
      rows.push({
        case: `${label}: ${what}`, channels: n,
        'client RSS/ch KiB': kib(per(mine, base, 'rss')), 'client reg/ch KiB': kib(mine.registered / n),
        'server RSS/ch KiB': kib(per(theirs, peer.base, 'rss')), 'server reg/ch KiB': kib(theirs.registered / n),
        'client heap/ch KiB': kib(per(mine, base, 'heap')), 'server heap/ch KiB': kib(per(theirs, peer.base, 'heap')),
      });
    };
    await row(`idle (connect ${(connectMs / n).toFixed(2)} ms/ch)`);
    if (bigThenIdle) {
      const big = new Uint8Array(20 * 1024);
      for (let i = 0; i < n; i += 64) await Promise.all(chans.slice(i, i + 64).map((c) => c.send(big)));
      const phases = await call('phases');
      await new Promise((r) => setTimeout(r, SHRINK_MS + 1500));
      const after = await call('phases');
      await row(`after one 20 KiB message each, then idle (server phases ${JSON.stringify(phases)} -> ${JSON.stringify(after)})`);
    }
    for (const c of chans) await c.close();
    await call('close');
    await dev.close();
    return rows;
  }

  const all = [];
  all.push(...(await run(N, undefined, `default ladder, ${TRANSPORT}`, true)));
  all.push(...(await run(NSTATIC, STATIC, `static 32 KiB x 8 (256 KiB), ${TRANSPORT}`, false)));
  console.table(all);
  const dyn = all[0];
  const st = all[all.length - 1];
  const total = (r, side) => Number(r[`${side} RSS/ch KiB`]);
  console.log(`idle channel, client: ${total(dyn, 'client')} KiB RSS (${dyn['client reg/ch KiB']} KiB registered) vs static ${total(st, 'client')} KiB (${st['client reg/ch KiB']} KiB registered): ${(total(st, 'client') / total(dyn, 'client')).toFixed(1)}x less`);
  console.log(`idle channel, server: ${total(dyn, 'server')} KiB RSS (${dyn['server reg/ch KiB']} KiB registered) vs static ${total(st, 'server')} KiB (${st['server reg/ch KiB']} KiB registered): ${(total(st, 'server') / total(dyn, 'server')).toFixed(1)}x less`);
  await call('exit').catch(() => {});
  process.exit(0);
}
