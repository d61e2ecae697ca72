// Completions the NIC thread held back (its completion ring was full while the application was
// away) reach the right work requests whatever the application does meanwhile: a reset starts
// its tokens at 0 again and a destroyed QP leaves the QPN table, so without a fence a late flush
// named new work or was dropped. And close hands over, or flushes, every outstanding request
// even when the NIC thread's hand-over does not finish, or the thread is ended from outside.
import { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Access, type CompletionQueue, type Device, openDevice, QpState } from '../../src/index.js';
import { within } from '../lifecycle/within.js';

const blockFor = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** Threads that keep every core busy for `ms`: the NIC thread then lags the application's drain. */
function hogs(ms: number): Worker[] {
  return [0, 1, 2].map(() => new Worker(`const t = Date.now() + ${ms}; while (Date.now() < t);`, { eval: true }));
}

function setup(dev: Device) {
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 1 << 17 });
  const mr = pd.regMr(64, Access.LocalWrite);
  const sge = [{ addr: mr.addr, length: 64, lkey: mr.lkey }];
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1, maxRecvWr: 1 << 16, maxSge: 1 });
  return { pd, cq, sge, qp };
}

/** Every work request id polled from `cq` until `n` came or nothing more does (bounded), counted. */
async function collect(cq: CompletionQueue, n: number, into = new Map<number, number>()): Promise<Map<number, number>> {
  let got = [...into.values()].reduce((a, b) => a + b, 0);
  for (let idle = 0; got < n && idle < 20; ) {
    const ws = cq.poll(4096);
    if (ws.length === 0) {
      idle++;
      await cq.wait(100).catch(() => undefined);
      continue;
    }
    idle = 0;
    for (const w of ws) into.set(Number(w.wrId), (into.get(Number(w.wrId)) ?? 0) + 1);
    got += ws.length;
  }
  return into;
}

const N = 60_000; // more flushes than the completion ring holds

describe('completions held back across a reset or destroy', () => {
  let dev: Device;
  let busy: Worker[] = [];
  beforeEach(async () => {
    dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
  });
  /** N receives flushed while this thread was away and every core busy: most wait in the NIC thread. */
  async function flushedWhileAway() {
    const s = setup(dev);
    for (let i = 0; i < N; i++) s.qp.postRecv({ wrId: i, sgList: s.sge });
    await new Promise((r) => setTimeout(r, 100));
    busy = hogs(2000);
    s.qp.modify({ state: QpState.Error });
    blockFor(200);
    return s;
  }
  afterEach(async () => {
    await Promise.all(busy.map((w) => w.terminate()));
    busy = [];
    await dev.close();
  });

  it('a destroyed QP still gets every flush of its work', { timeout: 60_000 }, async () => {
    const { cq, sge, qp } = await flushedWhileAway();
    qp.destroy();
    const ids = await collect(cq, N);
    expect(ids.size).toBe(N);
    expect([...ids.values()].every((k) => k === 1)).toBe(true);
  });

  it('a reset QP: late flushes go to the old work, new work keeps its own completions', { timeout: 60_000 }, async () => {
    const { cq, sge, qp } = await flushedWhileAway();
    qp.modify({ state: QpState.Reset });
    qp.modify({ state: QpState.Init });
    const M = 20_000;
    for (let i = 0; i < M; i++) qp.postRecv({ wrId: 1_000_000 + i, sgList: sge });
    const ids = await collect(cq, N);
    // The new receives are still posted (INIT): none of them may have completed.
    expect([...ids.keys()].filter((id) => id >= 1_000_000)).toEqual([]);
    expect(ids.size).toBe(N);
    qp.modify({ state: QpState.Error });
    await collect(cq, N + M, ids);
    expect(ids.size).toBe(N + M);
    expect([...ids.values()].every((k) => k === 1)).toBe(true);
  });
});

describe('close and outstanding work', () => {
  it('a NIC thread ended from outside: close settles at once', { timeout: 30_000 }, async () => {
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 1 });
    const worker = (dev.nic as unknown as { worker: Worker }).worker;
    const closed = dev.close();
    void worker.terminate();
    await within(closed, 3000);
  });

  it('the application away past the NIC thread\'s hand-over: every outstanding request still completes', { timeout: 60_000 }, async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    const { cq, sge, qp } = setup(dev);
    const n = 65_000;
    for (let i = 0; i < n; i++) qp.postRecv({ wrId: i, sgList: sge });
    await new Promise((r) => setTimeout(r, 100));
    const closed = dev.close();
    // Longer than the NIC thread waits for room to hand its held-back completions over.
    blockFor(10_500);
    await within(closed, 15_000);
    const ids = new Set<number>();
    // After close a CQ hands out what was queued, then says it is closed.
    const take = (): { wrId: unknown }[] => {
      try {
        return cq.poll(4096);
      } catch {
        return [];
      }
    };
    for (let ws = take(); ws.length > 0; ws = take()) for (const w of ws) ids.add(Number(w.wrId));
    expect(ids.size).toBe(n);
  });
});
