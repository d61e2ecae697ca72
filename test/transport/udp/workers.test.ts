// The UDP data plane on worker threads (a link opened with DataPlaneWorkers), with integrity 'crc32c' (the
// workers only ever compute CRCs; docs/integrity.md): the CRC32C of large
// datagrams is checked on receive and computed on transmit by real data-plane workers over the
// device memory. Checked against an independent CRC32C (@node-rs/crc32), end to end over real
// sockets on 127.0.0.1 with bytes compared, and with corrupted datagrams that the workers'
// check must catch (never placed; the transfer still completes exactly).
import { crc32c as nodeCrc32c } from '@node-rs/crc32';
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { DataPlaneWorkers } from '../../../src/dataplane/workers.js';
import { Access, Opcode, WcStatus, openDevice, type Device } from '../../../src/index.js';
import { CrcOffload } from '../../../src/transport/udp/crc-offload.js';
import { UdpLink } from '../../../src/transport/udp/link.js';
import { Device as DeviceClass } from '../../../src/verbs/device.js';
import { rng } from '../../sim/random.js';

const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic;
const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((d) => d.close()));
});

describe('CrcOffload', () => {
  it('computes CRC32C of device-memory ranges with any previous value, split over 1 and 2 workers', async () => {
    const dm = await DeviceMemory.create({ maximumBytes: 1 << 26, workerSlots: 2 });
    const base = dm.alloc(4 << 20, 64);
    const r = rng(7);
    const u8 = dm.u8();
    for (let i = 0; i < 4 << 20; i++) u8[base + i] = (r() * 256) | 0;
    for (const count of [1, 2]) {
      const off = new CrcOffload(dm, await DataPlaneWorkers.start(dm, count), { minBytes: 1 });
      try {
        for (const n of [1, 2, 3, 17, 64]) {
          const ptr: number[] = [];
          const len: number[] = [];
          const prev: number[] = [];
          for (let i = 0; i < n; i++) {
            const l = i % 5 === 0 ? 0 : 1 + ((r() * 65000) | 0);
            ptr.push(base + ((r() * ((4 << 20) - l)) | 0));
            len.push(l);
            prev.push((r() * 0x1_0000_0000) >>> 0);
          }
          const got = await off.run((n & 1) as 0 | 1, ptr, len, prev, n);
          const u = dm.u8();
          for (let i = 0; i < n; i++) expect(got[i], `item ${i} of ${n}`).toBe(nodeCrc32c(Buffer.from(u.subarray(ptr[i]!, ptr[i]! + len[i]!)), prev[i]!) >>> 0);
        }
        await expect(off.run(0, [], [], [], 0)).rejects.toThrow(RangeError);
      } finally {
        await off.close();
      }
    }
  });
});

function side(dev: Device) {
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 4096 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 512, maxRecvWr: 512, maxSge: 4 });
  const mr = pd.regMr(8 << 20, ALL);
  return { pd, cq, qp, mr };
}

async function drain(cq: ReturnType<Device['createCq']>, n: number) {
  const out = [];
  while (out.length < n) {
    await cq.wait(20_000);
    for (const w of cq.poll(64)) {
      expect(w.status, `wrId ${String(w.wrId)}`).toBe(WcStatus.Success);
      out.push(w);
    }
  }
  return out;
}

/** 8 MiB of writes A→B in 64 KiB pieces (32 in flight), 4 MiB read back B→A, one Send; bytes compared. */
async function exercise(a: Device, b: Device) {
  const A = side(a);
  const B = side(b);
  await Promise.all([A.qp.connect({ address: b.address, qpn: B.qp.qpn }), B.qp.connect({ address: a.address, qpn: A.qp.qpn })]);
  const r = rng(99);
  const src = A.mr.buffer;
  for (let i = 0; i < src.length; i++) src[i] = (r() * 256) | 0;
  const piece = 64 << 10;
  const n = (8 << 20) / piece;
  let posted = 0;
  let done = 0;
  while (done < n) {
    while (posted < n && posted - done < 32) {
      const off = posted * piece;
      A.qp.postSend({ wrId: posted++, opcode: Opcode.RdmaWrite, sgList: [{ addr: A.mr.addr + off, length: piece, lkey: A.mr.lkey }], remoteAddr: B.mr.addr + off, rkey: B.mr.rkey });
    }
    done += (await drain(A.cq, 1)).length;
  }
  expect(Buffer.compare(Buffer.from(B.mr.buffer), Buffer.from(src))).toBe(0);
  // Read the first 4 MiB back into the second half of A's region, in 1 MiB reads.
  for (let i = 0; i < 4; i++) {
    A.qp.postSend({ wrId: 1000 + i, opcode: Opcode.RdmaRead, sgList: [{ addr: A.mr.addr + (4 << 20) + i * (1 << 20), length: 1 << 20, lkey: A.mr.lkey }], remoteAddr: B.mr.addr + i * (1 << 20), rkey: B.mr.rkey });
  }
  await drain(A.cq, 4);
  expect(Buffer.compare(Buffer.from(src.subarray(4 << 20)), Buffer.from(src.subarray(0, 4 << 20)))).toBe(0);
  B.qp.postRecv({ wrId: 1, sgList: [{ addr: B.mr.addr, length: 100_000, lkey: B.mr.lkey }] });
  A.qp.postSend({ wrId: 2000, opcode: Opcode.Send, sgList: [{ addr: A.mr.addr + 12345, length: 100_000, lkey: A.mr.lkey }] });
  const [got] = await drain(B.cq, 1);
  expect(got!.byteLen).toBe(100_000);
  expect(Buffer.compare(Buffer.from(B.mr.buffer.subarray(0, 100_000)), Buffer.from(src.subarray(12345, 112345)))).toBe(0);
  await drain(A.cq, 1);
}

describe('udp devices with data-plane workers', () => {
  for (const workers of [1, 2]) {
    it(`moves writes, reads and sends byte-exact with ${workers} data-plane workers, the CRCs done on the workers`, async () => {
      const build = async (): Promise<Device> => {
        const mem = await DeviceMemory.create({ maximumBytes: 1 << 30, workerSlots: workers });
        const t = await UdpLink.open({ host: '127.0.0.1', port: 0, deviceMemory: mem, workers: await DataPlaneWorkers.start(mem, workers), integrity: 'crc32c' });
        return new DeviceClass(mem, t, { mss: t.mss });
      };
      const a = await build();
      open.push(a);
      const b = await build();
      open.push(b);
      await exercise(a, b);
      const sa = (a.stats() as unknown as { link: Record<string, number> }).link;
      const sb = (b.stats() as unknown as { link: Record<string, number> }).link;
      // The first large batch each way goes to the workers (later ones may stay inline while
      // the workers are slower than this thread: see offloadBackoffs).
      expect(sa.txOffloaded).toBeGreaterThan(0);
      expect(sb.rxOffloaded).toBeGreaterThan(0);
      for (const s of [sa, sb]) {
        expect(s.offloadFailures).toBe(0);
        expect(s.badCrc).toBe(0);
      }
    }, 60_000);
  }

  it('openDevice({ workers: 1 }) with integrity crc32c: the NIC thread moves writes, reads and sends byte-exact, its CRCs checked', async () => {
    const a = await openDevice({ transport: 'udp', workers: 1, integrity: 'crc32c' });
    open.push(a);
    const b = await openDevice({ transport: 'udp', workers: 1, integrity: 'crc32c' });
    open.push(b);
    await exercise(a, b);
    const sb = (b.stats() as unknown as { link: Record<string, number> }).link;
    expect(sb.contextsCrc32c).toBe(1);
    expect(sb.badCrc).toBe(0);
  }, 60_000);

  it('drops datagrams the workers find corrupt (counted, never placed) and still completes every byte', async () => {
    // Built from its parts as openDevice does, plus a receive hook that flips a byte in ~3% of
    // the large datagrams before the device sees them.
    const corrupting = async (seed: number) => {
      const r = rng(seed);
      const mem = await DeviceMemory.create({ maximumBytes: 1 << 30, workerSlots: 2 });
      const t = await UdpLink.open({
        host: '127.0.0.1', port: 0, deviceMemory: mem, workers: await DataPlaneWorkers.start(mem, 2), offloadBackoff: false, integrity: 'crc32c',
        rxFilter: (d) => {
          if (d.length > 16_384 && r() < 0.03) d[100 + ((r() * (d.length - 200)) | 0)]! ^= 0x10;
          return true;
        },
      });
      return new DeviceClass(mem, t, { mss: t.mss });
    };
    const a = await corrupting(1);
    open.push(a);
    const b = await corrupting(2);
    open.push(b);
    await exercise(a, b);
    const sb = b.stats() as unknown as { link: Record<string, number> };
    const sa = a.stats() as unknown as { link: Record<string, number> };
    expect(sb.link.badCrc + sa.link.badCrc).toBeGreaterThan(0);
    // Each byte placed exactly once: B got 8 MiB of writes and a 100 000-byte Send, A 4 MiB of reads.
    expect(b.stats().directBytes + b.stats().indirectBytes).toBe((8 << 20) + 100_000);
    expect(a.stats().directBytes + a.stats().indirectBytes).toBe(4 << 20);
    expect(sb.link.rxOffloaded).toBeGreaterThan(0);
    // Caught by the workers' check itself, not only by the inline one.
    expect(sb.link.rxOffloadedBadCrc + sa.link.rxOffloadedBadCrc).toBeGreaterThan(0);
    expect(sb.link.offloadFailures + sa.link.offloadFailures).toBe(0);
  }, 60_000);

  it('goes on inline, every byte exact, when its workers are gone mid-transfer', async () => {
    const build = async () => {
      const mem = await DeviceMemory.create({ maximumBytes: 1 << 30, workerSlots: 1 });
      const w = await DataPlaneWorkers.start(mem, 1);
      const t = await UdpLink.open({ host: '127.0.0.1', port: 0, deviceMemory: mem, workers: w, offloadBackoff: false, integrity: 'crc32c' });
      return { dev: new DeviceClass(mem, t, { mss: t.mss }), w };
    };
    const a = await build();
    open.push(a.dev);
    const b = await build();
    open.push(b.dev);
    // Stop both devices' workers once the first batches have gone through them.
    let stopped = false;
    const timer = setInterval(() => {
      const s = (a.dev.stats() as unknown as { link: Record<string, number> }).link;
      if (!stopped && s.txOffloaded > 8) {
        stopped = true;
        void a.w.close();
        void b.w.close();
      }
    }, 1);
    try {
      await exercise(a.dev, b.dev);
    } finally {
      clearInterval(timer);
    }
    expect(stopped).toBe(true);
    const sa = (a.dev.stats() as unknown as { link: Record<string, number> }).link;
    const sb = (b.dev.stats() as unknown as { link: Record<string, number> }).link;
    expect(sa.offloadFailures + sb.offloadFailures).toBeGreaterThan(0);
  }, 60_000);

  it('rejects a bad workers count', async () => {
    await expect(openDevice({ transport: 'udp', workers: -1 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    await expect(openDevice({ transport: 'udp', workers: 1.5 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});
