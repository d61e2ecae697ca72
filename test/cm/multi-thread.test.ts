// rdma_cm connect from a device of several NIC threads (QP q on thread q mod n, src/core/peer-route.ts)
// to listeners that do and do not list their threads' ports: a listener of one thread, one of two
// reached at its full address, at a plain host:port (a command line), and — udp — through a
// relay that forwards one port (test/relay.ts, unimpaired: the path here is what is tested, not
// loss). The requester's QPNs run 1, 2, 3, 4, so its QPs sit on both of its threads unless the
// path can reach only its first; each connection then carries a Send both ways.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, connect, type Device, listen, Opcode, openDevice, type QueuePair, WcStatus } from '../../src/index.js';
import type { MultiPort } from '../../src/nic/multi-port.js';
import { startUdpRelay, type UdpRelay } from '../relay.js';
import { take } from '../verbs/helpers.js';

const devs: Device[] = [];
const relays: UdpRelay[] = [];
afterEach(async () => {
  for (const r of relays.splice(0)) await r.close();
  await Promise.all(devs.splice(0).map((d) => d.close()));
});

async function dev(transport: 'udp' | 'tcp', workers: number): Promise<Device> {
  const d = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
  devs.push(d);
  return d;
}

/** Bytes each NIC thread of `d` (a device of several) placed into its regions. */
function placedPerThread(d: Device): number[] {
  return (d.nic as unknown as MultiPort).threads.map((t) => t.stats(0).counters.directBytes);
}

type Path = 'full' | 'plain' | 'relay';
const CASES: Array<{ transport: 'udp' | 'tcp'; workers: number; path: Path }> = [];
for (const transport of ['udp', 'tcp'] as const) {
  for (const workers of [1, 2]) {
    for (const path of ['full', 'plain', 'relay'] as const) if (transport === 'udp' || path !== 'relay') CASES.push({ transport, workers, path });
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
      expect(pairs.map(([qa]) => qa.qpn % 2).sort()).toEqual([0, 0, 1, 1]);
      const before = placedPerThread(a);
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
      // udp: an address that lists no ports (a device of one thread, a relay that forwards one
      // port, an older listener) may reach only the requester's first thread: its QPs are there.
      // One that lists them spreads the QPs (tcp: each rides its own connection, spread alike).
      const placed = placedPerThread(a).map((x, k) => x - before[k]!);
      expect(placed).toEqual(transport === 'udp' && (path !== 'full' || workers === 1) ? [4 * 64, 0] : [2 * 64, 2 * 64]);
    } finally {
      await l.close();
    }
  });
});
