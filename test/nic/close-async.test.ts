// Closing a device whose NIC runs on a thread does not stop the application's event loop while
// the NIC thread's link lingers for its peers' acknowledgements (src/transport/udp/socket.ts
// close(), up to its grace): the close request's reply is awaited, not blocked on. The case
// that showed it: the peer is an inline device on this same thread, so it can answer only
// while this thread runs — blocked, the close always lasted the whole grace (~500 ms).
import { afterEach, describe, expect, it } from 'vitest';
import { Access, type Device, openDevice } from '../../src/index.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

describe('closing a NIC-thread device', () => {
  it('keeps the event loop running while its link lingers (an inline peer on this thread acknowledges meanwhile)', { timeout: 30_000 }, async () => {
    const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 0 });
    devs.push(b);
    const side = (d: Device) => {
      const pd = d.allocPd();
      const cq = d.createCq({ depth: 16 });
      return { qp: pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 }), mr: pd.regMr(4096, Access.LocalWrite | Access.RemoteWrite) };
    };
    const x = side(a);
    const y = side(b);
    await Promise.all([x.qp.connect({ address: b.address, qpn: y.qp.qpn }), y.qp.connect({ address: a.address, qpn: x.qp.qpn })]);
    await x.qp.write({ sgList: [{ addr: x.mr.addr, length: 64, lkey: x.mr.lkey }], remoteAddr: y.mr.addr, rkey: y.mr.rkey });
    let last = performance.now();
    let gap = 0;
    const tick = setInterval(() => {
      const now = performance.now();
      gap = Math.max(gap, now - last);
      last = now;
    }, 1);
    try {
      await a.close();
      // The last stretch too: a thread blocked in close() never ran the interval at all.
      gap = Math.max(gap, performance.now() - last);
    } finally {
      clearInterval(tick);
    }
    // Blocked, the longest gap was the whole linger (~500 ms); running, a few ms (a loaded machine: tens).
    expect(gap).toBeLessThan(250);
  });

  it('while it closes, the device reaches no peer (reachable() is false, it does not throw)', { timeout: 30_000 }, async () => {
    const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 0 });
    devs.push(b);
    expect(a.reachable(b.address)).toBe(true);
    const answers = new Set<string>();
    let closed = false;
    const closing = a.close().then(() => (closed = true));
    // Every turn of the loop until the close has ended, as a timer or an I/O callback would ask.
    for (let turn = 0; turn < 100_000 && !closed; turn++) {
      try {
        answers.add(String(a.reachable(b.address)));
      } catch (e) {
        answers.add(`threw ${(e as Error).message}`);
      }
      await new Promise((r) => setImmediate(r));
    }
    await closing;
    expect([...answers].filter((x) => x.startsWith('threw'))).toEqual([]);
  });
});
