// The opcode table (src/rdmap/opcodes.ts): one row per RDMAP opcode, agreeing with the wire's
// facts (spec.ts OPCODES), and every work-request opcode of the verbs contract starting exactly
// one message with the completion opcode DESIGN §4 names.
import { describe, expect, it } from 'vitest';
import { Opcode, WcOpcode } from '../../src/core/enums.js';
import { OPCODE_ROWS, rowForWr, WrKind } from '../../src/rdmap/opcodes.js';
import { OPCODES } from '../../src/wire/spec.js';

describe('the opcode table', () => {
  it('has one row per RDMAP opcode, carrying the wire facts of spec.ts', () => {
    expect(OPCODE_ROWS.map((r) => r.code)).toEqual(OPCODES.map((o) => o.code));
    for (const r of OPCODE_ROWS) {
      const o = OPCODES[r.code]!;
      expect([r.name, r.tagged, r.qn, r.data, r.sabre]).toEqual([o.name, o.tagged, o.qn, o.data, o.sabre]);
      if (r.arrive === 'receive') expect(r.data && !r.tagged).toBe(true);
      if (r.arrive === 'tagged' || r.arrive === 'readResponse') expect(r.tagged).toBe(true);
      if (r.arrive === 'control') expect(r.data || r.tagged).toBe(false);
      // A message that consumes a receive says when and what the receive completes as.
      if (r.recv) expect([WcOpcode.Recv, WcOpcode.RecvRdmaWithImm]).toContain(r.recv.wc);
    }
  });

  it('maps every work-request opcode to the message it starts and its completion opcode', () => {
    const want: [number, number, number, number][] = [
      [Opcode.Send, 3, WcOpcode.Send, WrKind.Send],
      [Opcode.SendWithImm, 12, WcOpcode.Send, WrKind.Send],
      [Opcode.RdmaWrite, 0, WcOpcode.RdmaWrite, WrKind.Write],
      [Opcode.RdmaWriteWithImm, 0, WcOpcode.RdmaWrite, WrKind.Write],
      [Opcode.RdmaRead, 13, WcOpcode.RdmaRead, WrKind.Read],
      [Opcode.AtomicFetchAdd, 10, WcOpcode.FetchAdd, WrKind.Atomic],
      [Opcode.AtomicCmpSwap, 10, WcOpcode.CmpSwap, WrKind.Atomic],
    ];
    for (const [op, code, wc, kind] of want) {
      const row = rowForWr(op)!;
      expect([row.code, row.wr[op as keyof typeof row.wr], row.kind]).toEqual([code, wc, kind]);
    }
    expect(rowForWr(7)).toBeUndefined();
    expect(rowForWr('0')).toBeUndefined();
    // Every row that starts work requests says how they are built; no other does.
    for (const r of OPCODE_ROWS) expect(r.build !== undefined).toBe(Object.keys(r.wr).length > 0);
  });
});
