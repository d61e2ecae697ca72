// A peer that disappears (its process is killed): the transport retries, gives up after its
// retry limit, and the work that depended on the peer completes with RetryExcErr — the rc QP
// goes to ERROR and later posts flush; an srd QP keeps working with other peers. The device's
// peer context is freed. Bounded in time by the transport's retry span (~5 s), never a hang.
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Opcode, QpState, WcStatus, type Device } from '../../../src/index.js';
import { ALL, openLocal, startPeer, stopPeer, take, type Peer, type RemoteMr } from './helpers.js';

const peers: Peer[] = [];
const devs: Device[] = [];
afterAll(async () => {
  for (const d of devs) await d.close();
  for (const p of peers) await stopPeer(p);
});

// The two cases run at once (devices and peer processes of their own): most of each is the
// transport's retry span.
describe.concurrent('udp: a peer that vanishes', () => {
  it('rc: RetryExcErr for the outstanding work, QP in ERROR, later posts flush, context freed', async () => {
    const dev = await openLocal({ mtu: 1500 });
    devs.push(dev);
    const peer = await startPeer({ mtu: 1500 });
    peers.push(peer);
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 64 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 });
    const r = await peer.call<{ h: number; qpn: number }>('qp', { type: 'rc' });
    await Promise.all([qp.connect({ address: peer.address, qpn: r.qpn }), peer.call('connect', { qp: r.h, address: dev.address, qpn: qp.qpn })]);
    const m = await peer.call<RemoteMr>('mr', { length: 100_000, access: ALL });
    const src = pd.regMr(100_000, ALL);
    // It works first.
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 100_000, lkey: src.lkey }], remoteAddr: m.addr, rkey: m.rkey });
    expect((await take(cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success });

    await peer.kill();
    const t0 = Date.now();
    qp.postSend({ wrId: 2, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 50_000, lkey: src.lkey }], remoteAddr: m.addr, rkey: m.rkey });
    qp.postSend({ wrId: 3, opcode: Opcode.RdmaRead, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: m.addr, rkey: m.rkey });
    const wcs = await take(cq, 2, 20_000);
    expect(wcs.map((w) => [w.wrId, w.status])).toEqual([[2, WcStatus.RetryExcErr], [3, WcStatus.WrFlushErr]]);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(qp.state).toBe(QpState.Error);
    qp.postSend({ wrId: 4, opcode: Opcode.Send, sgList: [] });
    expect((await take(cq, 1))[0]).toMatchObject({ wrId: 4, status: WcStatus.WrFlushErr });
    // The NIC thread counts the failed peer in the turn that failed it; this thread may poll the
    // completions first (bounded wait).
    await vi.waitFor(() => {
      const link = dev.stats().link!;
      expect(link.linkFailures).toBeGreaterThanOrEqual(1);
      expect(link.contextsFailed).toBeGreaterThanOrEqual(1);
      expect(link.contexts).toBe(0);
    }, { timeout: 5000 });
  }, 30_000);

  it('srd: work to the dead peer fails with RetryExcErr; the QP still reaches a live peer', async () => {
    const dev = await openLocal({ mtu: 1500 });
    devs.push(dev);
    const [dead, live] = await Promise.all([startPeer({ mtu: 1500 }), startPeer({ mtu: 1500 })]);
    peers.push(dead, live);
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 64 });
    const qp = pd.createQp({ type: 'srd', sendCq: cq, recvCq: cq, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 });
    const rd = await dead.call<{ h: number; qpn: number }>('qp', { type: 'srd' });
    const rl = await live.call<{ h: number; qpn: number }>('qp', { type: 'srd' });
    const md = await dead.call<RemoteMr>('mr', { length: 4096, access: ALL });
    const ml = await live.call<RemoteMr>('mr', { length: 4096, access: ALL });
    const src = pd.regMr(4096, ALL);
    src.buffer.fill(0x3c);
    const ahDead = pd.createAh({ address: dead.address });
    const ahLive = pd.createAh({ address: { ...live.address } });
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 4096, lkey: src.lkey }], remoteAddr: md.addr, rkey: md.rkey, ah: ahDead, remoteQpn: rd.qpn });
    expect((await take(cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success });
    await dead.kill();
    qp.postSend({ wrId: 2, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 4096, lkey: src.lkey }], remoteAddr: md.addr, rkey: md.rkey, ah: ahDead, remoteQpn: rd.qpn });
    expect((await take(cq, 1, 20_000))[0]).toMatchObject({ wrId: 2, status: WcStatus.RetryExcErr });
    expect(qp.state).toBe(QpState.Rts);
    qp.postSend({ wrId: 3, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 4096, lkey: src.lkey }], remoteAddr: ml.addr, rkey: ml.rkey, ah: ahLive, remoteQpn: rl.qpn });
    expect((await take(cq, 1))[0]).toMatchObject({ wrId: 3, status: WcStatus.Success });
    const got = await live.call<Uint8Array>('bytes', { mr: ml.h, off: 0, len: 4096 });
    expect(got.every((b) => b === 0x3c)).toBe(true);
  }, 30_000);
});
