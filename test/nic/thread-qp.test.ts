// The application's side of a NIC-thread QP: how full its queues look. The NIC thread commits a
// step's completions, then publishes the retired counts; an application that polls a
// completion in between must see its slot free (a repost would otherwise be refused with
// ERR_QUEUE_FULL), and the counts, int32 words, may wrap.
import { describe, expect, it } from 'vitest';
import { rowForWr } from '../../src/rdmap/opcodes.js';
import type { PortPiece } from '../../src/nic/port.js';
import { type QpHost, ThreadQp } from '../../src/nic/thread-qp.js';
import { QP_WORDS, QpWord } from '../../src/nic/thread-proto.js';

function host(): QpHost & { posted: number } {
  const h = {
    control: new Int32Array(QP_WORDS * 2),
    isClosing: false,
    callable: true,
    sendOut: { qpn: 0, token: 0, opcode: 0, signaled: true, sges: [] },
    recvOut: { qpn: 0, token: 0, sges: [] },
    posted: 0,
    call: () => null,
    tearDown: () => {},
    post: () => {
      h.posted++;
    },
    drain: () => {},
    ahId: () => 1,
    trimLater: () => {},
    forget: () => {},
  };
  return h;
}

const none: PortPiece[] = [];

describe('ThreadQp queue lengths', () => {
  it('a receive completion taken before the NIC publishes its retired count frees its slot', () => {
    const h = host();
    const qp = new ThreadQp(h, 5, 1, 32, 1, 1);
    for (let i = 0; i < 32; i++) qp.postRecv(i, none, 0);
    expect(qp.rqLength).toBe(32);
    // The completion of one receive is drained; the NIC's word still says nothing retired.
    qp.sawRecv();
    expect(qp.rqLength).toBe(31);
    // The word catches up: still 31, not 30 (the same retirement, seen twice).
    Atomics.store(h.control, 1 * QP_WORDS + QpWord.rqRetired, 1);
    expect(qp.rqLength).toBe(31);
    // The word ahead of what was seen (a completion lost to a CQ overrun, or not drained yet).
    Atomics.store(h.control, 1 * QP_WORDS + QpWord.rqRetired, 4);
    expect(qp.rqLength).toBe(28);
  });

  it('a send completion retires its send and every send before it', () => {
    const h = host();
    const qp = new ThreadQp(h, 5, 0, 64, 1, 1);
    for (let i = 0; i < 10; i++) qp.postSend({ wrId: i, opcode: 0 as never }, rowForWr(0)!, none, 0, undefined, undefined);
    expect(qp.sqLength).toBe(10);
    // Sends 0..5 unsignaled, 6 signaled: its completion (token 6) retires seven.
    qp.sawSend(6);
    expect(qp.sqLength).toBe(3);
    qp.sawSend(2); // an older token never moves it back
    expect(qp.sqLength).toBe(3);
  });

  it('counts that wrap past 2^31 still give the right lengths', () => {
    const h = host();
    const qp = new ThreadQp(h, 5, 0, 64, 1, 1);
    // Just below the wrap, looked at (as every post does), then across it.
    qp.sqPosted = 2 ** 31 - 2;
    Atomics.store(h.control, QpWord.sqRetired, 2 ** 31 - 4);
    expect(qp.sqLength).toBe(2);
    qp.sqPosted = 2 ** 31 + 5;
    Atomics.store(h.control, QpWord.sqRetired, (2 ** 31 + 2) | 0);
    expect(qp.sqLength).toBe(3);
    qp.sawSend((2 ** 31 + 3) | 0);
    expect(qp.sqLength).toBe(1);
    qp.rqPosted = 2 ** 32 + 3;
    Atomics.store(h.control, QpWord.rqRetired, 1);
    expect(qp.rqLength).toBe(2);
  });
});
