// The NIC thread takes its WQE ring at most WQES_PER_TURN records per turn of its event loop
// (src/nic/thread-wqes.ts). Taken whole, the 60,000 writes an application posts in one loop kept
// the thread from reading its input for a third of a second (about a second on a loaded machine): the
// peer's acks lay unread while this device's requester watchdogs (timeoutMs 2 s) ran out, and a
// write failed RetryExcErr (test/nic/place-records, 'udp: a hold longer than the peers' watchdog').
// Records here are of a kind nobody writes: each taken one is a counted drop, so `bad` counts takes.
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { InlinePort } from '../../src/nic/inline-port.js';
import { RecordRing } from '../../src/nic/ring.js';
import { WqeIntake, WQES_PER_TURN } from '../../src/nic/thread-wqes.js';
import { InprocLink } from '../../src/transport/inproc/fabric.js';

let port: InlinePort | undefined;
afterEach(async () => {
  await port?.close();
  port = undefined;
});

async function intake(): Promise<WqeIntake> {
  const mem = await DeviceMemory.create({ maximumBytes: 64 << 20, workerSlots: 0 });
  port = new InlinePort(mem, new InprocLink());
  return new WqeIntake(port, new Map(), new Map());
}

/** `n` 64-byte records of an unknown kind, published at once (as a posting loop's commit). */
function fill(producer: RecordRing, n: number): void {
  for (let i = 0; i < n; i++) {
    const off = producer.reserve(64);
    if (off < 0) throw new Error('ring full');
    producer.u8.fill(0, off, off + 64);
    producer.dv.setUint8(off, 0x7e);
  }
  producer.commit();
}

describe('WqeIntake.take', () => {
  it('takes at most `max` records per call, in order, and says whether any are left', async () => {
    const wq = await intake();
    const producer = RecordRing.create(1 << 20);
    const ring = RecordRing.attach(producer.sab);
    const n = 3 * WQES_PER_TURN + 5;
    fill(producer, n);
    expect(wq.take(ring, WQES_PER_TURN)).toBe(true);
    expect(wq.bad).toBe(WQES_PER_TURN);
    expect(wq.take(ring, WQES_PER_TURN)).toBe(true);
    expect(wq.take(ring, WQES_PER_TURN)).toBe(true);
    expect(wq.bad).toBe(3 * WQES_PER_TURN);
    expect(wq.take(ring, WQES_PER_TURN)).toBe(false);
    expect(wq.bad).toBe(n);
    expect(wq.take(ring, WQES_PER_TURN)).toBe(false);
    expect(wq.bad).toBe(n);
  });

  it('without a bound (a control call, which must see every post made before it) takes the whole ring', async () => {
    const wq = await intake();
    const producer = RecordRing.create(1 << 20);
    const ring = RecordRing.attach(producer.sab);
    fill(producer, 3 * WQES_PER_TURN);
    expect(wq.take(ring)).toBe(false);
    expect(wq.bad).toBe(3 * WQES_PER_TURN);
  });
});
