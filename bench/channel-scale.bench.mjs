// Idle channels at scale, default options, two processes on 127.0.0.1: this process (the dialer)
// opens channels to a forked listener process. A warm-up batch is opened first (the hub, its CQ,
// the first growth of every table), then the rest up to N; each side reports its marginal RSS
// per channel — (RSS at N − RSS after warm-up) / (N − warm-up), after a full GC of both the main
// thread and the NIC thread — its main-thread heap and NIC-thread heap the same way, the bytes the
// channels registered, the device memory's capacity and use, and how long the opening took.
// The young generations of both threads grow while channels are opened (V8 sizes them by the
// allocation rate) and do not shrink on a forced GC: their growth is reported, and the marginal
// RSS less it, since it is what the opening allocated, not what the channels hold.
// Both devices are opened with nothing but transport / host / port: no memory or maxMr options;
// the listener's maxChannelsPerPeer is N.
// Bounded: it stops at the first channel that fails to open (and says why: the count it reached
// is the result then), or when CHAN_SCALE_DEADLINE_MS runs out.
// Run: npm run build:ts && node bench/channel-scale.bench.mjs
//   CHAN_SCALE_N (default 10000), CHAN_SCALE_WARMUP (500), CHAN_SCALE_TRANSPORT (udp | tcp; udp),
//   CHAN_SCALE_DEADLINE_MS (240000), CHAN_SCALE_IDLE_MS (0; see below)
// With CHAN_SCALE_IDLE_MS > 0 both sides measure again after the channels sat idle that long, the
// main thread's last collection a memory-reducing one (V8's 'last-resort' flavour: compacts and
// gives back the free pages it keeps after collecting the opening's garbage — what V8's memory
// reducer does by itself in an idle process) and the NIC thread left to its own memory reducer:
// the 'idle' rows, their baseline read the same way after the warm-up. The first rows are read
// right after the opening, as before.
import { fileURLToPath } from 'node:url';
import { gc, settleDevice, youngBytes } from './lib/gc.mjs';
import { forkPeer, servePeer } from './lib/peer.mjs';
import { channelStats, connectChannel, listenChannels, openDevice } from '../dist/index.js';

const N = Number(process.env.CHAN_SCALE_N ?? 10_000);
const WARMUP = Math.min(N, Number(process.env.CHAN_SCALE_WARMUP ?? 500));
const TRANSPORT = process.env.CHAN_SCALE_TRANSPORT ?? 'udp';
const DEADLINE_MS = Number(process.env.CHAN_SCALE_DEADLINE_MS ?? 240_000);
const IDLE_MS = Number(process.env.CHAN_SCALE_IDLE_MS ?? 0);
const BATCH = 32;

/** The idle reading: wait, then a memory-reducing collection of this thread before measure(). */
async function idleMeasure(dev, ms) {
  await new Promise((r) => setTimeout(r, ms));
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return measure(dev);
}


async function measure(dev) {
  // Both isolates settled (this thread's and the NIC thread's) before RSS is read: a NIC heap
  // left uncollected would count garbage as channel memory, differently run to run.
  const nic = await settleDevice(dev);
  const m = process.memoryUsage();
  const c = channelStats(dev);
  const mem = dev.stats().memory;
  return { rss: m.rss, heap: m.heapUsed, heapTotal: m.heapTotal, nicHeap: nic?.used ?? 0, nicTotal: nic?.total ?? 0, external: m.external, arrayBuffers: m.arrayBuffers, young: youngBytes() + (nic?.young ?? 0), registered: c.registeredBytes, channels: c.channels, deviceUsed: mem.used, deviceCapacity: mem.capacity };
}

const devOpts = () => ({ transport: TRANSPORT, host: '127.0.0.1', port: 0 });

if (process.argv.includes('--peer')) {
  let dev;
  let listener;
  const chans = [];
  let acceptError;
  servePeer({
    async open({ n }) {
      dev = await openDevice(devOpts());
      // maxChannelsPerPeer is the one option set: all N come from one peer (its default, 64, is
      // the bound against a hostile peer, not a memory limit).
      listener = listenChannels(dev, { service: 1, backlog: 1 << 16, maxChannelsPerPeer: n });
      (async () => {
        for await (const ch of listener) chans.push(ch);
      })().catch((e) => {
        acceptError = String(e?.code ?? e);
      });
      return { address: dev.address };
    },
    async measure({ n, timeoutMs }) {
      const until = Date.now() + timeoutMs;
      while (chans.length < n && Date.now() < until && !acceptError) await new Promise((r) => setTimeout(r, 20));
      return { ...(await measure(dev)), accepted: chans.length, acceptError };
    },
    async idle({ ms }) {
      return idleMeasure(dev, ms);
    },
    async close() {
      const all = chans.splice(0);
      for (let i = 0; i < all.length; i += BATCH) await Promise.all(all.slice(i, i + BATCH).map((c) => c.close().catch(() => {})));
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
  const mib = (b) => (b / 1024 ** 2).toFixed(1);
  const deadline = Date.now() + DEADLINE_MS;

  const peer = await call('open', { n: N });
  const dev = await openDevice(devOpts());
  const chans = [];
  let failure;
  async function openTo(n) {
    const t0 = performance.now();
    const from = chans.length;
    while (chans.length < n && !failure) {
      if (Date.now() > deadline) {
        failure = `deadline (${DEADLINE_MS} ms)`;
        break;
      }
      const k = Math.min(BATCH, n - chans.length);
      const got = await Promise.allSettled(Array.from({ length: k }, () => connectChannel(dev, peer.address, { service: 1 })));
      for (const g of got) {
        if (g.status === 'fulfilled') chans.push(g.value);
        else failure ??= `${g.reason?.code ?? ''} ${g.reason?.message ?? g.reason}`;
      }
    }
    return { ms: performance.now() - t0, opened: chans.length - from };
  }

  const warm = await openTo(WARMUP);
  const mineA = await measure(dev);
  const theirsA = await call('measure', { n: chans.length, timeoutMs: 10_000 });
  // The idle rows' baseline is read the same way as their end point (idle, memory-reducing).
  const [mineA2, theirsA2] = IDLE_MS > 0 ? await Promise.all([idleMeasure(dev, IDLE_MS), call('idle', { ms: IDLE_MS })]) : [];
  const rest = await openTo(N);
  const mineB = await measure(dev);
  const theirsB = await call('measure', { n: chans.length, timeoutMs: 10_000 });
  const k = chans.length - WARMUP;
  const side = (a, b, name) => ({
    side: name,
    channels: b.channels,
    'marginal RSS/ch KiB': k > 0 ? kib((b.rss - a.rss) / k) : '-',
    'marginal heap/ch KiB': k > 0 ? kib((b.heap - a.heap) / k) : '-',
    'marginal NIC heap/ch KiB': k > 0 ? kib((b.nicHeap - a.nicHeap) / k) : '-',
    'heaps committed/ch KiB': k > 0 ? kib((b.heapTotal + b.nicTotal - a.heapTotal - a.nicTotal) / k) : '-',
    'external/ch B': k > 0 ? Math.round((b.external - a.external) / k) : '-',
    'young gen growth/ch KiB': k > 0 ? kib((b.young - a.young) / k) : '-',
    'RSS less young/ch KiB': k > 0 ? kib((b.rss - a.rss - (b.young - a.young)) / k) : '-',
    'registered/ch B': b.channels ? Math.round(b.registered / b.channels) : '-',
    'device used/ch B': k > 0 ? Math.round((b.deviceUsed - a.deviceUsed) / k) : '-',
    'device MiB (used/capacity)': `${mib(b.deviceUsed)}/${mib(b.deviceCapacity)}`,
    'RSS MiB': mib(b.rss),
  });
  console.log(`channel-scale ${TRANSPORT}: N=${N} warm-up=${WARMUP} opened=${chans.length}${failure ? ` STOPPED: ${failure}` : ''}${theirsB.acceptError ? ` (listener: ${theirsB.acceptError})` : ''}`);
  console.log(`open: warm-up ${(warm.ms / Math.max(1, warm.opened)).toFixed(2)} ms/ch, then ${rest.opened} in ${(rest.ms / 1000).toFixed(1)} s (${(rest.ms / Math.max(1, rest.opened)).toFixed(2)} ms/ch)`);
  const rows = [side(mineA, mineB, 'dialer'), side(theirsA, theirsB, 'listener')];
  if (IDLE_MS > 0) {
    // Both sides idle at once: the peer's wait runs while this one's does.
    const [mineC, theirsC] = await Promise.all([idleMeasure(dev, IDLE_MS), call('idle', { ms: IDLE_MS })]);
    rows.push(side(mineA2, mineC, 'dialer idle'), side(theirsA2, theirsC, 'listener idle'));
  }
  console.table(rows);
  for (let i = 0; i < chans.length; i += BATCH) await Promise.all(chans.slice(i, i + BATCH).map((c) => c.close().catch(() => {})));
  await call('close').catch(() => {});
  await dev.close();
  await call('exit').catch(() => {});
  process.exit(0);
}
