// A QPN made again (the CM QP's reserved CM_QPN, re-created after each destroy) and destroyed
// again before the first destroy's flushes came (the NIC thread held them back while its
// completion ring was full): every life's completions reach that life's work requests, in the
// order the NIC thread writes them — a life's flushes, its fence record, the next life's.
import { describe, expect, it } from 'vitest';
import { rowForWr } from '../../src/rdmap/opcodes.js';
import type { PortPiece } from '../../src/nic/port.js';
import { QP_WORDS, QpWord } from '../../src/nic/thread-proto.js';
import { type QpHost, ThreadQp } from '../../src/nic/thread-qp.js';
import { QpTable } from '../../src/nic/thread-qps.js';
import { CM_QPN } from '../../src/verbs/reserved.js';

function host(table: QpTable): QpHost {
  return {
    control: new Int32Array(QP_WORDS * 8),
    isClosing: false,
    callable: true,
    sendOut: { qpn: 0, token: 0, opcode: 0, signaled: true, sges: [] },
    recvOut: { qpn: 0, token: 0, sges: [] },
    call: () => null,
    tearDown: () => {},
    post: () => {},
    drain: () => {},
    ahId: () => 1,
    trimLater: () => {},
    forget: (qp) => table.forget(qp),
  };
}

const none: PortPiece[] = [];

/** A QP of `qpn` in `table` with receives `ids` posted (tokens from 0). */
function make(table: QpTable, h: QpHost, slot: number, ids: number[]): ThreadQp {
  const qp = new ThreadQp(h, CM_QPN, slot, 16, 1, 1);
  table.add(qp);
  for (const id of ids) qp.postRecv(id, none, 0);
  return qp;
}

describe('lives of one QPN', () => {
  it('a QPN destroyed twice before its first fence: each life gets its own flushes', () => {
    const table = new QpTable();
    const h = host(table);
    make(table, h, 0, [10, 11, 12]).destroy(true);
    make(table, h, 1, [20, 21]).destroy(true);
    make(table, h, 2, [30]);
    const take = (token: number): unknown => table.route(CM_QPN)?.take(token, true);
    // The first life's flushes, its fence; the second's, its fence; then the live QP's.
    expect([take(0), take(1), take(2)]).toEqual([10, 11, 12]);
    table.fence(CM_QPN);
    expect([take(0), take(1)]).toEqual([20, 21]);
    table.fence(CM_QPN);
    expect(take(0)).toBe(30);
  });

  it('a destroyed QP with a reset behind it keeps both lives, then the next QP of its QPN', () => {
    const table = new QpTable();
    const h = host(table);
    const a = make(table, h, 0, [10]);
    a.reset();
    a.postRecv(11, none, 0);
    a.destroy(true);
    make(table, h, 1, [20]).destroy(true);
    const take = (token: number): unknown => table.route(CM_QPN)?.take(token, true);
    expect(take(0)).toBe(10);
    table.fence(CM_QPN);
    expect(take(0)).toBe(11);
    table.fence(CM_QPN);
    expect(take(0)).toBe(20);
    table.fence(CM_QPN);
    expect(table.route(CM_QPN)).toBeUndefined();
  });

  it('every life still held is flushed when the NIC thread is gone, oldest first', () => {
    const table = new QpTable();
    const h = host(table);
    make(table, h, 0, [10, 11]).destroy(true);
    make(table, h, 1, [20]).destroy(true);
    make(table, h, 2, [30]);
    const ids: unknown[] = [];
    for (const qp of table.all()) qp.outstanding((_cq, id) => ids.push(id));
    expect(ids).toEqual([10, 11, 20, 30]);
  });
});

/** Sends `ids` posted on `qp`, the first `unsignaled` of them unsignaled. */
function sends(qp: ThreadQp, ids: number[], unsignaled: number): void {
  ids.forEach((id, i) => qp.postSend({ wrId: id, opcode: 0 as never, signaled: i >= unsignaled }, rowForWr(0)!, none, 0, undefined, undefined));
}

describe('an earlier life flushed by the application (the NIC thread gone before its fence)', () => {
  // An unsignaled send the NIC retired with success has no completion (its retired count says
  // so); one still outstanding when the QP went to ERROR is flushed, signaled or not (the
  // engine's flush: src/rdmap/completion.ts).
  it('a destroyed QP: its retired unsignaled sends get no flush, its outstanding ones do', () => {
    const table = new QpTable();
    const h = host(table);
    const qp = new ThreadQp(h, CM_QPN, 3, 16, 1, 1);
    table.add(qp);
    sends(qp, [1, 2, 3, 4, 5], 4);
    // The NIC retired sends 0..2 (unsignaled successes) before the destroy.
    Atomics.store(h.control, 3 * QP_WORDS + QpWord.sqRetired, 3);
    qp.destroy(true);
    // The slot serves another QP, whose words start at 0.
    Atomics.store(h.control, 3 * QP_WORDS + QpWord.sqRetired, 0);
    const ids: unknown[] = [];
    for (const q of table.all()) q.outstanding((_cq, id) => ids.push(id));
    expect(ids).toEqual([4, 5]);
  });

  it('a reset QP: the same for the life before the reset, the new life from its own count', () => {
    const table = new QpTable();
    const h = host(table);
    const qp = new ThreadQp(h, CM_QPN, 2, 16, 1, 1);
    table.add(qp);
    sends(qp, [1, 2, 3], 2);
    Atomics.store(h.control, 2 * QP_WORDS + QpWord.sqRetired, 2);
    // The reset zeroes the NIC's retired count: as the NIC thread does when it serves it.
    h.call = () => {
      Atomics.store(h.control, 2 * QP_WORDS + QpWord.sqRetired, 0);
      return null;
    };
    qp.reset();
    sends(qp, [11, 12, 13], 1);
    Atomics.store(h.control, 2 * QP_WORDS + QpWord.sqRetired, 1);
    const ids: unknown[] = [];
    qp.outstanding((_cq, id) => ids.push(id));
    expect(ids).toEqual([3, 12, 13]);
  });
});
