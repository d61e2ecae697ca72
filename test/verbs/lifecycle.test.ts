// Closing a device settles every pending promise of it and its objects with one code,
// ERR_CLOSED, at once — listener.accept, qp.connect, cm connect, cq.wait — and leaves the
// flushed completions of outstanding work pollable (WrFlushErr), then poll throws ERR_CLOSED.
// Closing a listener alone does the same to its pending accepts (ERR_CLOSED, as docs/errors.md).
// Each case: the exact misuse, the code it gets, the time it takes (bounded well below any
// protocol timeout, which is 10 s for connects).
import { startUdpRelay } from '../relay.js';
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Access, connect, ErrorCode, listen, Opcode, openDevice, SabreError, WcStatus, type Device } from '../../src/index.js';

const devs: Device[] = [];
const servers: Server[] = [];
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
  for (const s of sockets) s.destroy(); // only after a failed case
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function dev(transport: 'udp' | 'tcp' | 'inproc'): Promise<Device> {
  const d = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
  devs.push(d);
  return d;
}

/** Settles `p`, returning the error (or undefined) and how long the settling took after `at`. */
async function outcome(p: Promise<unknown>, at: () => number): Promise<{ err: unknown; ms: number }> {
  try {
    await p;
    return { err: undefined, ms: performance.now() - at() };
  } catch (err) {
    return { err, ms: performance.now() - at() };
  }
}

const isClosed = (e: unknown): boolean => e instanceof SabreError && e.code === ErrorCode.Closed;

describe.each(['udp', 'tcp', 'inproc'] as const)('closing a %s device', (transport) => {
  it('a pending listener.accept() rejects with ERR_CLOSED at once', async () => {
    const d = await dev(transport);
    const l = listen(d, { service: 3 });
    let closedAt = 0;
    const o = outcome(l.accept(), () => closedAt);
    closedAt = performance.now();
    await d.close();
    const { err, ms } = await o;
    expect(isClosed(err)).toBe(true);
    expect(ms).toBeLessThan(500);
  });

  it('a pending listener.accept() rejects with ERR_CLOSED at once when the listener is closed (the device stays open)', async () => {
    const d = await dev(transport);
    const l = listen(d, { service: 4 });
    let closedAt = 0;
    const o = outcome(l.accept(60_000), () => closedAt);
    const o2 = outcome(l.accept(), () => closedAt);
    closedAt = performance.now();
    l.close();
    for (const { err, ms } of [await o, await o2]) {
      expect(isClosed(err)).toBe(true);
      expect(ms).toBeLessThan(100);
    }
    // Later calls reject at once the same way; the device and its service number are free again.
    await expect(l.accept()).rejects.toMatchObject({ code: ErrorCode.Closed });
    expect(d.closed).toBe(false);
    const again = listen(d, { service: 4 });
    again.close();
  });

  it('a pending qp.connect() rejects with ERR_CLOSED (not ERR_INVALID_STATE) at once', async () => {
    const a = await dev(transport);
    const b = await dev(transport);
    const pd = a.allocPd();
    const cq = a.createCq({ depth: 16 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    // b has a QP 7 that never connects back: a's connect waits.
    const bqp = b.allocPd().createQp({ type: 'rc', sendCq: b.createCq({ depth: 4 }), recvCq: b.createCq({ depth: 4 }), maxSendWr: 1, maxRecvWr: 1, maxSge: 1 });
    let closedAt = 0;
    const o = outcome(qp.connect({ address: b.address, qpn: bqp.qpn }), () => closedAt);
    await new Promise((r) => setTimeout(r, 50));
    closedAt = performance.now();
    await a.close();
    const { err, ms } = await o;
    expect(err).toMatchObject({ code: ErrorCode.Closed });
    expect(ms).toBeLessThan(500);
  });

  it('a pending qp.connect() rejects with ERR_CLOSED when its QP is destroyed', async () => {
    const a = await dev(transport);
    const b = await dev(transport);
    const cq = a.createCq({ depth: 16 });
    const qp = a.allocPd().createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    const bqp = b.allocPd().createQp({ type: 'rc', sendCq: b.createCq({ depth: 4 }), recvCq: b.createCq({ depth: 4 }), maxSendWr: 1, maxRecvWr: 1, maxSge: 1 });
    const p = qp.connect({ address: b.address, qpn: bqp.qpn });
    qp.destroy();
    await expect(p).rejects.toMatchObject({ code: ErrorCode.Closed });
  });

  it('after close, flushed work is polled as WrFlushErr, then poll throws and wait rejects ERR_CLOSED', async () => {
    const a = await dev(transport);
    const pd = a.allocPd();
    const mr = pd.regMr(4096, Access.LocalWrite);
    const cq = a.createCq({ depth: 16 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    qp.postRecv([1, 2, 3].map((wrId) => ({ wrId, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] })));
    await a.close();
    await cq.wait(); // resolves: the flushes are there
    const wcs = cq.poll(16);
    expect(wcs.map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.WrFlushErr], [2, WcStatus.WrFlushErr], [3, WcStatus.WrFlushErr]]);
    expect(() => cq.poll()).toThrow(expect.objectContaining({ code: ErrorCode.Closed }));
    await expect(cq.wait()).rejects.toMatchObject({ code: ErrorCode.Closed });
  });
});

describe.each(['udp', 'tcp', 'inproc'] as const)('closing a %s device with work in flight', (transport) => {
  it('a write not yet answered completes WrFlushErr and is pollable after close', async () => {
    const a = await dev(transport);
    const b = await dev(transport);
    const pa = a.allocPd();
    const pb = b.allocPd();
    const cqa = a.createCq({ depth: 16 });
    const cqb = b.createCq({ depth: 16 });
    const qa = pa.createQp({ type: 'rc', sendCq: cqa, recvCq: cqa, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    const qb = pb.createQp({ type: 'rc', sendCq: cqb, recvCq: cqb, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);
    const src = pa.regMr(4096, Access.LocalWrite);
    const dst = pb.regMr(4096, Access.LocalWrite | Access.RemoteWrite);
    // Posted and closed in the same tick: the write's answer (its placement at b) cannot have come.
    qa.postSend({ wrId: 9, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 4096, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    await a.close();
    expect(cqa.poll(4)).toMatchObject([{ wrId: 9, status: WcStatus.WrFlushErr }]);
    expect(() => cqa.poll()).toThrow(expect.objectContaining({ code: ErrorCode.Closed }));
  });

  it('close({ drainMs }): a Send and Writes posted just before close reach the peer and complete Success', async () => {
    const a = await dev(transport);
    const b = await dev(transport);
    const pa = a.allocPd();
    const pb = b.allocPd();
    const cqa = a.createCq({ depth: 64 });
    const cqb = b.createCq({ depth: 64 });
    const qa = pa.createQp({ type: 'rc', sendCq: cqa, recvCq: cqa, maxSendWr: 32, maxRecvWr: 4, maxSge: 1 });
    const qb = pb.createQp({ type: 'rc', sendCq: cqb, recvCq: cqb, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);
    const n = 1 << 20;
    const src = pa.regMr(n, Access.LocalWrite);
    for (let i = 0; i < n; i++) src.buffer[i] = (i * 7 + 3) & 0xff;
    const dst = pb.regMr(n, Access.LocalWrite | Access.RemoteWrite);
    const rx = pb.regMr(4096, Access.LocalWrite);
    qb.postRecv({ wrId: 1, sgList: [{ addr: rx.addr, length: 4096, lkey: rx.lkey }] });
    // 1 MiB of writes in 16 pieces, then a Send after them (rc order: it lands last).
    for (let k = 0; k < 16; k++) {
      qa.postSend({ wrId: k, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + k * (n / 16), length: n / 16, lkey: src.lkey }], remoteAddr: dst.addr + k * (n / 16), rkey: dst.rkey });
    }
    qa.postSend({ wrId: 99, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }] });
    const t0 = performance.now();
    await a.close({ drainMs: 5000 });
    const took = performance.now() - t0;
    const wcs = cqa.poll(64);
    expect(wcs.map((w) => w.status)).toEqual(new Array(17).fill(WcStatus.Success));
    expect(took).toBeLessThan(5000);
    // b has every byte, and the Send's receive completed.
    for (let t = performance.now(); cqb.count === 0 && performance.now() - t < 2000; ) await new Promise((r) => setTimeout(r, 5));
    expect(cqb.poll(4)).toMatchObject([{ wrId: 1, status: WcStatus.Success, byteLen: 100 }]);
    const want = new Uint8Array(n);
    for (let i = 0; i < n; i++) want[i] = (i * 7 + 3) & 0xff;
    expect(Buffer.compare(dst.buffer, want)).toBe(0);
  });

  it('close({ drainMs }) takes milliseconds 0..3600000, and a second close() shares the first', async () => {
    const a = await dev(transport);
    await expect(a.close({ drainMs: -1 })).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    await expect(a.close({ drainMs: Number.NaN })).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    const p1 = a.close({ drainMs: 100 });
    expect(a.close()).toBe(p1);
    await p1;
    expect(a.closed).toBe(true);
  });
});

describe('closing a udp device whose peer vanished', () => {
  it('close({ drainMs }) gives up after drainMs: work a vanished peer never answers is flushed', async () => {
    const a = await dev('udp');
    const b = await dev('udp');
    const pa = a.allocPd();
    const cqa = a.createCq({ depth: 16 });
    const qa = pa.createQp({ type: 'rc', sendCq: cqa, recvCq: cqa, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    const pb = b.allocPd();
    const cqb = b.createCq({ depth: 16 });
    const qb = pb.createQp({ type: 'rc', sendCq: cqb, recvCq: cqb, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    // Through a relay: b vanishes when the relay stops forwarding (a partition: b's close
    // notice never reaches a, as when b's host is gone).
    const relay = await startUdpRelay({ target: { host: '127.0.0.1', port: b.address.port as number } });
    const aSeen = await relay.clientAddress({ host: '127.0.0.1', port: a.address.port as number });
    await Promise.all([qa.connect({ address: relay.address, qpn: qb.qpn }), qb.connect({ address: aSeen, qpn: qa.qpn })]);
    const src = pa.regMr(4096, Access.LocalWrite);
    const dst = pb.regMr(4096, Access.LocalWrite | Access.RemoteWrite);
    // b is gone and says nothing: a's write is retransmitted unanswered, for seconds before
    // the retry limit, so the drain runs out first.
    relay.pause();
    await b.close();
    qa.postSend({ wrId: 5, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    const t0 = performance.now();
    await a.close({ drainMs: 150 });
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(145);
    expect(took).toBeLessThan(1500);
    expect(cqa.poll(4)).toMatchObject([{ wrId: 5, status: WcStatus.WrFlushErr }]);
    await relay.close();
  });
});

describe.each(['udp', 'tcp'] as const)('cm connect over %s', (transport) => {
  it('pending while the device closes: rejects with ERR_CLOSED at once', async () => {
    const a = await dev(transport);
    // A peer that never answers. tcp: a plain TCP server that accepts and never speaks MPA.
    // udp: the port of a device that closed (the REQ is never answered).
    let peer: { transport: string; host: string; port: number };
    if (transport === 'tcp') {
      const srv = createServer((sock) => {
        sock.on('error', () => {});
        sock.on('close', () => sockets.delete(sock));
        sock.resume(); // read (and drop) the MPA request, so the peer's FIN is seen
        sockets.add(sock);
      });
      servers.push(srv);
      await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
      peer = { transport: 'tcp', host: '127.0.0.1', port: (srv.address() as { port: number }).port };
    } else {
      const silent = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
      peer = silent.address as typeof peer;
      await silent.close();
    }
    let closedAt = 0;
    const o = outcome(connect(a, peer, { service: 1 }), () => closedAt);
    await new Promise((r) => setTimeout(r, 100));
    closedAt = performance.now();
    await a.close();
    const { err, ms } = await o;
    expect(err).toMatchObject({ code: ErrorCode.Closed });
    expect(ms).toBeLessThan(500);
    // The wait's resources go with it: tcp, the dialled connection is closed (the server sees it end).
    for (let i = 0; i < 50 && sockets.size > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(sockets.size).toBe(0);
  });
});
