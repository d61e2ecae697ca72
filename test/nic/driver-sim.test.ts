// The whole NIC driver under a seeded lossy network, on a virtual clock (test/sim): two
// drivers, each with its RDMAP engine, the udp link's sans-I/O core, the UDP endpoint and the
// driver's one timer, the network dropping, duplicating, reordering and corrupting datagrams.
// Only the sockets are missing. No timers, no sleeps: the same seed gives the same run.
import { describe, expect, it } from 'vitest';
import { Opcode, WcOpcode, WcStatus } from '../../src/core/enums.js';
import { clean, lossy, type Impairment } from '../sim/net.js';
import { rng } from '../sim/random.js';
import { Sim } from '../sim/sim.js';
import { piece, recv, wr } from '../sim/work.js';

/** One run: rc writes and sends from a to b; returns what a trace of the run should show. */
async function run(seed: number, imp: Impairment) {
  const sim = new Sim(seed, imp);
  const a = await sim.node();
  const b = await sim.node();
  const [qa, qb] = await sim.connect(a, b);

  const r = rng(seed ^ 0x5eed);
  const src = a.regMr(256 << 10);
  const dst = b.regMr(256 << 10);
  const rbuf = b.regMr(64 << 10);
  const WRITES = 24;
  const SENDS = 8;
  // Writes to disjoint ranges of dst, of sizes from one byte to several datagrams.
  const ranges: [number, number][] = [];
  for (let i = 0, off = 0; i < WRITES; i++) {
    const len = 1 + Math.floor(r() * 9000);
    ranges.push([off, len]);
    off += len + 64;
  }
  const s = a.bytes(src, 0, src.length);
  for (let i = 0; i < s.length; i++) s[i] = Math.floor(r() * 256);
  for (let k = 0; k < SENDS; k++) b.postRecv(qb, recv(100 + k, [piece(rbuf, k * 8192, 8192)]));
  for (let i = 0; i < WRITES; i++) {
    const [off, len] = ranges[i]!;
    a.post(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + off, rkey: dst.stag }, [piece(src, off, len)]));
    if (i % 3 === 0 && i / 3 < SENDS) {
      const k = i / 3;
      a.post(qa, wr({ wrId: 1000 + k, opcode: Opcode.SendWithImm, imm: k }, [piece(src, 100_000 + k * 1000, 1000 + k)]));
    }
  }
  const want = WRITES + SENDS;
  expect(await sim.run(() => a.cq.wcs.length >= want && b.cq.wcs.length >= SENDS)).toBe(true);

  // Every work request completed with Success, in posting order (rc).
  expect(a.cq.wcs.map((w) => w.status)).toEqual(Array(want).fill(WcStatus.Success));
  const posted = a.cq.wcs.map((w) => Number(w.wrId));
  expect(posted.filter((x) => x < 1000)).toEqual([...Array(WRITES).keys()]);
  // The data is placed, byte for byte; the sends landed in their receives in order.
  for (const [off, len] of ranges) expect(Buffer.from(b.bytes(dst, off, len)).equals(Buffer.from(a.bytes(src, off, len)))).toBe(true);
  const rx = b.cq.wcs;
  expect(rx.map((w) => [Number(w.wrId), w.opcode, w.status, w.byteLen, w.imm])).toEqual(
    [...Array(SENDS).keys()].map((k) => [100 + k, WcOpcode.Recv, WcStatus.Success, 1000 + k, k]),
  );
  for (let k = 0; k < SENDS; k++) {
    expect(Buffer.from(b.bytes(rbuf, k * 8192, 1000 + k)).equals(Buffer.from(a.bytes(src, 100_000 + k * 1000, 1000 + k)))).toBe(true);
  }
  return {
    now: sim.now, net: { ...sim.net.stats }, a: a.link.core.counters, b: b.link.core.counters,
    epA: a.ep.stats(), epB: b.ep.stats(), events: a.events.map((e) => e.kind),
  };
}

describe('the NIC driver over a simulated lossy network', () => {
  it.each([1, 2, 3, 4])('seed %i: writes and sends complete in order, byte-exact, under drop, duplication, reordering and corruption', async (seed) => {
    const t = await run(seed, lossy);
    // The network did impair the run, and the endpoints refused what was corrupted.
    expect(t.net.dropped).toBeGreaterThan(0);
    expect(t.net.duplicated).toBeGreaterThan(0);
    expect(t.net.corrupted).toBeGreaterThan(0);
    expect(t.epA.badHash + t.epA.badCrc + t.epA.malformed + t.epB.badHash + t.epB.badCrc + t.epB.malformed).toBeGreaterThan(0);
    expect(t.a.linkFailures + t.b.linkFailures).toBe(0);
  });

  it('is deterministic: the same seed gives the same run', async () => {
    const x = await run(7, lossy);
    const y = await run(7, lossy);
    expect(y).toEqual(x);
  });

  it('a clean network: the same outcome', async () => {
    const t = await run(11, clean);
    expect(t.net.dropped + t.net.corrupted).toBe(0);
  });
});
