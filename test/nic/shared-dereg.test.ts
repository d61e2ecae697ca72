// A region of a device of several NIC threads (workers: 2): the first thread registers it, the
// others adopt it (src/nic/shared-regions.ts). A deregister stops its keys on every thread that
// is told of it, whether or not the first thread still answers (it is skipped when it is gone:
// a device-fatal leaves the other threads running until the device's close ends them).
import { afterEach, describe, expect, it } from 'vitest';
import { type Device, type DeviceEvent, Opcode, openDevice, type QueuePair, WcStatus } from '../../src/index.js';
import { threadOf } from '../../src/core/peer-route.js';
import type { PortMr } from '../../src/nic/port.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';
import { ALL, take } from '../verbs/helpers.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

/**
 * b (two NIC threads) with a 64-byte region `tgt`, and a (inline) with an rc QP connected to a
 * QP of b's second thread — where a's writes are placed — and a 64-byte source of 7s.
 */
async function writerToSecondThread() {
  const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 2 });
  const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 0 });
  devs.push(a, b);
  const pdB = b.allocPd();
  const cqB = b.createCq({ depth: 16 });
  const caps = { maxSendWr: 8, maxRecvWr: 8, maxSge: 1 };
  let qpB: QueuePair;
  do qpB = pdB.createQp({ type: 'rc', sendCq: cqB, recvCq: cqB, ...caps });
  while (threadOf(qpB.qpn, 2) !== 1);
  const pdA = a.allocPd();
  const cqA = a.createCq({ depth: 16 });
  const qpA = pdA.createQp({ type: 'rc', sendCq: cqA, recvCq: cqA, ...caps });
  await Promise.all([qpA.connect({ address: b.address, qpn: qpB.qpn }), qpB.connect({ address: a.address, qpn: qpA.qpn })]);
  const src = pdA.regMr(64, ALL);
  src.buffer.fill(7);
  const tgt = pdB.regMr(64, ALL);
  return { b, qpA, cqA, src, tgt };
}

describe('deregister on a device of two NIC threads', () => {
  it('told to the second thread alone (the first gone): a write reaching it is refused and places nothing', { timeout: 30_000 }, async () => {
    const { b, qpA, cqA, src, tgt } = await writerToSecondThread();
    const write = (wrId: number) => qpA.postSend({ wrId, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: tgt.addr, rkey: tgt.rkey });
    write(1);
    expect((await take(cqA, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success });
    tgt.buffer.fill(0);
    // As the device does when its first thread takes no call any more: the others alone are told.
    const second = (b.nic as unknown as { threads: ThreadPort[] }).threads[1]!;
    second.deregister((tgt as unknown as { rec: PortMr }).rec, { adopted: true });
    write(2);
    expect((await take(cqA, 1))[0]).toMatchObject({ wrId: 2, status: WcStatus.RemAccessErr });
    expect(tgt.buffer.every((x) => x === 0)).toBe(true);
  });

  it('the first thread killed (device-fatal): a region deregistered then takes no write reaching the second thread', { timeout: 30_000 }, async () => {
    const { b, qpA, cqA, src, tgt } = await writerToSecondThread();
    const mem = tgt.buffer;
    // Deregistered as the device says it failed (the device's close starts right after).
    const fatal = new Promise<void>((resolve) => b.on('event', (ev: DeviceEvent) => {
      if (ev.type !== 'device-fatal') return;
      tgt.deregister();
      qpA.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: tgt.addr, rkey: tgt.rkey });
      resolve();
    }));
    await (b.nic as unknown as { threads: ThreadPort[] }).threads[0]!.worker.terminate();
    await fatal;
    const wc = (await take(cqA, 1))[0]!;
    expect(wc.status).not.toBe(WcStatus.Success);
    expect(mem.every((x) => x === 0)).toBe(true);
  });
});

