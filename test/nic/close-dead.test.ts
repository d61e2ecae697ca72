// dev.close() right after its NIC thread was ended (terminate(), its 'exit' not yet seen): the
// close must find the thread gone, not wait out the mailbox's 5 s deadline on a QP destroy it
// blocked in. A closing device sends its QP destroys with the close, awaited, so the thread's
// 'exit' is seen meanwhile: what was posted is flushed (WrFlushErr), the waits settle
// ERR_CLOSED, and the close resolves at once.
import { describe, expect, it } from 'vitest';
import { Access, openDevice, WcStatus } from '../../src/index.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';

describe('dev.close() right after its NIC thread was ended', () => {
  it.each([
    ['udp', 1],
    ['tcp', 1],
    ['udp', 2],
  ] as const)('%s, workers %d: the close resolves at once, the posted work flushed', { timeout: 30_000 }, async (transport, workers) => {
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
    dev.on('event', () => {});
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 16 });
    const mr = pd.regMr(4096, Access.LocalWrite);
    const qps = [0, 1].map(() => pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 }));
    for (const [i, qp] of qps.entries()) qp.postRecv({ wrId: i + 1, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
    // A QP with a CQ of its own, as the cm makes them (its destroy drops that CQ too).
    const own = dev.createCq({ depth: 4 });
    const cmLike = pd.createQp({ type: 'rc', sendCq: own, recvCq: own, maxSendWr: 2, maxRecvWr: 2, maxSge: 1 });
    cmLike.ownCq = own;
    // A wait on a CQ nothing completes into settles with the close.
    const waiting = dev.createCq({ depth: 4 }).wait(20_000).catch((e: unknown) => e);
    const nic = dev.nic as unknown as ThreadPort | { threads: ThreadPort[] };
    const threads = 'threads' in nic ? nic.threads : [nic];
    for (const t of threads) void t.worker.terminate();
    const t0 = performance.now();
    await dev.close();
    // A generous bound: before, the close blocked in a QP destroy for the mailbox's 5 s deadline.
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(dev.closed).toBe(true);
    expect(await waiting).toMatchObject({ code: 'ERR_CLOSED' });
    expect(cq.poll(16).map((w) => [w.wrId, w.status]).sort((x, y) => Number(x[0]) - Number(y[0]))).toEqual([
      [1, WcStatus.WrFlushErr],
      [2, WcStatus.WrFlushErr],
    ]);
  });
});
