// Atomic operands are 64-bit words (ibverbs' uint64_t compare_add / swap): a bigint outside
// what 64 bits hold is refused at the post with ERR_INVALID_ARGUMENT, as an imm outside uint32
// is — before, it was cut to its low 64 bits and the atomic completed Success doing something
// else (2n**64n + 1n added 1; 2n**70n added nothing). Negative values down to -(2^63) are the
// two's-complement word (a FetchAdd of -1n subtracts one).
import { afterEach, describe, expect, it } from 'vitest';
import { Access, ErrorCode, Opcode, type OpcodeValue, WcStatus } from '../../src/index.js';
import { pair, type Side } from './helpers.js';

let sides: Side[] = [];
afterEach(async () => {
  for (const s of sides) await s.dev.close();
  sides = [];
});

describe('atomic operands', () => {
  it('outside -(2^63)..2^64-1: ERR_INVALID_ARGUMENT at the post, nothing sent; in range: done', async () => {
    const [a, b] = await pair();
    sides = [a, b];
    const word = b.pd.regMr(8, Access.LocalWrite | Access.RemoteAtomic);
    new DataView(word.buffer.buffer, word.buffer.byteOffset, 8).setBigUint64(0, 7n, true);
    const old = a.pd.regMr(8, Access.LocalWrite);
    const wr = (opcode: OpcodeValue, compareAdd: bigint, swap?: bigint) => ({
      wrId: 1, opcode, sgList: [{ addr: old.addr, length: 8, lkey: old.lkey }], remoteAddr: word.addr, rkey: word.rkey, compareAdd, ...(swap === undefined ? {} : { swap }),
    });
    for (const v of [2n ** 64n, 2n ** 64n + 1n, 2n ** 70n, -(2n ** 63n) - 1n, -(2n ** 80n)]) {
      expect(() => a.qp.postSend(wr(Opcode.AtomicFetchAdd, v)), String(v)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidArgument }));
      expect(() => a.qp.postSend(wr(Opcode.AtomicCmpSwap, 7n, v)), `swap ${v}`).toThrow(expect.objectContaining({ code: ErrorCode.InvalidArgument }));
      expect(() => a.qp.postSend(wr(Opcode.AtomicCmpSwap, v, 1n)), `compare ${v}`).toThrow(expect.objectContaining({ code: ErrorCode.InvalidArgument }));
    }
    expect(a.cq.poll(8)).toEqual([]);
    const view = () => new DataView(word.buffer.buffer, word.buffer.byteOffset, 8).getBigUint64(0, true);
    expect(view()).toBe(7n);
    // In range: the largest word, and -1n as all ones.
    expect((await a.qp.post(wr(Opcode.AtomicFetchAdd, -1n))).status).toBe(WcStatus.Success);
    expect(view()).toBe(6n);
    expect((await a.qp.post(wr(Opcode.AtomicCmpSwap, 6n, 2n ** 64n - 1n))).status).toBe(WcStatus.Success);
    expect(view()).toBe(2n ** 64n - 1n);
  });
});
