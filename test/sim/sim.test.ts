// The simulation itself: its limits hold (a run that cannot get where it was asked throws or
// says so, never spins), time moves only as far as asked, a network without latency takes no
// time, and the same seed replays the same run, datagram for datagram.
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../src/core/enums.js';
import { instant, lossy } from './net.js';
import { Sim } from './sim.js';
import { piece, wr } from './work.js';

async function pair(seed: number, imp = lossy) {
  const sim = new Sim(seed, imp);
  const a = await sim.node();
  const b = await sim.node();
  const [qa, qb] = await sim.connect(a, b, { timeoutMs: 1000 });
  return { sim, a, b, qa, qb };
}

describe('the simulation', () => {
  it('settle() throws past its virtual-time limit, and run() reports a limit reached', async () => {
    const { sim, a, b, qa, qb } = await pair(1);
    const src = a.regMr(64);
    const dst = b.regMr(64);
    // The peer's QP goes: the read waits for the watchdog (1000 ms), past a 100 ms limit.
    b.driver.run(() => b.engine.destroyQp(qb));
    a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaRead, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 64)]));
    const t0 = sim.now;
    await expect(sim.settle({ ms: 100 })).rejects.toThrow(/did not settle/);
    expect(sim.now - t0).toBeLessThanOrEqual(100);
    // Out of steps before the watchdog's expiry, which is the next event.
    expect(await sim.run(() => a.cq.wcs.length > 0, { steps: 0 })).toBe(false);
    expect(a.cq.wcs).toEqual([]);
    await sim.settle();
    expect(a.cq.take().map((w) => w.status)).toEqual([WcStatus.RetryExcErr]);
    expect(sim.now - t0).toBeGreaterThanOrEqual(1000);
  });

  it('advance() ends exactly where asked; a network without latency takes no time', async () => {
    const { sim, a, b, qa } = await pair(2, instant);
    expect(sim.now).toBe(0);
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 4096)]));
    await sim.advance(0);
    expect(a.cq.take().map((w) => w.status)).toEqual([WcStatus.Success]);
    expect(sim.now).toBe(0);
    await sim.advance(12.5);
    expect(sim.now).toBe(12.5);
  });

  it('the same seed gives the same run, datagram for datagram; another seed does not', async () => {
    const trace = async (seed: number) => {
      const { sim, a, b, qa } = await pair(seed);
      const src = a.regMr(64 << 10);
      const dst = b.regMr(64 << 10);
      const seen: string[] = [];
      sim.net.filter = (from, to, bytes) => {
        seen.push(`${sim.now}:${from.port}>${to.port}:${bytes.length}`);
        return true;
      };
      for (let i = 0; i < 16; i++) a.post(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + i * 4096, rkey: dst.stag }, [piece(src, i * 4096, 4096)]));
      await sim.settle();
      expect(a.cq.wcs.map((w) => w.status)).toEqual(new Array(16).fill(WcStatus.Success));
      return { seen, stats: { ...sim.net.stats }, now: sim.now };
    };
    const x = await trace(5);
    expect(x.stats.dropped + x.stats.corrupted).toBeGreaterThan(0);
    expect(await trace(5)).toEqual(x);
    expect((await trace(6)).seen).not.toEqual(x.seen);
  });
});
