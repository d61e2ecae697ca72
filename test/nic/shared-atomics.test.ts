// Atomics on a region over the application's own SharedArrayBuffer (the NIC threads reach it
// directly) at an offset not a multiple of 8. RDMA atomics act on 8-byte-aligned words, and
// the alignment is the memory's: a region's address keeps its memory's alignment mod 8, so an
// atomic on a misaligned word is refused (RemInvReqErr, nothing changed) and one on an aligned
// word is one Atomics operation (atomic across the NIC threads of a device), as in device memory.
import { afterEach, describe, expect, it } from 'vitest';
import { type Device, Opcode, openDevice, WcStatus } from '../../src/index.js';
import { ALL, take } from '../verbs/helpers.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

describe('atomics on a shared external region at an unaligned offset', () => {
  it.each([0, 1, 2])('workers: %i: the word at an 8-aligned memory address is the atomic one; a misaligned one is refused', { timeout: 30_000 }, async (workers) => {
    const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers });
    const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 0 });
    devs.push(a, b);
    const caps = { maxSendWr: 8, maxRecvWr: 8, maxSge: 1 };
    const pdA = a.allocPd();
    const pdB = b.allocPd();
    const cqA = a.createCq({ depth: 16 });
    const cqB = b.createCq({ depth: 16 });
    const qpA = pdA.createQp({ type: 'rc', sendCq: cqA, recvCq: cqA, ...caps });
    const qpB = pdB.createQp({ type: 'rc', sendCq: cqB, recvCq: cqB, ...caps });
    await Promise.all([qpA.connect({ address: b.address, qpn: qpB.qpn }), qpB.connect({ address: a.address, qpn: qpA.qpn })]);
    const mem = new Uint8Array(new SharedArrayBuffer(64), 4, 48); // the region starts 4 bytes past an 8-byte boundary
    const tgt = pdB.regMr(mem, ALL);
    const res = pdA.regMr(64, ALL);
    const fetchAdd = (wrId: number, off: number) => qpA.postSend({ wrId, opcode: Opcode.AtomicFetchAdd, sgList: [{ addr: res.addr, length: 8, lkey: res.lkey }], remoteAddr: tgt.addr + off, rkey: tgt.rkey, compareAdd: 5n });
    // Offset 4 of the region is the word at byte 8 of the memory: aligned.
    expect(tgt.addr % 8).toBe(4);
    fetchAdd(1, 4);
    expect((await take(cqA, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success });
    expect(new BigUint64Array(mem.buffer, 8, 1)[0]).toBe(5n);
    // Offset 0 is the word at byte 4: misaligned, refused, nothing changed.
    fetchAdd(2, 0);
    expect((await take(cqA, 1))[0]).toMatchObject({ wrId: 2, status: WcStatus.RemInvReqErr });
    expect([...new Uint8Array(mem.buffer)].reduce((s, x) => s + x, 0)).toBe(5);
  });
});
