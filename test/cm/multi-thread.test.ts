// rdma_cm connect from a device of several NIC threads (QP q on thread q mod n, src/core/peer-route.ts)
// to listeners that do and do not list their threads' ports: a listener of one thread, one of two
// reached at its full address, at a plain host:port (a command line), and — udp — through a
// relay that forwards one port (test/relay.ts, unimpaired: the path here is what is tested, not
// loss). The requester's QPs take its threads in turn (src/verbs/qpn.ts), so they sit on both
// of them unless the path can reach only its first; each connection then carries a Send both
// ways. Last, a NAT in front of the requester (test/relay.ts startUdpNat): the listener sees its
// ports rewritten.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, connect, type Device, type DeviceAddress, listen, Opcode, type QueuePair, WcStatus } from '../../src/index.js';
import { startUdpNat, startUdpRelay, type UdpNat, type UdpRelay } from '../relay.js';
import type { MultiPort } from '../../src/nic/multi-port.js';
import { take } from '../verbs/helpers.js';
import { deviceList, placedPerThread } from '../nic/threads.js';

const devices = deviceList();
const relays: Array<UdpRelay | UdpNat> = [];
afterEach(async () => {
  for (const r of relays.splice(0)) await r.close();
  await devices.closeAll();
});

const dev = devices.open;

type Path = 'full' | 'plain' | 'relay';
const CASES: Array<{ transport: 'udp' | 'tcp'; workers: number; path: Path }> = [];
for (const transport of ['udp', 'tcp'] as const) {
  for (const workers of [1, 2]) {
    for (const path of ['full', 'plain', 'relay'] as const) if (transport === 'udp' || path !== 'relay') CASES.push({ transport, workers, path });
  }
}

/**
 * Four connects from `a` to the listener on `b` at `to`, each carrying a Send both ways; returns
 * the requester's QPNs and the bytes each NIC thread of `a` and `b` placed for those Sends.
 */
async function fourConnects(a: Device, b: Device, to: DeviceAddress): Promise<{ qpns: number[]; placedA: number[]; placedB: number[] | undefined }> {
  const [pdA, pdB] = [a.allocPd(), b.allocPd()];
  const mrA = pdA.regMr(4 * 128, Access.LocalWrite);
  const mrB = pdB.regMr(4 * 128, Access.LocalWrite);
  const l = listen(b, { service: 9, pd: pdB });
  const pairs: Array<[QueuePair, QueuePair]> = [];
  try {
    for (let i = 0; i < 4; i++) {
      const post = (mr: typeof mrA) => (qp: QueuePair) => qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + i * 128, length: 64, lkey: mr.lkey }] });
      const [qa, qb] = await Promise.all([connect(a, to, { service: 9, pd: pdA, setup: post(mrA), timeoutMs: 5000 }), l.accept(5000)]);
      post(mrB)(qb);
      pairs.push([qa, qb]);
    }
    const multi = (d: Device) => (d.nic as unknown as Partial<MultiPort>).threads !== undefined;
    const before = [placedPerThread(a), multi(b) ? placedPerThread(b) : undefined] as const;
    for (const [i, [qa, qb]] of pairs.entries()) {
      mrA.buffer.fill(10 + i, i * 128 + 64, i * 128 + 128);
      mrB.buffer.fill(20 + i, i * 128 + 64, i * 128 + 128);
      qa.postSend({ wrId: i, opcode: Opcode.Send, sgList: [{ addr: mrA.addr + i * 128 + 64, length: 64, lkey: mrA.lkey }] });
      qb.postSend({ wrId: i, opcode: Opcode.Send, sgList: [{ addr: mrB.addr + i * 128 + 64, length: 64, lkey: mrB.lkey }] });
    }
    for (const [qa, qb] of pairs) {
      for (const q of [qa, qb]) expect((await take(q.sendCq, 2, 10_000)).map((c) => c.status)).toEqual([WcStatus.Success, WcStatus.Success]);
    }
    for (let i = 0; i < 4; i++) {
      expect(mrB.buffer.subarray(i * 128, i * 128 + 64).every((v) => v === 10 + i)).toBe(true);
      expect(mrA.buffer.subarray(i * 128, i * 128 + 64).every((v) => v === 20 + i)).toBe(true);
    }
    return {
      qpns: pairs.map(([qa]) => qa.qpn),
      placedA: placedPerThread(a).map((x, k) => x - before[0][k]!),
      placedB: before[1] && placedPerThread(b).map((x, k) => x - before[1]![k]!),
    };
  } finally {
    await l.close();
  }
}

describe.each(CASES)('cm: a requester of workers: 2 → a $transport listener of workers: $workers at its $path address', ({ transport, workers, path }) => {
  it('QPs of even and odd numbers connect, and each carries a Send both ways', { timeout: 60_000 }, async () => {
    const a = await dev(transport, 2);
    const b = await dev(transport, workers);
    let to = b.address;
    if (path === 'plain') to = { transport, host: '127.0.0.1', port: b.address.port };
    if (path === 'relay') {
      const relay = await startUdpRelay({ target: { host: '127.0.0.1', port: b.address.port as number } });
      relays.push(relay);
      to = relay.address;
    }
    const { qpns, placedA } = await fourConnects(a, b, to);
    // udp: an address that lists no ports (a device of one thread, a relay that forwards one
    // port, an older listener) may reach only the requester's first thread: its QPs are there.
    // One that lists them spreads the QPs (tcp: each rides its own connection, spread alike).
    const first = transport === 'udp' && (path !== 'full' || workers === 1);
    expect(placedA).toEqual(first ? [4 * 64, 0] : [2 * 64, 2 * 64]);
    // A QPN names the thread its QP is on (src/verbs/qpn.ts), as a peer routes by it.
    expect(qpns.map((q) => q % 2).sort()).toEqual(first ? [0, 0, 0, 0] : [0, 0, 1, 1]);
  });
});

describe('cm: a requester of workers: 2 behind a NAT, a udp listener of workers: 2 reached at all its ports', () => {
  it('the listener finds the requester\'s ports rewritten: a QP off thread 0 is asked for again on thread 0; the listener\'s QPs still spread', { timeout: 60_000 }, async () => {
    const a = await dev('udp', 2);
    const b = await dev('udp', 2);
    const nat = await startUdpNat({ host: '127.0.0.1', ports: b.address['ports'] as number[] });
    relays.push(nat);
    const { qpns, placedA, placedB } = await fourConnects(a, b, nat.address);
    // QPs asked first off thread 0 are made again there (the REJ asks for it): all four end on thread 0.
    expect(qpns.length).toBe(4);
    expect(placedA).toEqual([4 * 64, 0]);
    // Their numbers name the thread they are on (src/verbs/qpn.ts), as a peer routes by them.
    expect(qpns.map((q) => q % 2)).toEqual([0, 0, 0, 0]);
    expect(placedB).toEqual([2 * 64, 2 * 64]);
  });
});
