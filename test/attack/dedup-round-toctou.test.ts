// A hostile dedup sender keeps RDMA-writing into the landing-zone slot it has just announced in
// its ROUND. On a device whose NIC runs on its own thread (workers >= 1, the udp/tcp default)
// those writes are placed while the receiver's thread is inside its ROUND step, so a receiver
// that hashed the zone and then read the zone again (to copy into the object and the store)
// could store bytes other than those it verified. With a shared SHA-256 store (the configuration
// for peers that do not trust each other) that copy was then reused for another scope's chunk of
// the same hash, and an honest peer's later transfer was assembled from the attacker's bytes.
//
// Here a worker_thread stands in for the NIC thread: it flips a byte of the slot in a loop while
// the receiver core handles the ROUND. Checked: (1) whatever the receiver delivers and stores is
// exactly the chunk its hash names (it copies the slot into memory no peer can write, hashes that
// copy and uses only it); (2) the store's backstop: a shared copy is reused only if its bytes
// equal the new ones, so a poisoned copy never serves another scope (counted: sharedMismatches).
// Both tests failed before the fix (the first found a poisoned copy within its first ROUNDs).
import { createHash, randomBytes } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { encode } from '../../src/dedup/messages.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DedupRecvCore, type RecvAction } from '../../src/dedup/transfer.js';
import { DedupKind } from '../../src/wire/dedup-spec.js';
import { pollAll } from '../../src/core/sans-io.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 32 << 20, maximumBytes: 32 << 20, workerSlots: 0 });
});

const AVG = 4096;
const MAX = 4 * AVG;
const LEN = 3000; // one chunk, the last (may be below min)

function core(store: ChunkStore, scope: string): { rx: DedupRecvCore; zone: number } {
  const zone = dm.alloc(2 * MAX, 64);
  const rx = new DedupRecvCore({ mem: dm, store, scope, avg: AVG, zone: { addr: zone, rkey: 1, length: 2 * MAX }, slots: 1 });
  rx.start();
  pollAll(rx);
  return { rx, zone };
}

const sha = (b: Uint8Array): Uint8Array => new Uint8Array(createHash('sha256').update(b).digest());
const offer = (xfer: number, c: Uint8Array, hash = sha(c)): Uint8Array =>
  encode({ kind: DedupKind.Offer, xfer, total: c.length, last: true, chunks: 1, first: 0, count: 1, lens: Uint32Array.of(c.length), hashes: hash });
const round = (xfer: number, len: number): Uint8Array => encode({ kind: DedupKind.Round, xfer, slot: 0, first: 0, count: 1, bytes: len });

function step(rx: DedupRecvCore, m: Uint8Array): RecvAction[] {
  rx.handleMessage(m, 0);
  return pollAll(rx);
}
const delivered = (as: RecvAction[]): Uint8Array | undefined => (as.find((a) => a.kind === 'delivered') as { bytes: Uint8Array } | undefined)?.bytes;

// The "NIC thread": flips u8[ctl[2]] while ctl[0] === 1 (ctl[0] === 2: exit); ctl[1] counts flips.
const FLIPPER = `
const { workerData } = require('node:worker_threads');
const u8 = new Uint8Array(workerData.mem.buffer);
const ctl = new Int32Array(workerData.ctl);
for (;;) {
  const s = Atomics.load(ctl, 0);
  if (s === 2) break;
  if (s === 1) { u8[Atomics.load(ctl, 2)] ^= 0x5a; Atomics.add(ctl, 1, 1); }
}
`;

let worker: Worker | undefined;
afterAll(async () => {
  await worker?.terminate();
});

describe('dedup ROUND: the receiver verifies, then copies, while the NIC thread places a hostile write', () => {
  it('a shared sha256 store never holds, and never delivers, bytes other than the chunk its hash names', async () => {
    const store = new ChunkStore(dm, { hash: 'sha256', shared: true });
    const mallory = core(store, 'mallory');
    const ctl = new Int32Array(new SharedArrayBuffer(16));
    worker = new Worker(FLIPPER, { eval: true, workerData: { mem: dm.memory, ctl: ctl.buffer } });
    let poisoned = 0;
    let wrong = 0;
    let delivers = 0;
    const deadline = performance.now() + 8_000;
    // Bounded in count and time: the old code lost within the first few dozen ROUNDs.
    for (let xfer = 1; xfer <= 300 && performance.now() < deadline; xfer++) {
      const c = new Uint8Array(randomBytes(LEN));
      expect(step(mallory.rx, offer(xfer, c)).some((a) => a.kind === 'send')).toBe(true);
      dm.u8().set(c, mallory.zone); // the sender's RDMA WRITE of the right bytes...
      Atomics.store(ctl, 2, mallory.zone + 1234);
      const before = Atomics.load(ctl, 1);
      Atomics.store(ctl, 0, 1); // ...then more writes into the same slot, placed meanwhile
      for (let spin = 0; spin < 1e7 && Atomics.load(ctl, 1) - before < 1000; spin++);
      const got = delivered(step(mallory.rx, round(xfer, LEN)));
      Atomics.store(ctl, 0, 0);
      if (!got) continue; // the flip was seen by the hash: refused, as it should be
      delivers++;
      if (Buffer.compare(got, c) !== 0) wrong++;
      const ref = store.get('mallory', sha(c));
      if (ref && Buffer.compare(dm.u8().subarray(ref.addr, ref.addr + LEN), c) !== 0) poisoned++;
    }
    Atomics.store(ctl, 0, 2);
    expect(Atomics.load(ctl, 1), 'the flipping thread ran').toBeGreaterThan(0);
    expect(wrong, 'objects delivered with bytes other than those verified').toBe(0);
    expect(poisoned, 'store copies holding, under a verified hash, bytes that are not the chunk').toBe(0);
    // eslint-disable-next-line no-console
    console.log(`ROUNDs delivered ${delivers}, flips ${Atomics.load(ctl, 1)}, poisoned ${poisoned}`);
    mallory.rx.close();
    store.close();
    dm.free(mallory.zone);
  }, 20_000);

  it('backstop: a shared copy is reused for another scope only if its bytes are equal (else a private copy, counted)', () => {
    const store = new ChunkStore(dm, { hash: 'sha256', shared: true });
    const c = new Uint8Array(randomBytes(LEN));
    const y = c.slice();
    y[1234]! ^= 0x5a;
    const h = sha(c);
    const at = dm.alloc(LEN);
    // A copy that, however it came about, holds y under the hash of c (in mallory's scope).
    dm.u8().set(y, at);
    expect(store.put('mallory', h, at, LEN)).toBe(true);
    // Alice's verified chunk c: kept privately, not pointed at mallory's copy.
    dm.u8().set(c, at);
    expect(store.put('alice', h, at, LEN)).toBe(true);
    dm.u8().fill(0, at, at + LEN);
    const ra = store.get('alice', h)!;
    expect(Buffer.compare(dm.u8().subarray(ra.addr, ra.addr + LEN), c)).toBe(0);
    const rm = store.get('mallory', h)!;
    expect(Buffer.compare(dm.u8().subarray(rm.addr, rm.addr + LEN), y)).toBe(0);
    expect(store.stats()).toMatchObject({ entries: 2, copies: 2, storedBytes: 2 * LEN, sharedInserts: 0, sharedMismatches: 1 });
    // Equal bytes are still stored once; a third scope with c joins... whichever copy holds c.
    dm.u8().set(c, at);
    expect(store.put('bob', h, at, LEN)).toBe(true);
    const rb = store.get('bob', h)!;
    expect(Buffer.compare(dm.u8().subarray(rb.addr, rb.addr + LEN), c)).toBe(0);
    // Dropping the scopes frees every copy (the private one is not mistaken for the shared one).
    store.dropScope('mallory');
    expect(Buffer.compare(dm.u8().subarray(store.get('alice', h)!.addr, store.get('alice', h)!.addr + LEN), c)).toBe(0);
    store.dropScope('alice');
    store.dropScope('bob');
    expect(store.stats()).toMatchObject({ entries: 0, copies: 0, storedBytes: 0 });
    store.close();
    dm.free(at);
  });
});
