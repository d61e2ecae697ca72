// A postSend with fields its opcode does not use (imm on a Send, a bigint remoteAddr, a number
// compareAdd or swap, a remoteSgList entry that is null, more remoteSgList entries than maxSge on
// a Write): ibverbs ignores the union members an opcode does not use, and so does every port now
// (sendFieldsTaken, src/rdmap/opcodes.ts) — the same on workers 0 and 1. Before (found by an
// audit; these cases failed then): with a NIC thread, writeSendWqe threw a TypeError half-way
// through a record it had reserved in the WQE ring and the next post's commit published it under
// that post's token — the refused request reached the peer (a ghost Send or Write) and its
// completion took the next request's wrId; a Write with an oversized remoteSgList was dropped as
// a bad WQE and never completed; inline, a bigint imm threw a TypeError from the engine, and a
// list post that threw part-way left the requests before it unsent until a later step.
import { describe, it } from 'vitest';
import { Access, Opcode, openDevice, SabreError, WcOpcode, WcStatus, type CompletionQueue, type WorkCompletion } from '../../src/index.js';

const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;

async function pair(transport: 'udp' | 'tcp', workers: number) {
  const a = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
  const b = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
  const pdA = a.allocPd();
  const pdB = b.allocPd();
  const cqA = a.createCq({ depth: 256 });
  const cqB = b.createCq({ depth: 256 });
  const init = { type: 'rc' as const, maxSendWr: 16, maxRecvWr: 16, maxSge: 2 };
  const qpA = pdA.createQp({ ...init, sendCq: cqA, recvCq: cqA });
  const qpB = pdB.createQp({ ...init, sendCq: cqB, recvCq: cqB });
  await Promise.all([qpA.connect({ address: b.address, qpn: qpB.qpn }), qpB.connect({ address: a.address, qpn: qpA.qpn })]);
  return { a, b, pdA, pdB, cqA, cqB, qpA, qpB };
}

/** Every completion that arrives within ms (bounded). */
async function collect(cq: CompletionQueue, ms: number): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  const until = Date.now() + ms;
  for (let i = 0; i < 1000 && Date.now() < until; i++) {
    try {
      await cq.wait(Math.max(1, until - Date.now()));
    } catch {
      break;
    }
    out.push(...cq.poll(64));
  }
  return out;
}

type P = Awaited<ReturnType<typeof pair>>;
type Mr = ReturnType<P['pdA']['regMr']>;

/** `f` on a fresh udp pair of `workers` NIC threads each, with a 4 KiB region on either side; both devices closed after. */
async function withPair(workers: number, f: (p: P, src: Mr, dst: Mr) => Promise<void>): Promise<void> {
  const p = await pair('udp', workers);
  try {
    await f(p, p.pdA.regMr(4096, ALL), p.pdB.regMr(4096, ALL));
  } finally {
    await p.a.close();
    await p.b.close();
  }
}
const CASES: [string, (p: P, src: Mr, dst: Mr) => void][] = [
  ['Send with a bigint imm', (p) => p.qpA.postSend({ wrId: 100, opcode: Opcode.Send, sgList: [], imm: 1n as never })],
  ['Send with a bigint remoteAddr', (p) => p.qpA.postSend({ wrId: 100, opcode: Opcode.Send, sgList: [], remoteAddr: 1n as never })],
  ['Send with a number compareAdd', (p) => p.qpA.postSend({ wrId: 100, opcode: Opcode.Send, sgList: [], compareAdd: 1 as never })],
  ['FetchAdd with a number swap', (p, src, dst) => p.qpA.postSend({ wrId: 100, opcode: Opcode.AtomicFetchAdd, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey, compareAdd: 1n, swap: 2 as never })],
  ['RdmaWrite with remoteSgList [null]', (p, src, dst) => p.qpA.postSend({ wrId: 100, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey, remoteSgList: [null] as never })],
];

// Every test has a pair of devices of its own and mostly waits out its completion windows, so
// they run at once; concurrent tests assert with the expect of their own context.
describe.concurrent.each([0, 1])('workers %i: a postSend with a field its opcode does not use', (workers) => {
  it.for(CASES)('%s: refused with a SabreError (nothing sent) or taken and completed once; the next post completes once as itself', { timeout: 30_000 }, async ([_name, post], { expect }) => {
    await withPair(workers, async (p, src, dst) => {
      for (let i = 0; i < 4; i++) p.qpB.postRecv({ wrId: 500 + i, sgList: [{ addr: dst.addr + 1024, length: 256, lkey: dst.lkey }] });
      let thrown: unknown;
      try {
        post(p, src, dst);
      } catch (e) {
        thrown = e;
      }
      p.qpA.postSend({ wrId: 200, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 4, lkey: src.lkey }] });
      const atA = await collect(p.cqA, 1500);
      const atB = await collect(p.cqB, 300);
      // Soft: every broken promise of the case shows, not only the first.
      expect.soft(atA.map((w) => [w.wrId, w.status, w.opcode]), 'the requester\'s completions').toEqual(
        thrown !== undefined ? [[200, WcStatus.Success, WcOpcode.Send]] : [[100, expect.anything(), expect.anything()], [200, WcStatus.Success, WcOpcode.Send]],
      );
      if (thrown !== undefined) {
        // Refused: only the later Send reaches B.
        expect.soft(atB.map((w) => [w.wrId, w.byteLen]), 'what reached the responder (a refused post must send nothing)').toEqual([[500, 4]]);
        expect.soft(thrown, 'what the refused post threw').toBeInstanceOf(SabreError);
      }
    });
  });
});

describe.concurrent.each([0, 1])('workers %i: remoteSgList on an opcode that takes none', (workers) => {
  it('an RdmaWrite naming remoteAddr/rkey and more remoteSgList entries than maxSge: refused at the call, or done and completed', { timeout: 30_000 }, async ({ expect }) => {
    await withPair(workers, async (p, src, dst) => {
      src.buffer.fill(7, 0, 8);
      let thrown: unknown;
      try {
        p.qpA.postSend({
          wrId: 100, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey,
          remoteSgList: [1, 2, 3].map(() => ({ addr: dst.addr, length: 1, rkey: dst.rkey })),
        });
      } catch (e) {
        thrown = e;
      }
      if (thrown !== undefined) {
        expect(thrown).toBeInstanceOf(SabreError);
        return;
      }
      // Taken: it must complete (workers 1: the NIC thread drops the WQE as bad, counted, and
      // the work request never completes — cq.wait() without a deadline waits for good).
      const got = await collect(p.cqA, 3000);
      expect(got.map((w) => [w.wrId, w.status])).toEqual([[100, WcStatus.Success]]);
      expect([...dst.buffer.subarray(0, 8)]).toEqual([7, 7, 7, 7, 7, 7, 7, 7]);
    });
  });
});

describe.concurrent.each([0, 1])('workers %i: a list of work requests with one bad field', (workers) => {
  it('postSend([good, bad]) that throws posts none of them (every request is checked before any is posted)', { timeout: 30_000 }, async ({ expect }) => {
    await withPair(workers, async (p, src, dst) => {
      for (let i = 0; i < 4; i++) p.qpB.postRecv({ wrId: 500 + i, sgList: [{ addr: dst.addr + 1024, length: 256, lkey: dst.lkey }] });
      let thrown: unknown;
      try {
        p.qpA.postSend([
          { wrId: 100, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 4, lkey: src.lkey }] },
          { wrId: 101, opcode: Opcode.Send, sgList: [], imm: 1n as never },
        ]);
      } catch (e) {
        thrown = e;
      }
      const atA = await collect(p.cqA, 1000);
      const atB = await collect(p.cqB, 300);
      if (thrown !== undefined) {
        expect.soft(atB.map((w) => [w.wrId, w.byteLen]), 'what reached the responder after the call threw').toEqual([]);
        expect.soft(atA.map((w) => w.wrId), 'completions of a call that threw').toEqual([]);
        expect.soft(thrown, 'what it threw').toBeInstanceOf(SabreError);
      } else {
        expect(atA.map((w) => w.wrId)).toEqual([100, 101]);
      }
    });
  });
});
