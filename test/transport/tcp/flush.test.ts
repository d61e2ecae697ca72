// When a connection writes what was framed: once per tick, a few promise jobs after the first
// send, so an answer that an `await`ing application makes to what a read brought (and the
// inline port's step for its posts, one job more) leaves in the same socket write as the ack
// the read's step sent — one write and one wake-up of the peer per hop of a ping-pong.
import { describe, expect, it, vi } from 'vitest';
import { encodeDdp, RdmapOpcode } from '../../../src/wire/rdmap.js';
import { connectorEndpoints } from './connectors.js';

const eps = connectorEndpoints();

function write(to: number): Uint8Array {
  const b = new Uint8Array(14 + 64);
  encodeDdp({ tagged: true, last: true, opcode: RdmapOpcode.RdmaWrite, stag: 0x100, to }, b, 0);
  return b;
}

describe('tcp connection: one write per tick', () => {
  it('a send made three promise jobs later, by work queued before the first send, leaves in the same write', async () => {
    const a = await eps.listen();
    const b = await eps.listen();
    const [ca, cb] = await Promise.all([a.connectQp(1, { address: b.address, qpn: 2 }), b.connectQp(2, { address: a.address, qpn: 1 })]);
    const got: number[] = [];
    cb.onUlpdus((batch) => {
      for (const u of batch) got.push(u.len);
    });
    const writes = vi.spyOn(ca.socket, 'write');
    const answered = Promise.resolve().then(() => {}).then(() => {}).then(() => ca.send(write(64)));
    ca.send(write(0));
    await answered;
    await new Promise((r) => setImmediate(r));
    expect(writes).toHaveBeenCalledTimes(1);
    await vi.waitFor(() => expect(got).toEqual([78, 78]));
  });
});
