// The deregister fence when send work is flushed rather than completed: a Write's datagrams are
// handed to the udp link (queued for its peer's context, in flight for retransmission), then its
// QP goes to ERROR (or is destroyed) and the work leaves the send queue flushed. Its buffer is
// the caller's again: rewritten, or deregistered and its memory handed to the next regMr and
// overwritten with a marker. Whatever of the old Write the link still sends must be the bytes it
// had when it was posted: before the fix the link kept views of the memory and sent the marker.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, Opcode, QpState, WcStatus, type Device } from '../../src/index.js';
import { fencePair } from './fence-pair.js';

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

/** Until the target has received nothing more for 50 ms (what the link still held has gone). */
async function quiet(b: Device): Promise<void> {
  const rx = () => b.stats().link!.rxDatagrams ?? 0;
  let last = -1;
  for (let i = 0; i < 100 && rx() !== last; i++) {
    last = rx();
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.each([
  ['error', 0, 'device', 0], ['error', 1, 'device', 0], ['destroy', 0, 'device', 0], ['destroy', 1, 'device', 0],
  ['error', 0, 'external', 0], ['destroy', 1, 'external', 0], ['error', 2, 'device', 1], ['error', 2, 'shared', 1], ['error', 1, 'shared', 0],
  ['reuse', 0, 'device', 0], ['reuse', 1, 'device', 0], ['reuse', 2, 'shared', 1],
] as const)('udp: a Write flushed while its datagrams wait in the link (%s, workers: %i, %s memory, QP on thread %i)', (how, workers, memory, thread) => {
  it('its buffer rewritten (deregistered and its memory reused, or as it is): no marker byte reaches the target', async () => {
    const { a, b, pa, pb, cqa, qa } = await fencePair('udp', workers, cleanup, { thread, peerWorkers: 0 });
    // external: the caller's own non-shared buffer; shared: the caller's SharedArrayBuffer (a NIC thread reads it in place).
    const own = memory === 'external' ? new Uint8Array(SIZE) : memory === 'shared' ? new Uint8Array(new SharedArrayBuffer(SIZE)) : undefined;
    const src = pa.regMr(own ?? SIZE, Access.LocalWrite);
    src.buffer.fill(ORIGINAL);
    const dst = pb.regMr(SIZE, Access.LocalWrite | Access.RemoteWrite);
    const sent0 = a.stats().link!.txDatagrams ?? 0;
    qa.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: SIZE, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    // The Write is handed to the link (the first datagrams went), most of it still waits there.
    await until('the first datagrams', () => (a.stats().link!.txDatagrams ?? 0) > sent0, 5000);
    if (how === 'destroy') qa.destroy();
    else {
      qa.modify({ state: QpState.Error });
      for (const end = Date.now() + 5000; cqa.count === 0 && Date.now() < end; ) await cqa.wait(end - Date.now());
      expect(cqa.poll(4)).toMatchObject([{ wrId: 1, status: WcStatus.WrFlushErr }]);
    }
    if (how === 'reuse') {
      // Flushed, the Write is complete: its buffer is the caller's again, still registered.
      src.buffer.fill(MARKER);
    } else {
      src.deregister();
      // Take every free block the allocator has near: one of them is the old source's memory.
      const again = [pa.regMr(SIZE, Access.LocalWrite), pa.regMr(SIZE, Access.LocalWrite)];
      for (const r of again) r.buffer.fill(MARKER);
      own?.fill(MARKER);
    }
    await quiet(b);
    expect(dst.buffer.indexOf(MARKER)).toBe(-1);
  }, 30_000);
});
