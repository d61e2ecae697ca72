// The deregister fence when send work is flushed rather than completed: a Write's datagrams are
// handed to the udp link (queued for its peer's context, in flight for retransmission), then its
// QP goes to ERROR (or is destroyed) and the work leaves the send queue flushed. The region is
// deregistered, its memory handed to the next regMr and overwritten with a marker. Whatever of
// the old Write the link still sends must be the bytes it had when it was posted: before the
// fix the link kept views of the freed memory and sent the marker under the old Write's key.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, Opcode, openDevice, QpState, WcStatus } from '../../src/index.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const ORIGINAL = 0x11;
const MARKER = 0xee;
const SIZE = 16 << 20;

async function until(what: string, cond: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

describe.each([
  ['error', 0, 'device'], ['error', 1, 'device'], ['destroy', 0, 'device'], ['destroy', 1, 'device'],
  ['error', 0, 'external'], ['destroy', 1, 'external'],
] as const)('udp: a Write flushed while its datagrams wait in the link (%s, workers: %i, %s memory)', (how, workers, memory) => {
  it('the source deregistered, its memory reused and overwritten: no marker byte reaches the target', async () => {
    const open = () => openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers });
    const a = await open();
    const b = await open();
    cleanup.push(() => a.close(), () => b.close());
    const pa = a.allocPd();
    const pb = b.allocPd();
    const cqa = a.createCq({ depth: 16 });
    const cqb = b.createCq({ depth: 16 });
    const qa = pa.createQp({ type: 'rc', sendCq: cqa, recvCq: cqa, maxSendWr: 8, maxRecvWr: 4, maxSge: 1 });
    const qb = pb.createQp({ type: 'rc', sendCq: cqb, recvCq: cqb, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);
    // External: the caller's own (non-shared) buffer, which is the caller's again once deregistered.
    const own = memory === 'external' ? new Uint8Array(SIZE) : undefined;
    const src = pa.regMr(own ?? SIZE, Access.LocalWrite);
    src.buffer.fill(ORIGINAL);
    const dst = pb.regMr(SIZE, Access.LocalWrite | Access.RemoteWrite);
    const sent0 = a.stats().link!.txDatagrams ?? 0;
    qa.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: SIZE, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    // The Write is handed to the link (the first datagrams went), most of it still waits there.
    await until('the first datagrams', () => (a.stats().link!.txDatagrams ?? 0) > sent0, 5000);
    if (how === 'error') qa.modify({ state: QpState.Error });
    else qa.destroy();
    if (how === 'error') {
      for (const end = Date.now() + 5000; cqa.count === 0 && Date.now() < end; ) await cqa.wait(end - Date.now());
      expect(cqa.poll(4)).toMatchObject([{ wrId: 1, status: WcStatus.WrFlushErr }]);
    }
    src.deregister();
    // Take every free block the allocator has near: one of them is the old source's memory.
    const again = [pa.regMr(SIZE, Access.LocalWrite), pa.regMr(SIZE, Access.LocalWrite)];
    for (const r of again) r.buffer.fill(MARKER);
    own?.fill(MARKER);
    // Let the link send whatever it still holds for the old Write.
    const before = () => b.stats().link!.rxDatagrams ?? 0;
    let last = -1;
    for (let i = 0; i < 100 && before() !== last; i++) {
      last = before();
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(dst.buffer.indexOf(MARKER)).toBe(-1);
  }, 30_000);
});
