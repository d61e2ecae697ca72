// nicPollUs: a NIC thread that has just handed the application completions waits on its WQE
// ring for a while (a futex wait, or a spin with nicPollSpin) before it returns to its event
// loop, so a post made in answer reaches it without the event loop's wake-up path. dev.stats().nic counts the polls, those that found a post, the wake-ups of
// the application the NIC thread rang and the NIC thread's by the application's doorbell. Off by default; the option is checked like the others.
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, Opcode, openDevice, WcStatus } from '../../src/index.js';
import { ALL, type Side, closeAll, connectPair, side, take } from '../verbs/helpers.js';

const open: Side[] = [];
afterEach(async () => {
  await closeAll(...open.splice(0));
});

/** n WriteWithImm round trips between a and b (b answers each one it receives). */
async function pingPong(a: Side, b: Side, n: number): Promise<void> {
  const ma = a.pd.regMr(64, ALL);
  const mb = b.pd.regMr(64, ALL);
  for (let i = 0; i < n; i++) {
    a.qp.postRecv({ wrId: i, sgList: [] });
    b.qp.postRecv({ wrId: i, sgList: [] });
  }
  for (let i = 0; i < n; i++) {
    a.qp.postSend({ wrId: i, opcode: Opcode.RdmaWriteWithImm, imm: i, signaled: false, sgList: [{ addr: ma.addr, length: 64, lkey: ma.lkey }], remoteAddr: mb.addr, rkey: mb.rkey });
    const [got] = await take(b.cq, 1, 10_000);
    expect(got!.status).toBe(WcStatus.Success);
    b.qp.postSend({ wrId: i, opcode: Opcode.RdmaWriteWithImm, imm: i, signaled: false, sgList: [{ addr: mb.addr, length: 64, lkey: mb.lkey }], remoteAddr: ma.addr, rkey: ma.rkey });
    const [back] = await take(a.cq, 1, 10_000);
    expect(back!.imm).toBe(i);
  }
}

describe('NIC thread polling (nicPollUs)', () => {
  it('without polling, a slow-path call does not wake the NIC thread on its WQE ring (no spurious turn per call)', async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    try {
      const pd = dev.allocPd();
      const before = dev.stats().nic!.wakes;
      for (let i = 0; i < 100; i++) {
        pd.regMr(4096, ALL).deregister();
        await new Promise((r) => setImmediate(r));
      }
      expect(dev.stats().nic!.wakes - before).toBeLessThan(5);
    } finally {
      await dev.close();
    }
  });

  it('nicPollUs is an integer in 0..1000, nicPollSpin a boolean', async () => {
    for (const bad of [-1, 1.5, 1001, Number.NaN]) {
      await expect(openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1, nicPollUs: bad })).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    }
    await expect(openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1, nicPollSpin: 'yes' as never })).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
  });

  it('udp, nicPollSpin: a spinning poll takes posts too', async () => {
    const [a, b] = await connectPair(await side({ device: { transport: 'udp', workers: 1, nicPollUs: 1000, nicPollSpin: true } }), await side({ device: { transport: 'udp', workers: 1, nicPollUs: 1000, nicPollSpin: true } }));
    open.push(a, b);
    // Enough round trips that a loaded machine (the spinning threads take cores the answering
    // thread needs) still answers some within a poll: 50 found none once in a full run.
    await pingPong(a, b, 200);
    const s = b.dev.stats().nic!;
    expect(s.polls).toBeGreaterThan(0);
    expect(s.pollHits).toBeGreaterThan(0);
  });

  for (const transport of ['udp', 'tcp'] as const) {
    it(`${transport}: off by default (no polls); with nicPollUs the turns that gave completions poll, and a post in answer is taken by a poll`, async () => {
      const [a, b] = await connectPair(await side({ device: { transport, workers: 1 } }), await side({ device: { transport, workers: 1 } }));
      open.push(a, b);
      await pingPong(a, b, 20);
      const off = b.dev.stats().nic!;
      expect(off.polls).toBe(0);
      expect(off.pollHits).toBe(0);
      // The application was woken for its completions (it waited for each one).
      expect(off.doorbells).toBeGreaterThan(0);
      // Both directions' wake-ups are counted: 20 receive completions came through the ring;
      // the application was woken by the NIC's doorbell, the NIC thread by the application's
      // (each rung at most once per post: 20 receives and 20 sends here).
      expect(off.cqes).toBeGreaterThanOrEqual(20);
      expect(off.appWakes).toBeGreaterThan(0);
      expect(off.wakes).toBeGreaterThan(0);
      expect(off.appDoorbells).toBeGreaterThan(0);
      expect(off.appDoorbells).toBeLessThanOrEqual(40);
      await closeAll(...open.splice(0));

      // 1 ms: far longer than this thread takes to answer a completion with a post, so nearly
      // every poll finds one; a machine too loaded to answer some within it still answers others.
      // (The default poll is a futex wait: it leaves the core to the thread that answers.)
      const [c, d] = await connectPair(await side({ device: { transport, workers: 1, nicPollUs: 1000 } }), await side({ device: { transport, workers: 1, nicPollUs: 1000 } }));
      open.push(c, d);
      await pingPong(c, d, 100);
      const on = d.dev.stats().nic!;
      expect(on.polls).toBeGreaterThan(0);
      expect(on.pollHits).toBeGreaterThan(0);
      expect(on.pollHits).toBeLessThanOrEqual(on.polls);
    });
  }

  it('a receive-only stream polls less and less: after n polls in a row that found nothing, the next 2^n - 1 turns do not poll', async () => {
    const [a, b] = await connectPair(await side({ device: { transport: 'udp', workers: 1 } }), await side({ device: { transport: 'udp', workers: 1, nicPollUs: 1000 } }));
    open.push(a, b);
    const ma = a.pd.regMr(64, ALL);
    const mb = b.pd.regMr(64, ALL);
    const N = 40;
    for (let i = 0; i < N; i++) b.qp.postRecv({ wrId: i, sgList: [] });
    // One at a time (each acknowledged before the next goes): every one lands in a turn of its
    // own at b, whose completions b's application never answers with a post.
    for (let i = 0; i < N; i++) {
      a.qp.postSend({ wrId: i, opcode: Opcode.RdmaWriteWithImm, imm: i, sgList: [{ addr: ma.addr, length: 64, lkey: ma.lkey }], remoteAddr: mb.addr, rkey: mb.rkey });
      expect((await take(a.cq, 1, 10_000))[0]!.status).toBe(WcStatus.Success);
    }
    expect((await take(b.cq, N, 10_000)).length).toBe(N);
    const nic = b.dev.stats().nic!;
    // Polling every such turn: about N polls. Backing off: at turns 1, 3, 7, 15, 31 of them.
    expect(nic.pollHits).toBe(0);
    expect(nic.polls).toBeGreaterThan(0);
    expect(nic.polls).toBeLessThanOrEqual(8);
  });
});
