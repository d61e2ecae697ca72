// Hand-off round trip between the event-loop thread and a worker, four ways:
//   ring + Atomics.wait in the worker, Atomics.waitAsync on the main side (DataPlaneWorkers.submit of a Nop job)
//   ring, both sides spinning (no sleeping at all; burns a core on each side)
//   piscina task round trip (KernelPool.run of a trivial kernel)
//   postMessage ping-pong with a worker
// p50/p99 per round trip; ratio = this ÷ ring-wait p50. Run `npx tsc -p tsconfig.build.json` first.
import { Worker } from 'node:worker_threads';
import { Bench } from 'tinybench';
import { DeviceMemory } from '../dist/dataplane/device-memory.js';
import { JobOp } from '../dist/dataplane/jobs.js';
import { KernelPool } from '../dist/dataplane/pool.js';
import { Ring } from '../dist/dataplane/ring.js';
import { DataPlaneWorkers } from '../dist/dataplane/workers.js';

const dm = await DeviceMemory.create({ workerSlots: 1, initialBytes: 0, maximumBytes: 64 << 20 });
const workers = await DataPlaneWorkers.start(dm, 1);
const pool = new KernelPool(dm, { threads: 1 });
await pool.run('abiVersion', []);

const echo = new Worker(`require('node:worker_threads').parentPort.on('message', function (m) { this.postMessage(m); });`, { eval: true });

let seq = 0;
const nop = { op: JobOp.Nop };
const batch32 = Array.from({ length: 32 }, () => nop);
const bench = new Bench({ name: 'hand-off round trip', time: 1500, warmupTime: 300 });
bench
  .add('ring: Atomics.wait worker + waitAsync main', async () => {
    await workers.submit(nop, 0);
  })
  .add('ring: batch of 32 jobs, one publish (per batch)', async () => {
    await workers.submitBatch(batch32, 0);
  })
  .add('piscina task', async () => {
    await pool.run('abiVersion', []);
  })
  .add('postMessage ping-pong', async () => {
    await new Promise((resolve) => {
      echo.once('message', resolve);
      echo.postMessage(++seq);
    });
  });
await bench.run();

// Spinning pair: a request and a completion ring in the arena, a worker that spins on them.
const ringUrl = new URL('../dist/dataplane/ring.js', import.meta.url).href;
const reqAddr = dm.alloc(Ring.bytesFor(64, 32));
const cplAddr = dm.alloc(Ring.bytesFor(64, 32));
const req = Ring.init(dm.buffer(), reqAddr, 64, 32);
const cpl = Ring.init(dm.buffer(), cplAddr, 64, 32);
const stopFlag = new Int32Array(new SharedArrayBuffer(4));
const spinner = new Worker(
  `const { workerData, parentPort } = require('node:worker_threads');
   import(workerData.ringUrl).then(({ Ring }) => {
     const req = Ring.attach(workerData.buf, workerData.reqAddr), cpl = Ring.attach(workerData.buf, workerData.cplAddr);
     parentPort.postMessage('ready');
     while (Atomics.load(workerData.stop, 0) === 0) {
       const n = req.available();
       if (n === 0) continue;
       for (let k = 0; k < n; k++) { while (cpl.reserve(1) === 0); cpl.u32[cpl.wordOf(0)] = req.u32[req.peekWord(k)]; cpl.publish(1); }
       req.release(n);
     }
   });`,
  { eval: true, workerData: { ringUrl, buf: dm.buffer(), reqAddr, cplAddr, stop: stopFlag } },
);
await new Promise((r) => spinner.once('message', r));


// Only now: the spinner burns a whole core, which would have slowed the sleeping paths above.
const spinBench = new Bench({ name: 'spinning', time: 1500, warmupTime: 300 });
spinBench.add('ring: both sides spinning', () => {
  req.u32[req.wordOf(0)] = ++seq;
  req.publish(1);
  while (cpl.available() === 0);
  if (cpl.u32[cpl.peekWord(0)] !== seq) throw new Error('spin ring out of step');
  cpl.release(1);
});
await spinBench.run();

const rows = [];
let base;
for (const t of [...bench.tasks, ...spinBench.tasks]) {
  const r = t.result;
  if (r.state !== 'completed') throw new Error(`${t.name}: ${r.state} ${r.error ?? ''}`);
  const p50 = r.latency.p50 * 1000;
  const p99 = r.latency.p99 * 1000;
  base ??= p50;
  rows.push({ path: t.name, 'p50 µs': p50.toFixed(2), 'p99 µs': p99.toFixed(2), samples: r.latency.samplesCount, 'p50 ÷ ring-wait p50': (p50 / base).toFixed(2) });
}
console.table(rows);

Atomics.store(stopFlag, 0, 1);
await Promise.all([workers.close(), pool.close(), spinner.terminate(), echo.terminate()]);
