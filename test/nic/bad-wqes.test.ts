// The WQE ring is a SharedArrayBuffer the application's code can reach, so the NIC thread reads
// each record as untrusted: a record whose piece counts run past its end, an unknown kind, QP or
// opcode, an lkey that names no region (or a region of another PD), a segment outside its
// region, an srd send whose address handle the NIC does not know — each is dropped and counted
// (dev.stats().nic.badWqes), never thrown in the NIC thread (that is device-fatal) and never
// placed outside a region. Before, the first of them ended the NIC thread.
import { describe, expect, it } from 'vitest';
import { Access, type Device, type DeviceEvent, Opcode, openDevice, QpState, WcStatus } from '../../src/index.js';
import type { RecordRing } from '../../src/nic/ring.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';
import { WQE_KIND_RECV, WQE_KIND_SEND, writeRecvWqe, writeSendWqe } from '../../src/nic/wqe.js';
import * as W from '../../src/wire/fields.gen.js';
import { take } from '../verbs/helpers.js';

const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead;

/** A record of `size` zeroed body bytes, then filled by `fill`. */
function raw(size: number, fill: (dv: DataView, off: number) => void): (ring: RecordRing) => void {
  return (ring) => {
    const off = ring.reserve(size);
    ring.u8.fill(0, off, off + size);
    fill(ring.dv, off);
  };
}

/** Write records straight into `dev`'s WQE ring (as code that reached its SharedArrayBuffer could), then ring. */
function inject(dev: Device, write: (ring: RecordRing) => void): void {
  (dev.nic as unknown as ThreadPort).post((ring: RecordRing) => (write(ring), true), undefined);
}

describe('garbage in the WQE ring', () => {
  it.each(['udp', 'tcp'] as const)('%s: every bad record is a counted drop; the device lives and its QPs keep working', { timeout: 30_000 }, async (transport) => {
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 1 });
    const peer = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 0 });
    const events: DeviceEvent[] = [];
    dev.on('event', (ev: DeviceEvent) => events.push(ev));
    try {
      const pd = dev.allocPd();
      const other = dev.allocPd();
      const cq = dev.createCq({ depth: 64 });
      const mr = pd.regMr(4096, ALL);
      const foreign = other.regMr(4096, ALL);
      const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 2 });
      const ppd = peer.allocPd();
      const pcq = peer.createCq({ depth: 64 });
      const pmr = ppd.regMr(4096, ALL);
      const pqp = ppd.createQp({ type: 'rc', sendCq: pcq, recvCq: pcq, maxSendWr: 16, maxRecvWr: 16, maxSge: 2 });
      await Promise.all([qp.connect({ address: peer.address, qpn: pqp.qpn }), pqp.connect({ address: dev.address, qpn: qp.qpn })]);
      const sge = (addr: number, length: number, lkey: number) => [{ addr, length, lkey }];
      const send = (o: Partial<Parameters<typeof writeSendWqe>[1]>) => (ring: RecordRing) => void writeSendWqe(ring, { qpn: qp.qpn, token: 9000, opcode: Opcode.RdmaWrite, signaled: true, sges: sge(mr.addr, 64, mr.lkey), remoteAddr: pmr.addr, rkey: pmr.rkey, ...o });
      const recv = (o: Partial<Parameters<typeof writeRecvWqe>[1]>) => (ring: RecordRing) => void writeRecvWqe(ring, { qpn: qp.qpn, token: 9000, sges: sge(mr.addr, 64, mr.lkey), ...o });
      const bad: Array<(ring: RecordRing) => void> = [
        // A kind nobody writes.
        (ring) => ring.dv.setUint8(ring.reserve(64), 0x7e),
        // Piece counts that run past the record's end (65535 SGEs in a bare body), an inline length likewise.
        raw(W.SEND_WQE_SIZE, (dv, off) => {
          dv.setUint8(off + W.SEND_WQE_KIND_OFF, WQE_KIND_SEND);
          dv.setUint16(off + W.SEND_WQE_N_SGE_OFF, 0xffff, true);
          dv.setUint32(off + W.SEND_WQE_QPN_OFF, qp.qpn, true);
        }),
        raw(W.RECV_WQE_SIZE, (dv, off) => {
          dv.setUint8(off + W.RECV_WQE_KIND_OFF, WQE_KIND_RECV);
          dv.setUint16(off + W.RECV_WQE_N_SGE_OFF, 0xffff, true);
          dv.setUint32(off + W.RECV_WQE_QPN_OFF, qp.qpn, true);
        }),
        raw(W.SEND_WQE_SIZE + 8, (dv, off) => {
          dv.setUint8(off + W.SEND_WQE_KIND_OFF, WQE_KIND_SEND);
          dv.setUint8(off + W.SEND_WQE_OPCODE_OFF, Opcode.Send);
          dv.setUint8(off + W.SEND_WQE_FLAGS_OFF, W.SEND_WQE_FLAGS_INLINE | W.SEND_WQE_FLAGS_SIGNALED);
          dv.setUint32(off + W.SEND_WQE_QPN_OFF, qp.qpn, true);
          dv.setUint32(off + W.SEND_WQE_INLINE_LEN_OFF, 1 << 19, true);
        }),
        send({ qpn: 0x00ab_cdef }),
        send({ opcode: 250 }),
        send({ sges: sge(mr.addr, 64, 0x7777_7700) }),
        send({ sges: sge(foreign.addr, 64, foreign.lkey) }),
        send({ sges: sge(mr.addr + 4000, 4096, mr.lkey) }),
        send({ sges: sge(mr.addr, 8, mr.lkey).concat(sge(mr.addr, 8, mr.lkey), sge(mr.addr, 8, mr.lkey)) }), // past maxSge
        recv({ qpn: 0x00ab_cdef }),
        recv({ sges: sge(mr.addr + 4090, 64, mr.lkey) }),
        recv({ sges: sge(mr.addr, 64, 0x7777_7700) }),
      ];
      for (const b of bad) inject(dev, b);
      // The QP still works: a receive the peer sends into, and a write.
      qp.postRecv({ wrId: 1, sgList: sge(mr.addr, 64, mr.lkey) });
      pmr.buffer.fill(7, 0, 64);
      pqp.postRecv({ wrId: 2, sgList: sge(pmr.addr, 64, pmr.lkey) });
      pqp.postSend({ wrId: 3, opcode: Opcode.Send, sgList: sge(pmr.addr, 64, pmr.lkey) });
      mr.buffer.fill(5, 64, 128);
      qp.postSend({ wrId: 4, opcode: Opcode.RdmaWrite, sgList: sge(mr.addr + 64, 64, mr.lkey), remoteAddr: pmr.addr + 128, rkey: pmr.rkey });
      const wcs = await take(cq, 2);
      expect(wcs.map((w) => [Number(w.wrId), w.status]).sort()).toEqual([[1, WcStatus.Success], [4, WcStatus.Success]]);
      expect([...mr.buffer.subarray(0, 4)]).toEqual([7, 7, 7, 7]);
      expect([...pmr.buffer.subarray(128, 132)]).toEqual([5, 5, 5, 5]);
      expect(events.map((e) => e.type)).not.toContain('device-fatal');
      expect(dev.stats().nic?.badWqes).toBe(bad.length);
    } finally {
      await peer.close();
      await dev.close();
    }
  });

  it.each(['udp', 'tcp'] as const)('%s: a record length in the ring that runs past what was published drops what the ring holds, counted; later posts go on', { timeout: 30_000 }, async (transport) => {
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 1 });
    const events: DeviceEvent[] = [];
    dev.on('event', (ev: DeviceEvent) => events.push(ev));
    try {
      const pd = dev.allocPd();
      const cq = dev.createCq({ depth: 64 });
      const mr = pd.regMr(4096, ALL);
      const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
      // The prefix before a record's body holds its length (src/nic/ring.ts).
      inject(dev, (ring) => {
        const off = ring.reserve(W.RECV_WQE_SIZE);
        ring.u8.fill(0, off, off + W.RECV_WQE_SIZE);
        ring.dv.setUint32(off - 8, 0x7fff_0000, true);
      });
      // A request takes what the ring holds first: the first is taken (and given up on) before the second is written.
      expect(dev.stats().nic?.badWqes).toBe(1);
      inject(dev, (ring) => {
        const off = ring.reserve(W.RECV_WQE_SIZE);
        ring.u8.fill(0, off, off + W.RECV_WQE_SIZE);
        ring.dv.setUint32(off - 8, 4096, true); // within the ring's largest, past what was published
      });
      expect(dev.stats().nic?.badWqes).toBe(2);
      // Posts after it are taken: a receive, flushed when the QP enters ERROR.
      qp.postRecv({ wrId: 7, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
      qp.modify({ state: QpState.Error });
      const wcs = [];
      for (let tries = 0; wcs.length < 1 && tries < 25; tries++) {
        await cq.wait(200).catch(() => undefined);
        wcs.push(...cq.poll(4));
      }
      expect(wcs.map((w) => [Number(w.wrId), w.status])).toEqual([[7, WcStatus.WrFlushErr]]);
      expect(events.map((e) => e.type)).not.toContain('device-fatal');
    } finally {
      await dev.close();
    }
  });

  it('udp: an srd send naming an address handle the NIC does not know is dropped, counted; the QP goes on', { timeout: 30_000 }, async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    const peer = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 0 });
    const events: DeviceEvent[] = [];
    dev.on('event', (ev: DeviceEvent) => events.push(ev));
    try {
      const pd = dev.allocPd();
      const cq = dev.createCq({ depth: 64 });
      const mr = pd.regMr(4096, ALL);
      const qp = pd.createQp({ type: 'srd', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 2 });
      const ppd = peer.allocPd();
      const pcq = peer.createCq({ depth: 64 });
      const pmr = ppd.regMr(4096, ALL);
      const pqp = ppd.createQp({ type: 'srd', sendCq: pcq, recvCq: pcq, maxSendWr: 16, maxRecvWr: 16, maxSge: 2 });
      const sg = [{ addr: mr.addr, length: 8, lkey: mr.lkey }];
      inject(dev, (ring) => void writeSendWqe(ring, { qpn: qp.qpn, token: 9000, opcode: Opcode.Send, signaled: true, sges: sg, ah: 4242, remoteQpn: pqp.qpn }));
      inject(dev, (ring) => void writeSendWqe(ring, { qpn: qp.qpn, token: 9001, opcode: Opcode.Send, signaled: true, sges: sg }));
      const ah = pd.createAh({ address: peer.address });
      pqp.postRecv({ wrId: 1, sgList: [{ addr: pmr.addr, length: 64, lkey: pmr.lkey }] });
      qp.postSend({ wrId: 2, opcode: Opcode.Send, ah, remoteQpn: pqp.qpn, sgList: sg });
      expect((await take(cq, 1)).map((w) => [Number(w.wrId), w.status])).toEqual([[2, WcStatus.Success]]);
      expect((await take(pcq, 1)).map((w) => w.status)).toEqual([WcStatus.Success]);
      expect(events.map((e) => e.type)).not.toContain('device-fatal');
      expect(dev.stats().nic?.badWqes).toBe(2);
    } finally {
      await peer.close();
      await dev.close();
    }
  });
});
