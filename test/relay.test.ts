// The lossy relay itself: two udp devices whose rc QPs reach each other only through it move
// writes and reads byte-exact while it drops, duplicates, corrupts and reorders datagrams — and
// the impairment really happened (its counters and the devices' integrity drops say so), in
// each integrity mode that checks. On a device of several NIC threads the QPs are thread 0's
// (relayQp): the relay forwards one port, and raw verbs do not move a QP there (docs/nic.md).
import { describe, expect, it } from 'vitest';
import { Access, Opcode, openDevice, WcStatus } from '../src/index.js';
import { relayQp, startUdpRelay } from './relay.js';
import { fill, take } from './verbs/helpers.js';

describe('test/relay.ts: a lossy udp relay on 127.0.0.1', () => {
  // Every integrity mode that checks (docs/integrity.md); 'none' lets a corrupted byte land, by design.
  it.each(['xxh3', 'crc32c'] as const)('rc writes and reads through it are byte-exact under drop, dup, corruption and reordering (integrity %s)', async (integrity) => {
    const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, mtu: 9000, integrity });
    const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, mtu: 9000, integrity });
    const relay = await startUdpRelay({
      target: { host: '127.0.0.1', port: b.address.port as number },
      drop: 0.03, dup: 0.02, corrupt: 0.01, reorder: 0.03, reorderMs: 4, seed: 7,
    });
    try {
      const pdA = a.allocPd();
      const pdB = b.allocPd();
      const cqA = a.createCq({ depth: 512 });
      const cqB = b.createCq({ depth: 512 });
      const qpA = relayQp(pdA, { type: 'rc', sendCq: cqA, recvCq: cqA, maxSendWr: 64, maxRecvWr: 8, maxSge: 1 });
      const qpB = relayQp(pdB, { type: 'rc', sendCq: cqB, recvCq: cqB, maxSendWr: 64, maxRecvWr: 8, maxSge: 1 });
      // A reaches B at the relay's address; B reaches A at the relay's upstream socket for A.
      const aSeenByB = await relay.clientAddress({ host: '127.0.0.1', port: a.address.port as number });
      await Promise.all([
        qpA.connect({ address: relay.address, qpn: qpB.qpn }),
        qpB.connect({ address: aSeenByB, qpn: qpA.qpn }),
      ]);
      const N = 32;
      const SZ = 32768;
      const src = pdA.regMr(N * SZ, Access.LocalWrite);
      const dst = pdB.regMr(N * SZ, Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead);
      const back = pdA.regMr(N * SZ, Access.LocalWrite);
      fill(src.buffer, 11);
      for (let i = 0; i < N; i++) {
        qpA.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * SZ, length: SZ, lkey: src.lkey }], remoteAddr: dst.addr + i * SZ, rkey: dst.rkey });
      }
      expect((await take(cqA, N, 20_000)).map((w) => w.status)).toEqual(new Array(N).fill(WcStatus.Success));
      expect(Buffer.from(dst.buffer).equals(Buffer.from(src.buffer))).toBe(true);
      for (let i = 0; i < N; i++) {
        qpA.postSend({ wrId: i, opcode: Opcode.RdmaRead, sgList: [{ addr: back.addr + i * SZ, length: SZ, lkey: back.lkey }], remoteAddr: dst.addr + i * SZ, rkey: dst.rkey });
      }
      expect((await take(cqA, N, 20_000)).map((w) => w.status)).toEqual(new Array(N).fill(WcStatus.Success));
      expect(Buffer.from(back.buffer).equals(Buffer.from(src.buffer))).toBe(true);
      const s = relay.stats;
      expect(s.dropped, JSON.stringify(s)).toBeGreaterThan(0);
      expect(s.duplicated, JSON.stringify(s)).toBeGreaterThan(0);
      expect(s.corrupted, JSON.stringify(s)).toBeGreaterThan(0);
      expect(s.reordered, JSON.stringify(s)).toBeGreaterThan(0);
      const la = a.stats().link!;
      const lb = b.stats().link!;
      // Caught by the settled check (the trailer-kind check catches a flipped flags byte).
      const caught = integrity === 'crc32c' ? la.badCrc! + lb.badCrc! : la.badHash! + lb.badHash!;
      expect(caught, JSON.stringify([la, lb])).toBeGreaterThan(0);
      expect(la[integrity === 'crc32c' ? 'contextsCrc32c' : 'contextsXxh3']).toBe(1);
    } finally {
      await relay.close();
      await a.close();
      await b.close();
    }
  });
});
