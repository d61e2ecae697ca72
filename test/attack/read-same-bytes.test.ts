// A peer granted RemoteRead on one region sends one RDMA Read whose remoteSgList names that
// region many times (maxSge allows 1024). The responder copies what a read answers (the
// deregister fence), and it copied every source entry on its own: one ~2 KiB request made it copy
// 64 × a 2 MiB region into its heap past maxAnswerBytes (128 MiB; ~4 GiB with 1024 entries of a
// 4 MiB region) — found by an audit, failed before the fix. Now each byte a request names is
// copied once (src/rdmap/responder.ts snapshotSources), and answers built from shared copies stay
// exact: overlapping, touching and interleaved sources of two regions, in any order.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, type Device, openDevice, Opcode, WcStatus } from '../../src/index.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function pair(transport: 'udp' | 'tcp') {
  const a = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 0 });
  const b = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 0, limits: { maxAnswerBytes: 4 << 20 } } as never);
  devs.push(a, b);
  const pdB = b.allocPd();
  const cqB = b.createCq({ depth: 64 });
  const qpB = pdB.createQp({ type: 'rc', sendCq: cqB, recvCq: cqB, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
  const pdA = a.allocPd();
  const cqA = a.createCq({ depth: 64 });
  const qpA = pdA.createQp({ type: 'rc', sendCq: cqA, recvCq: cqA, maxSendWr: 16, maxRecvWr: 16, maxSge: 1024 });
  await Promise.all([qpA.connect({ address: b.address, qpn: qpB.qpn }), qpB.connect({ address: a.address, qpn: qpA.qpn })]);
  // What b's engine copies for the answers (its heap copies: the read path's only ones).
  const mem = (b as unknown as { nic: { memory: { snapshot(v: Uint8Array): Uint8Array } } }).nic.memory;
  const counted = { copied: 0 };
  const orig = mem.snapshot.bind(mem);
  mem.snapshot = (v) => ((counted.copied += v.length), orig(v));
  const readOne = async (remoteSgList: { addr: number; length: number; rkey: number }[], sgList: { addr: number; length: number; lkey: number }[]) => {
    qpA.postSend({ wrId: 1, opcode: Opcode.RdmaRead, remoteSgList, sgList });
    for (let i = 0; i < 100; i++) {
      await cqA.wait(10_000);
      const w = cqA.poll(4);
      if (w.length) return w[0]!.status;
    }
    throw new Error('no completion');
  };
  return { pdA, pdB, counted, readOne };
}

describe('one RDMA Read naming the same granted bytes many times', () => {
  it.each(['udp', 'tcp'] as const)('%s: 64 × a 2 MiB region is copied once at the responder, and answered in full', async (transport) => {
    const R = 2 << 20;
    const N = 64;
    const { pdA, pdB, counted, readOne } = await pair(transport);
    const src = pdB.regMr(R, Access.LocalWrite | Access.RemoteRead);
    for (let i = 0; i < R; i += 4096) src.buffer[i] = (i >> 12) & 0xff;
    const sink = pdA.regMr(R, Access.LocalWrite);
    const status = await readOne(
      Array.from({ length: N }, () => ({ addr: src.addr, length: R, rkey: src.rkey })),
      Array.from({ length: N }, () => ({ addr: sink.addr, length: R, lkey: sink.lkey })),
    );
    expect(status).toBe(WcStatus.Success);
    expect(Buffer.compare(Buffer.from(sink.buffer), Buffer.from(src.buffer))).toBe(0);
    expect(counted.copied).toBeLessThanOrEqual(R);
  }, 60_000);

  it('overlapping, touching and interleaved sources of two regions land exactly, each byte copied once', async () => {
    const { pdA, pdB, counted, readOne } = await pair('udp');
    const x = pdB.regMr(4096, Access.LocalWrite | Access.RemoteRead);
    const y = pdB.regMr(4096, Access.LocalWrite | Access.RemoteRead);
    for (let i = 0; i < 4096; i++) {
      x.buffer[i] = (i * 7) & 0xff;
      y.buffer[i] = (i * 13 + 1) & 0xff;
    }
    // [region, offset, length]: y's and x's entries interleaved, overlapping, touching, repeated, one empty.
    const srcs: [typeof x, number, number][] = [
      [y, 100, 300], [x, 0, 1000], [x, 500, 1000], [y, 0, 50], [x, 1500, 10], [x, 3000, 96], [y, 100, 300], [x, 2000, 0], [y, 350, 1000],
    ];
    const total = srcs.reduce((n, [, , l]) => n + l, 0);
    const sink = pdA.regMr(total, Access.LocalWrite);
    const status = await readOne(
      srcs.map(([r, o, l]) => ({ addr: r.addr + o, length: l, rkey: r.rkey })),
      [{ addr: sink.addr, length: total, lkey: sink.lkey }],
    );
    expect(status).toBe(WcStatus.Success);
    const want = Buffer.concat(srcs.map(([r, o, l]) => Buffer.from(r.buffer.subarray(o, o + l))));
    expect(Buffer.compare(Buffer.from(sink.buffer), want)).toBe(0);
    // Distinct bytes: x [0, 1510) and [3000, 3096), y [0, 50) and [100, 1350).
    expect(counted.copied).toBe(1510 + 96 + 50 + 1250);
  }, 30_000);
});
