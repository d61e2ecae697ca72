// openDevice({ workers: n }), n ≥ 2: n NIC threads, each with its own socket and its share of the
// QPs (QP q on thread q mod n), one device memory, the same keys on every thread, CQs fed by
// every thread (src/nic/multi-port.ts). Before, any workers ≥ 1 gave one NIC thread: these
// tests read each thread's own stats, which one thread does not have.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, connect, type Device, type DeviceEvent, listen, Opcode, type QueuePair, WcStatus } from '../../src/index.js';
import type { MultiPort } from '../../src/nic/multi-port.js';
import { take } from '../verbs/helpers.js';
import { deviceList, placedPerThread } from './threads.js';

const devices = deviceList();
afterEach(async () => {
  await devices.closeAll();
});

const dev = devices.open;

const init = { type: 'rc' as const, maxSendWr: 64, maxRecvWr: 64, maxSge: 2 };

/** `n` connected rc QP pairs between a and b, on one CQ per device. */
async function pairs(a: Device, b: Device, n: number) {
  const [pdA, pdB] = [a.allocPd(), b.allocPd()];
  const [cqA, cqB] = [a.createCq({ depth: 1024 }), b.createCq({ depth: 1024 })];
  const qa: QueuePair[] = [];
  const qb: QueuePair[] = [];
  for (let i = 0; i < n; i++) {
    qa.push(pdA.createQp({ ...init, sendCq: cqA, recvCq: cqA }));
    qb.push(pdB.createQp({ ...init, sendCq: cqB, recvCq: cqB }));
  }
  const wire = (x: unknown) => JSON.parse(JSON.stringify(x));
  await Promise.all(qa.flatMap((q, i) => [q.connect(wire({ address: b.address, qpn: qb[i]!.qpn })), qb[i]!.connect(wire({ address: a.address, qpn: q.qpn }))]));
  return { pdA, pdB, cqA, cqB, qa, qb };
}

describe.each(['udp', 'tcp'] as const)('%s, workers: 2', (transport) => {
  it('the address lists each thread\'s port; QPs spread over the threads, each pair\'s writes placed by the thread that owns its QP', { timeout: 30_000 }, async () => {
    const [a, b] = [await dev(transport, 2), await dev(transport, 2)];
    expect([a.workers, b.workers]).toEqual([2, 2]);
    const ports = b.address['ports'] as number[];
    expect(ports).toHaveLength(2);
    expect(ports[0]).toBe(b.address.port);
    expect(new Set(ports).size).toBe(2);
    const { pdA, pdB, cqA, cqB, qa, qb } = await pairs(a, b, 4);
    const size = 64 << 10;
    const src = pdA.regMr(size, Access.LocalWrite);
    src.buffer.fill(7);
    const dst = pdB.regMr(size * 4, Access.LocalWrite | Access.RemoteWrite);
    for (const q of qb) q.postRecv({ wrId: q.qpn, sgList: [] });
    const before = placedPerThread(b);
    qa.forEach((q, i) => q.postSend({
      wrId: i, opcode: Opcode.RdmaWriteWithImm, imm: i, sgList: [{ addr: src.addr, length: size, lkey: src.lkey }], remoteAddr: dst.addr + i * size, rkey: dst.rkey,
    }));
    const sent = await take(cqA, 4, 10_000);
    const got = await take(cqB, 4, 10_000);
    expect(sent.every((w) => w.status === WcStatus.Success)).toBe(true);
    expect(got.map((w) => w.imm).sort()).toEqual([0, 1, 2, 3]);
    expect(got.every((w) => w.status === WcStatus.Success && w.byteLen === size)).toBe(true);
    expect(dst.buffer.every((x) => x === 7)).toBe(true);
    // Two QPs of b on each thread: each thread placed two of the writes.
    const after = placedPerThread(b);
    expect(after.map((x, i) => x - before[i]!)).toEqual([2 * size, 2 * size]);
    // The device's stats are the threads' sum.
    expect(b.stats().directBytes).toBe(after[0]! + after[1]!);
  });

  it('one region\'s keys work on every thread, and stop on every thread at deregister', { timeout: 30_000 }, async () => {
    const [a, b] = [await dev(transport, 2), await dev(transport, 2)];
    const { pdA, pdB, cqA, qa } = await pairs(a, b, 2);
    const src = pdA.regMr(64, Access.LocalWrite);
    const dst = pdB.regMr(4096, Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead);
    dst.buffer.fill(3, 0, 64);
    // Reads from both threads of a, answered by both threads of b, into one region of a.
    qa.forEach((q, i) => q.postSend({ wrId: i, opcode: Opcode.RdmaRead, sgList: [{ addr: src.addr + i * 32, length: 32, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey }));
    expect((await take(cqA, 2, 10_000)).map((w) => w.status)).toEqual([WcStatus.Success, WcStatus.Success]);
    expect(src.buffer.every((x) => x === 3)).toBe(true);
    dst.deregister();
    for (const q of qa) {
      q.postSend({ wrId: 9, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
      expect((await take(cqA, 1, 10_000))[0]!.status).toBe(WcStatus.RemAccessErr);
    }
  });

  it('a region over the caller\'s own (non-shared) memory is written and read through QPs on either thread', { timeout: 30_000 }, async () => {
    const [a, b] = [await dev(transport, 2), await dev(transport, 2)];
    const { pdA, pdB, cqA, qa } = await pairs(a, b, 2);
    const mine = new Uint8Array(256).fill(4);
    const src = pdA.regMr(mine, Access.LocalWrite);
    const theirs = new Uint8Array(512);
    const dst = pdB.regMr(theirs, Access.LocalWrite | Access.RemoteWrite);
    qa.forEach((q, i) => q.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 256, lkey: src.lkey }], remoteAddr: dst.addr + i * 256, rkey: dst.rkey }));
    expect((await take(cqA, 2, 10_000)).every((w) => w.status === WcStatus.Success)).toBe(true);
    // Placed by each thread into its view of the region, copied into the caller's memory here.
    await expect.poll(() => theirs.every((x) => x === 4)).toBe(true);
  });

  it('atomics from QPs on different threads to one word lose no update', { timeout: 30_000 }, async () => {
    const [a, b] = [await dev(transport, 2), await dev(transport, 2)];
    const { pdA, pdB, cqA, qa } = await pairs(a, b, 2);
    const word = pdB.regMr(8, Access.LocalWrite | Access.RemoteAtomic);
    const old = pdA.regMr(8 * 64, Access.LocalWrite);
    const rounds = 8;
    for (let r = 0; r < rounds; r++) {
      for (const q of qa) for (let k = 0; k < 32; k++) {
        q.postSend({ wrId: k, opcode: Opcode.AtomicFetchAdd, compareAdd: 1n, sgList: [{ addr: old.addr + (k % 64) * 8, length: 8, lkey: old.lkey }], remoteAddr: word.addr, rkey: word.rkey });
      }
      expect((await take(cqA, 64, 10_000)).every((w) => w.status === WcStatus.Success)).toBe(true);
    }
    expect(new DataView(word.buffer.buffer, word.buffer.byteOffset, 8).getBigUint64(0, true)).toBe(BigInt(rounds * 64));
  });

  it.each([0, 1])('a peer of workers: %i reaches QPs on either thread, and they reach it', { timeout: 30_000 }, async (w) => {
    const [a, b] = [await dev(transport, 2), await dev(transport, w)];
    for (const [x, y] of [[a, b], [b, a]] as const) {
      const { pdA, pdB, cqA, cqB, qa, qb } = await pairs(x, y, 2);
      const src = pdA.regMr(256, Access.LocalWrite);
      src.buffer.fill(5);
      const dst = pdB.regMr(512, Access.LocalWrite);
      qb.forEach((q, i) => q.postRecv({ wrId: i, sgList: [{ addr: dst.addr + i * 256, length: 256, lkey: dst.lkey }] }));
      qa.forEach((q, i) => q.postSend({ wrId: i, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 256, lkey: src.lkey }] }));
      await take(cqA, 2, 10_000);
      expect((await take(cqB, 2, 10_000)).every((c) => c.status === WcStatus.Success && c.byteLen === 256)).toBe(true);
      expect(dst.buffer.every((v) => v === 5)).toBe(true);
    }
  });

  it('the passive side: connections accepted by a listener land on both threads, and carry traffic', { timeout: 30_000 }, async () => {
    const [a, b] = [await dev(transport, 2), await dev(transport, 2)];
    const pdB = b.allocPd();
    const dst = pdB.regMr(4 * 4096, Access.LocalWrite | Access.RemoteWrite);
    const l = listen(b, { service: 3, pd: pdB });
    try {
      const clients = await Promise.all([0, 1, 2, 3].map(() => connect(a, b.address, { service: 3 })));
      const servers = await Promise.all(clients.map(() => l.accept(10_000)));
      const before = placedPerThread(b);
      const pdA = clients[0]!.pd;
      const src = pdA.regMr(4096, Access.LocalWrite);
      src.buffer.fill(9);
      clients.forEach((q, i) => q.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 4096, lkey: src.lkey }], remoteAddr: dst.addr + i * 4096, rkey: dst.rkey }));
      for (const q of clients) expect((await take(q.sendCq, 1, 10_000))[0]!.status).toBe(WcStatus.Success);
      expect(dst.buffer.every((v) => v === 9)).toBe(true);
      const after = placedPerThread(b);
      expect(after.map((x, i) => x - before[i]!)).toEqual([2 * 4096, 2 * 4096]);
      expect(servers).toHaveLength(4);
    } finally {
      await l.close();
    }
  });

  it('a dialer that knows only host:port (a command line) reaches a listener of several threads: its QPs are accepted on thread 0', { timeout: 30_000 }, async () => {
    const [a, b] = [await dev(transport, 2), await dev(transport, 2)];
    const plain = { transport, host: '127.0.0.1', port: b.address.port };
    const pdB = b.allocPd();
    const dst = pdB.regMr(4 * 64, Access.LocalWrite | Access.RemoteWrite);
    const l = listen(b, { service: 4, pd: pdB });
    try {
      const clients = await Promise.all([0, 1, 2, 3].map(() => connect(a, plain, { service: 4 })));
      await Promise.all(clients.map(() => l.accept(10_000)));
      const src = clients[0]!.pd.regMr(64, Access.LocalWrite);
      src.buffer.fill(6);
      const before = placedPerThread(b);
      clients.forEach((q, i) => q.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: dst.addr + i * 64, rkey: dst.rkey }));
      for (const q of clients) expect((await take(q.sendCq, 1, 10_000))[0]!.status).toBe(WcStatus.Success);
      expect(dst.buffer.every((v) => v === 6)).toBe(true);
      expect(placedPerThread(b).map((x, i) => x - before[i]!)).toEqual([4 * 64, 0]);
    } finally {
      await l.close();
    }
  });

  it('a NIC thread that ends is the device failing: device-fatal, the other thread\'s outstanding work flushed, the device closed', { timeout: 30_000 }, async () => {
    const d = await dev(transport, 2);
    const events: DeviceEvent[] = [];
    d.on('event', (ev: DeviceEvent) => events.push(ev));
    const pd = d.allocPd();
    const cq = d.createCq({ depth: 8 });
    const q0 = [pd.createQp({ ...init, sendCq: cq, recvCq: cq }), pd.createQp({ ...init, sendCq: cq, recvCq: cq })].find((q) => q.qpn % 2 === 0)!;
    q0.postRecv({ wrId: 42, sgList: [] });
    await (d.nic as unknown as MultiPort).threads[1]!.worker.terminate();
    await expect.poll(() => d.closed).toBe(true);
    await d.close();
    expect(events.map((e) => e.type)).toEqual(['device-fatal']);
    expect(cq.poll(8)).toMatchObject([{ wrId: 42, status: WcStatus.WrFlushErr }]);
  });
});
