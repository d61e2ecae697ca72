// rdma_cm-like listen / accept / connect on every transport: the QPs come back connected (no
// out-of-band QPN exchange), private data travels both ways, traffic flows both ways with
// bytes compared, a missing service is rejected, a full backlog is asked again until its deadline.
import { afterEach, describe, expect, it } from 'vitest';
import {
  Access, connect, connectionInfo, listen, openDevice, Opcode, QpState, WcStatus,
  type CompletionQueue, type Device, type WorkCompletion,
} from '../../src/index.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function take(cq: CompletionQueue, n: number, timeoutMs = 10_000): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`${out.length}/${n} completions in ${timeoutMs} ms`);
    await cq.wait(left);
    out.push(...cq.poll(n - out.length));
  }
  return out;
}

const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite;

async function side(transport: 'tcp' | 'udp' | 'inproc') {
  const dev = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
  devs.push(dev);
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 1024 });
  const mr = pd.regMr(1 << 16, ALL);
  const qpInit = { sendCq: cq, recvCq: cq, maxSendWr: 64, maxRecvWr: 64, maxSge: 2 };
  return { dev, pd, cq, mr, qpInit };
}

const te = new TextEncoder();
const td = new TextDecoder();

describe('cm over udp: a burst past the CM QP\'s receive slots', () => {
  it('200 connects at once to a listener that spends 2 ms on each (the CM keeps 128 receives posted) all connect, its NIC on a thread of its own', async () => {
    const s = await side('udp');
    const c = await side('udp');
    // Each accepted connection costs the listener's thread 2 ms (a service setting up state):
    // REQs past the 128 posted receives wait in RNR retries until their slots come back.
    const busy = (): void => {
      const until = performance.now() + 2;
      while (performance.now() < until);
    };
    const l = listen(s.dev, { pd: s.pd, qpInit: { ...s.qpInit, maxSendWr: 4, maxRecvWr: 4 }, backlog: 256, setup: busy });
    let accepted = 0;
    const acceptor = (async () => {
      while (accepted < 200) {
        await l.accept(20_000);
        accepted++;
      }
    })();
    const rs = await Promise.allSettled(Array.from({ length: 200 }, () => connect(c.dev, s.dev.address, { pd: c.pd, qpInit: { ...c.qpInit, maxSendWr: 4, maxRecvWr: 4 }, timeoutMs: 20_000 })));
    expect(rs.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason)).slice(0, 3)).toEqual([]);
    await acceptor;
    expect(accepted).toBe(200);
  }, 30_000);
});

describe.each(['tcp', 'udp', 'inproc'] as const)('cm over %s', (transport) => {
  it('listen / accept / connect: connected QPs, private data both ways, traffic both ways', async () => {
    const s = await side(transport);
    const c = await side(transport);
    const l = listen(s.dev, {
      pd: s.pd, qpInit: s.qpInit, service: 4791, privateData: te.encode('welcome'),
      setup: (qp) => qp.postRecv({ wrId: 77, sgList: [{ addr: s.mr.addr, length: 4096, lkey: s.mr.lkey }] }),
    });
    const [qpC, qpS] = await Promise.all([
      connect(c.dev, s.dev.address, {
        pd: c.pd, qpInit: c.qpInit, service: 4791, privateData: te.encode('hello from client'),
        setup: (qp) => qp.postRecv({ wrId: 5, sgList: [{ addr: c.mr.addr, length: 4096, lkey: c.mr.lkey }] }),
      }),
      l.accept(10_000),
    ]);
    expect(qpC.state).toBe(QpState.Rts);
    expect(qpS.state).toBe(QpState.Rts);
    expect(td.decode(connectionInfo(qpS)!.privateData)).toBe('hello from client');
    expect(td.decode(connectionInfo(qpC)!.privateData)).toBe('welcome');
    expect(connectionInfo(qpC)!.remoteQpn).toBe(qpS.qpn);
    expect(connectionInfo(qpS)!.remoteQpn).toBe(qpC.qpn);
    // Where each end's peer is: the connector names what it dialled, the listener where the request came from.
    expect(connectionInfo(qpC)!.peer).toEqual(s.dev.address);
    if (transport === 'tcp') expect(connectionInfo(qpS)!.peer).toMatchObject({ transport: 'tcp', host: '127.0.0.1' });
    else expect(connectionInfo(qpS)!.peer).toEqual(c.dev.address);

    // Client → server Send (the receive was posted in setup, before the connection existed).
    c.mr.buffer.set(te.encode('ping over cm'), 100);
    qpC.postSend({ wrId: 1, opcode: Opcode.Send, sgList: [{ addr: c.mr.addr + 100, length: 12, lkey: c.mr.lkey }] });
    expect(await take(c.cq, 1)).toMatchObject([{ wrId: 1, status: WcStatus.Success }]);
    expect(await take(s.cq, 1)).toMatchObject([{ status: WcStatus.Success, byteLen: 12 }]);
    expect(td.decode(s.mr.buffer.subarray(0, 12))).toBe('ping over cm');
    // Server → client RdmaWrite + Send.
    s.mr.buffer.fill(0xab, 8192, 8192 + 3000);
    qpS.postSend({ wrId: 2, opcode: Opcode.RdmaWrite, sgList: [{ addr: s.mr.addr + 8192, length: 3000, lkey: s.mr.lkey }], remoteAddr: c.mr.addr + 20_000, rkey: c.mr.rkey });
    qpS.postSend({ wrId: 3, opcode: Opcode.Send, sgList: [{ addr: s.mr.addr, length: 4, lkey: s.mr.lkey }] });
    expect((await take(s.cq, 2)).map((w) => w.status)).toEqual([WcStatus.Success, WcStatus.Success]);
    expect(await take(c.cq, 1)).toMatchObject([{ wrId: 5, status: WcStatus.Success, byteLen: 4 }]);
    expect(c.mr.buffer.subarray(20_000, 23_000).every((x) => x === 0xab)).toBe(true);
    l.close();
  });

  it('several clients through one listener, async iteration', async () => {
    const s = await side(transport);
    const l = listen(s.dev, { pd: s.pd, qpInit: s.qpInit });
    const clients = await Promise.all([0, 1, 2].map(() => side(transport)));
    const conns = Promise.all(clients.map((c) => connect(c.dev, s.dev.address, { pd: c.pd, qpInit: c.qpInit })));
    const got = [];
    for await (const qp of l) {
      got.push(qp);
      if (got.length === 3) break;
    }
    const qps = await conns;
    expect(new Set(got.map((q) => connectionInfo(q)!.remoteQpn))).toEqual(new Set(qps.map((q) => q.qpn)));
    l.close();
  });

  it('timeoutMs: Infinity (no deadline asked for) connects and accepts, and a raw qp.connect connects with it', async () => {
    // A timer given Infinity (or anything past 2^31 - 1 ms) fires after 1 ms: it was an ERR_TIMEOUT at once.
    const s = await side(transport);
    const l = listen(s.dev, { pd: s.pd, qpInit: s.qpInit });
    const c = await side(transport);
    const [qp] = await Promise.all([connect(c.dev, s.dev.address, { pd: c.pd, qpInit: c.qpInit, timeoutMs: Infinity }), l.accept(Infinity)]);
    expect(qp.state).toBe(QpState.Rts);
    l.close();
    const a = c.pd.createQp({ type: 'rc', ...c.qpInit });
    const b = s.pd.createQp({ type: 'rc', ...s.qpInit });
    await Promise.all([a.connect({ address: s.dev.address, qpn: b.qpn, timeoutMs: Infinity }), b.connect({ address: c.dev.address, qpn: a.qpn, timeoutMs: 2 ** 40 })]);
    expect([a.state, b.state]).toEqual([QpState.Rts, QpState.Rts]);
  });

  it('no listener for the service: connect rejects, no QP is left behind', async () => {
    const s = await side(transport);
    const c = await side(transport);
    listen(s.dev, { pd: s.pd, qpInit: s.qpInit, service: 1 });
    await expect(connect(c.dev, s.dev.address, { pd: c.pd, qpInit: c.qpInit, service: 2, timeoutMs: 3000 })).rejects.toMatchObject({
      code: 'ERR_UNREACHABLE', message: expect.stringMatching(/no listener for service 2/),
    });
    expect(c.pd.qps.size).toBe(0);
  });

  it('backlog full: a further connect waits for room and ends with ERR_TIMEOUT at its deadline, its QPs gone', async () => {
    const s = await side(transport);
    const c = await side(transport);
    const l = listen(s.dev, { pd: s.pd, qpInit: s.qpInit, backlog: 1 });
    await connect(c.dev, s.dev.address, { pd: c.pd, qpInit: c.qpInit });
    const t0 = performance.now();
    const err = await connect(c.dev, s.dev.address, { pd: c.pd, qpInit: c.qpInit, timeoutMs: 800 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_TIMEOUT', message: expect.stringMatching(/backlog stayed full/) });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(500);
    // Only the connected QP is left of the attempts.
    expect(c.pd.qps.size).toBe(1);
    const qp = await l.accept(1000);
    expect(qp.state).toBe(QpState.Rts);
  });

  it('backlog full: a connect gets in once the application accepts (a crowd of 40 through a backlog of 4)', async () => {
    const s = await side(transport);
    const c = await side(transport);
    const l = listen(s.dev, { pd: s.pd, qpInit: s.qpInit, backlog: 4 });
    const accepted: unknown[] = [];
    const acceptor = (async () => {
      // A slow acceptor: the backlog stays full most of the time.
      while (accepted.length < 40) {
        accepted.push(await l.accept(20_000));
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const qps = await Promise.all(Array.from({ length: 40 }, () => connect(c.dev, s.dev.address, { pd: c.pd, qpInit: c.qpInit, timeoutMs: 20_000 })));
    await acceptor;
    expect(qps.every((q) => q.state === QpState.Rts)).toBe(true);
    expect(accepted).toHaveLength(40);
    expect(c.pd.qps.size).toBe(40);
  });

  it('backlog full: an abort while waiting for room ends the connect at once with ERR_ABORTED', async () => {
    const s = await side(transport);
    const c = await side(transport);
    listen(s.dev, { pd: s.pd, qpInit: s.qpInit, backlog: 1 });
    await connect(c.dev, s.dev.address, { pd: c.pd, qpInit: c.qpInit });
    const ac = new AbortController();
    const p = connect(c.dev, s.dev.address, { pd: c.pd, qpInit: c.qpInit, timeoutMs: 10_000, signal: ac.signal }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 300));
    const t0 = performance.now();
    ac.abort();
    expect(await p).toMatchObject({ code: 'ERR_ABORTED' });
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(c.pd.qps.size).toBe(1);
  });
});
