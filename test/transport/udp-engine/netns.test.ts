// RDMA through the verbs API between two network namespaces joined by a veth pair, the link
// impaired with nftables (this kernel has no netem): 5% drop, 2% duplication, ~1% corruption of
// a payload byte, and reordering through a slow htb class. One device in each namespace (a
// child process each, driven over IPC). Tens of MB of writes, reads and sends: every
// completion must be Success, every byte exact, rc order kept (overlapping writes end as the
// last one posted; sends consume receives in posting order).
// Needs root, `ip` and `nft`; skipped with the reason otherwise. Traffic never leaves the
// namespaces created here, which afterAll deletes.
import { afterAll, describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../../src/index.js';
import { ALL, pattern, same, startPeer, stopPeer, type Peer, type RemoteMr } from './helpers.js';
import { impairedLink, netnsUnavailable, removeImpairedLinks } from '../../netns.js';

const reason = netnsUnavailable();
const peers: Peer[] = [];

afterAll(async () => {
  for (const p of peers) await p.kill();
  removeImpairedLinks();
});

interface Wc { wrId: number; status: number; byteLen: number; opcode: number }

describe('RDMA over UDP between two network namespaces impaired by nftables', () => {
  if (reason !== undefined) {
    it.skip(`skipped: ${reason} (needs root, iproute2 and nftables to build two namespaces joined by veth)`, () => {});
    return;
  }

  it('5% drop + 2% dup + ~1% corruption + reordering: ~40 MB of writes, reads and sends, all exact and in order', async () => {
    const { NA, NB, IPA, IPB, reorder, listRules } = impairedLink('e', 78);
    const MTU = 1472;
    const a = await startPeer({ netns: NA, host: IPA, mtu: MTU, memoryBytes: 128 << 20 });
    peers.push(a);
    const b = await startPeer({ netns: NB, host: IPB, mtu: MTU, memoryBytes: 128 << 20 });
    peers.push(b);
    const qa = await a.call<{ h: number; qpn: number }>('qp', { type: 'rc' });
    const qb = await b.call<{ h: number; qpn: number }>('qp', { type: 'rc' });
    await Promise.all([
      a.call('connect', { qp: qa.h, address: b.address, qpn: qb.qpn }),
      b.call('connect', { qp: qb.h, address: { ...a.address }, qpn: qa.qpn }),
    ]);
    const BULK = 24 << 20;
    const CHUNK = 64 << 10;
    const src = await a.call<RemoteMr>('mr', { length: BULK, access: ALL, seed: 0x1234 });
    const dst = await b.call<RemoteMr>('mr', { length: BULK, access: ALL });
    const want = pattern(BULK, 0x1234);
    const t0 = Date.now();

    // 1. 24 MiB of 64 KiB RdmaWrites A → B, all posted at once.
    const writes = Array.from({ length: BULK / CHUNK }, (_, i) => ({
      wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * CHUNK, length: CHUNK, lkey: src.lkey }],
      remoteAddr: dst.addr + i * CHUNK, rkey: dst.rkey,
    }));
    await a.call('postSend', { qp: qa.h, wrs: writes });
    const w1 = await a.call<Wc[]>('poll', { n: writes.length, timeoutMs: 150_000 });
    expect(w1.filter((w) => w.status !== WcStatus.Success)).toEqual([]);
    expect(w1.map((w) => w.wrId)).toEqual(writes.map((w) => w.wrId));
    expect(same(await b.call<Uint8Array>('bytes', { mr: dst.h, off: 0, len: BULK }), want)).toBe(true);

    // 2. Overlapping writes: 300 × 6000 B to five overlapping offsets; the last posted wins.
    const OV = 10_000;
    const ov = await b.call<RemoteMr>('mr', { length: OV, access: ALL });
    const model = new Uint8Array(OV);
    const ovw = Array.from({ length: 300 }, (_, i) => {
      const from = (i * 7919) % (BULK - 6000);
      const at = (i % 5) * 1000;
      model.set(want.subarray(from, from + 6000), at);
      return { wrId: 10_000 + i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + from, length: 6000, lkey: src.lkey }], remoteAddr: ov.addr + at, rkey: ov.rkey, signaled: i === 299 };
    });
    await a.call('postSend', { qp: qa.h, wrs: ovw });
    expect(await a.call<Wc[]>('poll', { n: 1, timeoutMs: 60_000 })).toMatchObject([{ wrId: 10_299, status: WcStatus.Success }]);
    expect(same(await b.call<Uint8Array>('bytes', { mr: ov.h, off: 0, len: OV }), model)).toBe(true);

    // 3. 8 MiB read back B → A (vectored: two sources into one sink), compared with the source.
    const RD = 8 << 20;
    const sink = await a.call<RemoteMr>('mr', { length: RD, access: ALL });
    const reads = Array.from({ length: RD / (256 << 10) }, (_, i) => ({
      wrId: 20_000 + i, opcode: Opcode.RdmaRead, sgList: [{ addr: sink.addr + i * (256 << 10), length: 256 << 10, lkey: sink.lkey }],
      remoteSgList: [
        { addr: dst.addr + i * (256 << 10), length: 100_000, rkey: dst.rkey },
        { addr: dst.addr + i * (256 << 10) + 100_000, length: (256 << 10) - 100_000, rkey: dst.rkey },
      ],
    }));
    await a.call('postSend', { qp: qa.h, wrs: reads });
    const w3 = await a.call<Wc[]>('poll', { n: reads.length, timeoutMs: 150_000 });
    expect(w3.filter((w) => w.status !== WcStatus.Success)).toEqual([]);
    expect(same(await a.call<Uint8Array>('bytes', { mr: sink.h, off: 0, len: RD }), want.subarray(0, RD))).toBe(true);

    // 4. 600 sends of 1..9000 B, consumed in posting order.
    const N = 600;
    const recv = await b.call<RemoteMr>('mr', { length: N * 9000, access: ALL });
    await b.call('postRecv', { qp: qb.h, wrs: Array.from({ length: N }, (_, i) => ({ wrId: i, sgList: [{ addr: recv.addr + i * 9000, length: 9000, lkey: recv.lkey }] })) });
    const lens = Array.from({ length: N }, (_, i) => 1 + ((i * 2654435761) >>> 0) % 9000);
    const sends = lens.map((len, i) => ({ wrId: 30_000 + i, opcode: Opcode.Send, sgList: [{ addr: src.addr + i * 9000, length: len, lkey: src.lkey }], signaled: i === N - 1 }));
    await a.call('postSend', { qp: qa.h, wrs: sends });
    expect(await a.call<Wc[]>('poll', { n: 1, timeoutMs: 60_000 })).toMatchObject([{ wrId: 30_000 + N - 1, status: WcStatus.Success }]);
    const rw = await b.call<Wc[]>('poll', { n: N, timeoutMs: 60_000 });
    expect(rw.map((w) => [w.wrId, w.status, w.byteLen])).toEqual(lens.map((len, i) => [i, WcStatus.Success, len]));
    const rb = await b.call<Uint8Array>('bytes', { mr: recv.h, off: 0, len: N * 9000 });
    for (let i = 0; i < N; i++) {
      if (!same(rb.subarray(i * 9000, i * 9000 + lens[i]!), want.subarray(i * 9000, i * 9000 + lens[i]!))) throw new Error(`send ${i}: bytes differ`);
    }

    const nft = listRules();
    expect(nft).toContain('numgen random');
    const [sa, sb] = await Promise.all([a.call<{ link: Record<string, number> }>('stats'), b.call<{ link: Record<string, number> }>('stats')]);
    console.log(`netns RDMA (reorder via tc: ${reorder}) in ${Date.now() - t0} ms:`, JSON.stringify({ a: sa.link, b: sb.link }));
    // The impairment really happened: corrupted datagrams were caught by the integrity check
    // (XXH3-64 by default; a corrupted header field can also fail the trailer-kind check).
    expect(sa.link.badCrc + sb.link.badCrc + sa.link.badHash! + sb.link.badHash! + sa.link.badIntegrity! + sb.link.badIntegrity!).toBeGreaterThan(0);
    for (const p of [a, b]) await stopPeer(p);
  }, 400_000);
});
