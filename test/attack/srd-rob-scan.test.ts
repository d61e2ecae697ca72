// srd: a message that is its flow's turn and finds no free receive takes one from a message
// held out of turn (receives.ts recvForExpected). To find that message the engine visited every
// pending message of every flow of the QP — for each such segment. A connected peer parks up to
// maxOooEntries messages out of order (Writes past a gap it never fills: they hold no receive)
// and then sends Sends while the QP's receives are taken (a batch of its own Sends takes them
// first): each of its Sends then cost a visit of every parked message, work in proportion to
// what the peer parked, per 40-byte frame. Now only the messages holding a receive are visited
// (at most one per posted receive). Sans-I/O: the engine on the simulated network; the same
// 20,000 Sends with nothing parked and with 16,000 Writes parked take about the same time
// (before: ~19x as long with them parked: 2.9 s against 0.15 s).
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import type { SegFrame } from '../../src/core/frame.js';
import { dataFrames } from '../../src/rdmap/segmenter.js';
import { Qn, RdmapOpcode } from '../../src/wire/rdmap.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';

function write(src: number, ssn: number, stag: number, to: number): SegFrame[] {
  const out: SegFrame[] = [];
  dataFrames({ srcQpn: src, dstQpn: 1, ssn, tagged: true, opcode: RdmapOpcode.RdmaWrite, stag, to, parts: [new Uint8Array(8)], total: 8, mss: 1 << 20 }, out);
  for (const f of out) f.env.msgLen = 8;
  return out;
}

function send(src: number): SegFrame {
  const out: SegFrame[] = [];
  dataFrames({ srcQpn: src, dstQpn: 1, ssn: 1, tagged: false, opcode: RdmapOpcode.Send, qn: Qn.Send, msn: 1, parts: [new Uint8Array(8)], total: 8, mss: 1 << 20 }, out);
  out[0]!.env.msgLen = 8;
  return out[0]!;
}

const udp = (host: string, port: number): DeviceAddress => ({ transport: 'udp', host, port });

/** ms the engine takes for 20,000 turn Sends finding no receive, with `parked` Writes held out of order. */
async function cost(parked: number): Promise<{ ms: number; held: number }> {
  const sim = new Sim(31, clean);
  const b = await sim.node({ mss: 64, bounds: { maxOooEntries: 16_384, maxOooBytes: 64 << 20 } });
  const qb = b.qp(1, 'srd');
  const dst = b.regMr(4096);
  // 40 flows from one host, each with message 1 missing and its later Writes parked.
  const fr: SegFrame[] = [];
  for (let q = 1; q <= 40; q++) for (let s = 2; s < 2 + parked / 40; s++) fr.push(...write(q, s, dst.stag, dst.addr));
  b.inject(udp('10.0.0.1', 1), fr);
  const held = qb.oooEntries;
  // No receive posted: every Send (the turn of 20 flows from another host) finds none.
  const sends: SegFrame[] = [];
  for (let i = 0; i < 2000; i++) sends.push(send(100 + (i % 20)));
  b.inject(udp('10.0.0.2', 1), sends);
  const t0 = performance.now();
  for (let k = 0; k < 10; k++) b.inject(udp('10.0.0.2', 1), sends);
  return { ms: performance.now() - t0, held };
}

describe('srd: a turn that finds no receive, with many messages parked out of order', () => {
  it('20,000 Sends cost about the same with 16,000 Writes parked as with none', async () => {
    await cost(0);
    const none = await cost(0);
    const parked = await cost(16_000);
    expect(parked.held).toBe(16_000);
    expect(parked.ms).toBeLessThan(3 * none.ms + 100);
  }, 120_000);
});
