// DESIGN.md §4, the public contract, checked the way an outside acceptance test would use it:
// only `sabre`'s public entry point, the same program on every transport (two devices in this
// process: inproc, and udp/tcp over real sockets on 127.0.0.1), with the NIC inline
// (`workers: 0`), on a thread of its own (`workers: 1`) and on two (`workers: 2`).
import { describe, it } from 'vitest';
import {
  Access, Opcode, openDevice, QpState, SabreError, WcOpcode, WcStatus,
  type CompletionQueue, type Device, type QueuePair, type WorkCompletion,
} from '../../src/index.js';

const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;
type T = 'inproc' | 'udp' | 'tcp';

async function dev(transport: T, workers: number): Promise<Device> {
  return openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0, workers });
}

async function take(cq: CompletionQueue, n: number): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  const until = Date.now() + 10_000;
  while (out.length < n) {
    if (Date.now() > until) throw new Error(`only ${out.length}/${n} completions`);
    await cq.wait(10_000);
    out.push(...cq.poll(n - out.length));
  }
  return out;
}

interface Pair {
  a: Device;
  b: Device;
  cqA: CompletionQueue;
  cqB: CompletionQueue;
  qpA: QueuePair;
  qpB: QueuePair;
  pdA: ReturnType<Device['allocPd']>;
  pdB: ReturnType<Device['allocPd']>;
}

async function rcPair(transport: T, workers: number): Promise<Pair> {
  const a = await dev(transport, workers);
  const b = await dev(transport, workers);
  const pdA = a.allocPd();
  const pdB = b.allocPd();
  const cqA = a.createCq({ depth: 256 });
  const cqB = b.createCq({ depth: 256 });
  const init = { type: 'rc' as const, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 };
  const qpA = pdA.createQp({ ...init, sendCq: cqA, recvCq: cqA });
  const qpB = pdB.createQp({ ...init, sendCq: cqB, recvCq: cqB });
  // As verbs programs do: QP info exchanged out of band — here through JSON, as it would travel.
  const infoA = JSON.parse(JSON.stringify({ address: a.address, qpn: qpA.qpn }));
  const infoB = JSON.parse(JSON.stringify({ address: b.address, qpn: qpB.qpn }));
  await Promise.all([qpA.connect(infoB), qpB.connect(infoA)]);
  return { a, b, cqA, cqB, qpA, qpB, pdA, pdB };
}

function pattern(n: number, seed: number): Uint8Array {
  const u = new Uint8Array(n);
  let x = seed | 1;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    u[i] = x >>> 24;
  }
  return u;
}

const MODES = [
  { transport: 'inproc', workers: 0 }, { transport: 'udp', workers: 0 }, { transport: 'tcp', workers: 0 },
  { transport: 'udp', workers: 1 }, { transport: 'tcp', workers: 1 },
  { transport: 'udp', workers: 2 }, { transport: 'tcp', workers: 2 },
] as const;

// Every test opens devices of its own; most of its time is their NIC threads starting and
// stopping, so a mode's tests run at once (with their context's expect), the modes in turn.
describe.each(MODES)('verbs contract on $transport (workers: $workers)', ({ transport, workers }) => {
  it.concurrent('dev.address is a plain JSON-safe object of the right shape', async ({ expect }) => {
    const d = await dev(transport, workers);
    try {
      expect(JSON.parse(JSON.stringify(d.address))).toEqual(d.address);
      expect(d.address.transport).toBe(transport);
      if (transport !== 'inproc') {
        // Several NIC threads: each thread's port too, the first being `port` (docs/nic.md).
        const ports = workers >= 2 ? { ports: [d.address.port, ...Array.from({ length: workers - 1 }, () => expect.any(Number))] } : {};
        expect(d.address).toEqual({ transport, host: '127.0.0.1', port: expect.any(Number), ...ports });
        expect(d.address.port).toBeGreaterThan(0);
      }
    } finally {
      await d.close();
    }
  });

  it.concurrent('regMr: 64-byte aligned, buffer is the region, keys die at deregister (RemAccessErr, nothing written)', async ({ expect }) => {
    const p = await rcPair(transport, workers);
    try {
      const src = p.pdA.regMr(4096, Access.LocalWrite);
      const dst = p.pdB.regMr(4096, ALL);
      for (const mr of [src, dst]) {
        expect(mr.addr % 64).toBe(0);
        expect(mr.length).toBe(4096);
        expect(mr.buffer).toBeInstanceOf(Uint8Array);
        expect(mr.buffer.length).toBe(4096);
        expect(typeof mr.lkey).toBe('number');
        expect(typeof mr.rkey).toBe('number');
      }
      src.buffer.set(pattern(100, 1));
      p.qpA.postSend({ wrId: 1n, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }], remoteAddr: dst.addr + 8, rkey: dst.rkey });
      const [ok] = await take(p.cqA, 1);
      expect(ok).toMatchObject({ wrId: 1n, status: WcStatus.Success, opcode: WcOpcode.RdmaWrite, qpn: p.qpA.qpn });
      expect(Buffer.from(dst.buffer.subarray(8, 108)).equals(Buffer.from(src.buffer.subarray(0, 100)))).toBe(true);
      const view = dst.buffer;
      const before = Buffer.from(view);
      const oldAddr = dst.addr;
      const oldRkey = dst.rkey;
      dst.deregister();
      p.qpA.postSend({ wrId: 2, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }], remoteAddr: oldAddr, rkey: oldRkey });
      const [bad] = await take(p.cqA, 1);
      expect(bad).toMatchObject({ wrId: 2, status: WcStatus.RemAccessErr });
      expect(Buffer.from(view).equals(before)).toBe(true); // the old region's bytes: nothing written
    } finally {
      await p.a.close();
      await p.b.close();
    }
  });

  it.concurrent('Send / SendWithImm land in posted receives in order; WriteWithImm consumes a receive with an empty sgList', async ({ expect }) => {
    const p = await rcPair(transport, workers);
    try {
      const src = p.pdA.regMr(8192, Access.LocalWrite);
      const dst = p.pdB.regMr(8192, ALL);
      src.buffer.set(pattern(8192, 2));
      for (let i = 0; i < 3; i++) p.qpB.postRecv({ wrId: 100 + i, sgList: [{ addr: dst.addr + i * 1024, length: 1024, lkey: dst.lkey }] });
      p.qpB.postRecv({ wrId: 200, sgList: [] });
      p.qpA.postSend({ wrId: 1, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 10, lkey: src.lkey }] });
      p.qpA.postSend({ wrId: 2, opcode: Opcode.SendWithImm, imm: 0xdeadbeef, sgList: [{ addr: src.addr + 10, length: 1000, lkey: src.lkey }] });
      p.qpA.postSend({ wrId: 3, opcode: Opcode.Send, sgList: [] });
      p.qpA.postSend({ wrId: 4, opcode: Opcode.RdmaWriteWithImm, imm: 7, sgList: [{ addr: src.addr + 2000, length: 3000, lkey: src.lkey }], remoteAddr: dst.addr + 4096, rkey: dst.rkey });
      const sent = await take(p.cqA, 4);
      expect(sent.map((w) => [w.wrId, w.status])).toEqual([[1, 0], [2, 0], [3, 0], [4, 0]]);
      const got = await take(p.cqB, 4);
      expect(got.map((w) => [w.wrId, w.opcode, w.byteLen, w.imm])).toEqual([
        [100, WcOpcode.Recv, 10, undefined],
        [101, WcOpcode.Recv, 1000, 0xdeadbeef],
        [102, WcOpcode.Recv, 0, undefined],
        [200, WcOpcode.RecvRdmaWithImm, 3000, 7],
      ]);
      expect(Buffer.from(dst.buffer.subarray(0, 10)).equals(Buffer.from(src.buffer.subarray(0, 10)))).toBe(true);
      expect(Buffer.from(dst.buffer.subarray(1024, 2024)).equals(Buffer.from(src.buffer.subarray(10, 1010)))).toBe(true);
      expect(Buffer.from(dst.buffer.subarray(4096, 7096)).equals(Buffer.from(src.buffer.subarray(2000, 5000)))).toBe(true);
    } finally {
      await p.a.close();
      await p.b.close();
    }
  });

  it.concurrent('RdmaRead with remoteSgList (uneven splits) and many reads outstanding up to maxSendWr', async ({ expect }) => {
    const p = await rcPair(transport, workers);
    try {
      const local = p.pdA.regMr(65536, Access.LocalWrite);
      const remote = p.pdB.regMr(65536, ALL);
      remote.buffer.set(pattern(65536, 3));
      // 3 sources (100 + 5000 + 17 bytes) into 2 sinks (3000 + 2117).
      p.qpA.postSend({
        wrId: 2n ** 64n - 1n,
        opcode: Opcode.RdmaRead,
        sgList: [{ addr: local.addr, length: 3000, lkey: local.lkey }, { addr: local.addr + 4000, length: 2117, lkey: local.lkey }],
        remoteSgList: [
          { addr: remote.addr + 7, length: 100, rkey: remote.rkey },
          { addr: remote.addr + 20000, length: 5000, rkey: remote.rkey },
          { addr: remote.addr + 60000, length: 17, rkey: remote.rkey },
        ],
      });
      const [wc] = await take(p.cqA, 1);
      expect(wc).toMatchObject({ wrId: 2n ** 64n - 1n, status: WcStatus.Success, opcode: WcOpcode.RdmaRead, byteLen: 5117 });
      const want = Buffer.concat([remote.buffer.subarray(7, 107), remote.buffer.subarray(20000, 25000), remote.buffer.subarray(60000, 60017)]);
      const have = Buffer.concat([local.buffer.subarray(0, 3000), local.buffer.subarray(4000, 6117)]);
      expect(have.equals(want)).toBe(true);
      expect(local.buffer[3000]).toBe(0); // the gap between sinks is untouched
      // 64 single reads posted at once (maxSendWr = 64): the device queues them within its read limits.
      for (let i = 0; i < 64; i++) {
        p.qpA.postSend({ wrId: i, opcode: Opcode.RdmaRead, sgList: [{ addr: local.addr + 8192 + i * 512, length: 512, lkey: local.lkey }], remoteAddr: remote.addr + i * 512, rkey: remote.rkey });
      }
      const wcs = await take(p.cqA, 64);
      expect(wcs.every((w) => w.status === WcStatus.Success)).toBe(true);
      expect(Buffer.from(local.buffer.subarray(8192, 8192 + 32768)).equals(Buffer.from(remote.buffer.subarray(0, 32768)))).toBe(true);
    } finally {
      await p.a.close();
      await p.b.close();
    }
  });

  it.concurrent('atomics act on 8-byte little-endian words; the old value lands in the sgList', async ({ expect }) => {
    const p = await rcPair(transport, workers);
    try {
      const local = p.pdA.regMr(64, Access.LocalWrite);
      const remote = p.pdB.regMr(64, ALL);
      const dv = new DataView(remote.buffer.buffer, remote.buffer.byteOffset, 64);
      const lv = new DataView(local.buffer.buffer, local.buffer.byteOffset, 64);
      dv.setBigUint64(8, 0xffff_ffff_ffff_fff0n, true);
      p.qpA.postSend({ wrId: 1, opcode: Opcode.AtomicFetchAdd, compareAdd: 0x20n, sgList: [{ addr: local.addr, length: 8, lkey: local.lkey }], remoteAddr: remote.addr + 8, rkey: remote.rkey });
      expect((await take(p.cqA, 1))[0]).toMatchObject({ status: WcStatus.Success, opcode: WcOpcode.FetchAdd });
      expect(lv.getBigUint64(0, true)).toBe(0xffff_ffff_ffff_fff0n);
      expect(dv.getBigUint64(8, true)).toBe(0x10n); // wrapped mod 2^64
      p.qpA.postSend({ wrId: 2, opcode: Opcode.AtomicCmpSwap, compareAdd: 0x10n, swap: 0x0102030405060708n, sgList: [{ addr: local.addr + 8, length: 8, lkey: local.lkey }], remoteAddr: remote.addr + 8, rkey: remote.rkey });
      expect((await take(p.cqA, 1))[0]).toMatchObject({ status: WcStatus.Success, opcode: WcOpcode.CmpSwap });
      expect(lv.getBigUint64(8, true)).toBe(0x10n);
      expect([...remote.buffer.subarray(8, 16)]).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);
    } finally {
      await p.a.close();
      await p.b.close();
    }
  });

  it.concurrent('a later write to the same bytes wins; cq.wait resolves at once when a completion is held', async ({ expect }) => {
    const p = await rcPair(transport, workers);
    try {
      const src = p.pdA.regMr(1 << 20, Access.LocalWrite);
      const dst = p.pdB.regMr(1 << 16, ALL);
      for (let i = 0; i < 16; i++) src.buffer.fill(i + 1, i * 65536, (i + 1) * 65536);
      for (let i = 0; i < 16; i++) p.qpA.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * 65536, length: 65536 - i * 1000, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
      await take(p.cqA, 16);
      for (let i = 0; i < 16; i++) {
        const end = 65536 - i * 1000;
        const start = i === 15 ? 0 : 65536 - (i + 1) * 1000;
        expect(dst.buffer.subarray(start, end).every((v) => v === i + 1), `bytes ${start}..${end}`).toBe(true);
      }
      p.qpA.postSend({ wrId: 99, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
      await p.cqA.wait(10_000);
      await p.cqA.wait(1); // already holds one: resolves at once, no timeout
      expect(p.cqA.poll(8)).toHaveLength(1);
    } finally {
      await p.a.close();
      await p.b.close();
    }
  });

  it.concurrent('entering ERROR flushes outstanding and later work with WrFlushErr; misuse throws SabreError with a code', async ({ expect }) => {
    const p = await rcPair(transport, workers);
    try {
      const src = p.pdA.regMr(4096, Access.LocalWrite);
      const dst = p.pdB.regMr(4096, Access.LocalWrite); // no remote access granted
      p.qpA.postRecv({ wrId: 77, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }] });
      p.qpA.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
      p.qpA.postSend({ wrId: 2, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
      const wcs = await take(p.cqA, 3);
      const byId = new Map(wcs.map((w) => [w.wrId, w.status]));
      expect(byId.get(1)).toBe(WcStatus.RemAccessErr);
      expect(byId.get(2)).toBe(WcStatus.WrFlushErr);
      expect(byId.get(77)).toBe(WcStatus.WrFlushErr);
      expect(dst.buffer.every((v) => v === 0)).toBe(true);
      // A QP in ERROR takes a later post (no throw: that is not misuse) and completes it flushed.
      expect(p.qpA.state).toBe(QpState.Error);
      p.qpA.postSend({ wrId: 3, opcode: Opcode.Send, sgList: [] });
      const later = await take(p.cqA, 1);
      expect(later).toHaveLength(1);
      expect(later[0]).toMatchObject({ wrId: 3, status: WcStatus.WrFlushErr });
      const bad = (f: () => unknown) => {
        try {
          f();
        } catch (e) {
          expect(e).toBeInstanceOf(SabreError);
          expect(typeof (e as SabreError).code).toBe('string');
          return (e as SabreError).code;
        }
        throw new Error('did not throw');
      };
      bad(() => p.pdA.regMr(-1, Access.LocalWrite));
      bad(() => p.a.createCq({ depth: 0 }));
      bad(() => p.pdA.createQp({ type: 'rc', sendCq: p.cqA, recvCq: p.cqA, maxSendWr: 1, maxRecvWr: 1, maxSge: 0 }));
      const qp = p.pdA.createQp({ type: 'rc', sendCq: p.cqA, recvCq: p.cqA, maxSendWr: 1, maxRecvWr: 1, maxSge: 1 });
      bad(() => qp.postRecv({ wrId: 1, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }, { addr: src.addr, length: 8, lkey: src.lkey }] }));
      bad(() => qp.postSend({ wrId: 1, opcode: 12345 as never, sgList: [] }));
    } finally {
      await p.a.close();
      await p.b.close();
    }
  });

  if (transport !== 'tcp') {
    it.concurrent('srd: reliable, each message exactly once, addressed by AH + remote QPN (a JSON copy of the address works)', async ({ expect }) => {
      const a = await dev(transport, workers);
      const b = await dev(transport, workers);
      try {
        const pdA = a.allocPd();
        const pdB = b.allocPd();
        const cqA = a.createCq({ depth: 256 });
        const cqB = b.createCq({ depth: 256 });
        const qpA = pdA.createQp({ type: 'srd', sendCq: cqA, recvCq: cqA, maxSendWr: 64, maxRecvWr: 64, maxSge: 1 });
        const qpB = pdB.createQp({ type: 'srd', sendCq: cqB, recvCq: cqB, maxSendWr: 64, maxRecvWr: 64, maxSge: 1 });
        const src = pdA.regMr(64 * 100, Access.LocalWrite);
        const dst = pdB.regMr(64 * 100, Access.LocalWrite);
        for (let i = 0; i < 40; i++) qpB.postRecv({ wrId: i, sgList: [{ addr: dst.addr + i * 100, length: 100, lkey: dst.lkey }] });
        const ah = pdA.createAh({ address: JSON.parse(JSON.stringify(b.address)) });
        for (let i = 0; i < 40; i++) {
          src.buffer.fill(i + 1, i * 100, i * 100 + 50);
          qpA.postSend({ wrId: i, opcode: Opcode.SendWithImm, imm: i, sgList: [{ addr: src.addr + i * 100, length: 50, lkey: src.lkey }], ah, remoteQpn: qpB.qpn });
        }
        const sent = await take(cqA, 40);
        expect(sent.every((w) => w.status === WcStatus.Success)).toBe(true);
        const got = await take(cqB, 40);
        expect(got.every((w) => w.status === WcStatus.Success && w.byteLen === 50 && w.srcQpn === qpA.qpn)).toBe(true);
        expect(new Set(got.map((w) => w.imm)).size).toBe(40); // each exactly once
        for (const w of got) {
          const slot = Number(w.wrId);
          expect(dst.buffer.subarray(slot * 100, slot * 100 + 50).every((v) => v === w.imm! + 1)).toBe(true);
        }
      } finally {
        await a.close();
        await b.close();
      }
    });
  }
});
