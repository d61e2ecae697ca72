// An srd QP's flows from one peer were capped by its address — host and port — so one host
// that sends from many ports got maxSrdFlowsPerPeer flows per port. On udp each port costs it
// one cookie handshake (a context, 64 per host by maxContextsPerHost), so a single host filled
// a QP's whole table (maxSrdFlows: 1024 from 16 ports) and kept it full with a message per
// flow now and then (an active flow is never evicted): every other peer of that QP was refused
// — for the listener's CM QP, every other device's connect. A source host (core/address
// sourceKey: the port left out, an IPv6 /64 as one host) now holds at most half the table
// (bounds.ts hostFlowCap), and the per-address cap stays: the many processes of one host each
// talk from a port of their own (udp-engine/srd-flows: a genuine client on the flood's host
// still connects). Sans-I/O: the engine on the simulated network, frames injected as they
// would come from a udp link.
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import type { SegFrame } from '../../src/core/frame.js';
import { dataFrames } from '../../src/rdmap/segmenter.js';
import { RdmapOpcode } from '../../src/wire/rdmap.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';

function write(src: number, dst: number, stag: number, to: number): SegFrame[] {
  const out: SegFrame[] = [];
  dataFrames({ srcQpn: src, dstQpn: dst, ssn: 1, tagged: true, opcode: RdmapOpcode.RdmaWrite, stag, to, parts: [new Uint8Array(8)], total: 8, mss: 1 << 20 }, out);
  for (const f of out) f.env.msgLen = 8;
  return out;
}

const udp = (host: string, port: number): DeviceAddress => ({ transport: 'udp', host, port });

describe('srd flows per source host', () => {
  it('one host sending from 16 ports × 100 QPNs gets half the flow table, and another host still gets in', async () => {
    const sim = new Sim(31, clean);
    const b = await sim.node({ mss: 64, bounds: { maxSrdFlows: 64, maxSrdFlowsPerPeer: 8 } });
    const qb = b.qp(1, 'srd');
    const dst = b.regMr(4096);
    for (let port = 5000; port < 5016; port++) {
      for (let q = 1; q <= 100; q++) b.inject(udp('10.7.7.7', port), write(q, 1, dst.stag, dst.addr));
    }
    // 8 per port (maxSrdFlowsPerPeer) until the host holds half the table: 4 ports' worth.
    expect(qb.flows.size).toBe(32);
    expect(b.engine.counters.srdFlowsRefused).toBe(1600 - 32);
    // Addresses of one IPv6 /64 are one host too: 40 of them get 32 flows.
    for (let i = 1; i <= 40; i++) b.inject(udp(`2001:db8:0:7::${i.toString(16)}`, 4791), write(1, 1, dst.stag, dst.addr));
    expect(qb.flows.size).toBe(64);
    expect(b.engine.counters.srdFlowsRefused).toBe(1600 - 32 + 8);
  });

  it('another host is not locked out by one that holds its half', async () => {
    const sim = new Sim(32, clean);
    const b = await sim.node({ mss: 64, bounds: { maxSrdFlows: 64, maxSrdFlowsPerPeer: 8 } });
    const qb = b.qp(1, 'srd');
    const dst = b.regMr(4096);
    for (let port = 5000; port < 5016; port++) {
      for (let q = 1; q <= 100; q++) b.inject(udp('10.7.7.7', port), write(q, 1, dst.stag, dst.addr));
    }
    for (let q = 1; q <= 8; q++) b.inject(udp('10.7.7.8', 5000), write(q, 1, dst.stag, dst.addr));
    expect(qb.flows.size).toBe(40);
  });

  it('a host at its cap gets room again as its own flows go idle (the oldest idle one under the cap goes)', async () => {
    const sim = new Sim(33, clean);
    const b = await sim.node({ mss: 64, bounds: { maxSrdFlows: 64, maxSrdFlowsPerPeer: 8, srdIdleMs: 1000 } });
    const qb = b.qp(1, 'srd');
    const dst = b.regMr(4096);
    for (let port = 5000; port < 5004; port++) {
      for (let q = 1; q <= 8; q++) b.inject(udp('10.7.7.7', port), write(q, 1, dst.stag, dst.addr));
    }
    expect(qb.flows.size).toBe(32);
    b.inject(udp('10.7.7.7', 5004), write(1, 1, dst.stag, dst.addr));
    expect(b.engine.counters.srdFlowsRefused).toBe(1);
    // Its processes exited long ago (idle past 2×srdIdleMs): a new one takes the oldest's place.
    await sim.advance(2500);
    b.inject(udp('10.7.7.7', 5004), write(1, 1, dst.stag, dst.addr));
    expect(qb.flows.size).toBe(32);
    expect(b.engine.counters.srdFlowsEvicted).toBe(1);
    expect(b.engine.srdFlowCount(qb, udp('10.7.7.7', 5004))).toBe(1);
    // And an address at its own cap likewise.
    for (let q = 2; q <= 9; q++) b.inject(udp('10.7.7.7', 5004), write(q, 1, dst.stag, dst.addr));
    expect(b.engine.srdFlowCount(qb, udp('10.7.7.7', 5004))).toBe(8);
  });
});
