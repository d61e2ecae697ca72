// A dedup receiver (a hostile file server on put --dedup, a hostile client on get --dedup) sends
// a HELLO whose chunking parameters pass the sender core's checks of sizes (min <= avg <= max <=
// slotLen, 1..64 slots) but that the chunker refuses (avg not a power of two in 256..2^26, min
// below 64). Checked: the sender's send() fails with ERR_MALFORMED "HELLO with unusable
// parameters" — the peer's protocol error, as for every other HELLO the core refuses — and so
// does a later send on the same pipe. Before the fix the HELLO was taken and `new DeviceChunker`
// threw ERR_INVALID_ARGUMENT ("chunker: avg must be …"), the code of a caller's misuse of the
// API, at every send on that pipe (this test failed then). Also checked: a HELLO the core refused
// for any reason fails the send waiting for it (before, the shell dropped the refusal and the
// send waited for ever).
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupSender, type MessagePipe, type RdmaWritePath } from '../../src/dedup/endpoint.js';
import { encode } from '../../src/dedup/messages.js';
import { ErrorCode } from '../../src/core/errors.js';
import { DedupKind } from '../../src/wire/spec.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 16 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
});

function hello(avg: number, min: number, max: number, slots = 2): Uint8Array {
  return encode({
    kind: DedupKind.Hello, avg, min, max, normalization: 2, hashAlg: 1, zoneAddr: 0, zoneRkey: 1, slotLen: 1 << 18, slots,
    maxEntries: 64, maxChunks: 1 << 20, seed: 0n, key: new Uint8Array(32),
  } as never);
}

/** A sender on an in-process pipe whose receiver's only message is `helloBytes`; `sent`: what it sends back. */
function senderWith(helloBytes: Uint8Array): { tx: DedupSender; sent: Uint8Array[] } {
  let handler: (b: Uint8Array) => void = () => undefined;
  const sent: Uint8Array[] = [];
  const pipe: MessagePipe = { send: (b) => void sent.push(b), onMessage: (h) => void (handler = h) };
  const rdma: RdmaWritePath = {
    stage: (bytes) => {
      const at = dm.alloc(Math.max(bytes.length, 1));
      dm.u8().set(bytes, at);
      return at;
    },
    write: () => Promise.resolve(),
  };
  const tx = new DedupSender({ pipe, rdma, mem: dm });
  queueMicrotask(() => handler(helloBytes));
  return { tx, sent };
}

const failure = (p: Promise<unknown>): Promise<{ code?: string; message?: string } | undefined> =>
  p.then(() => undefined, (e: { code?: string; message?: string }) => e);

describe('a HELLO whose chunking parameters the sender\'s chunker cannot use', () => {
  for (const [what, avg, min, max] of [['avg 1000 (not a power of two)', 1000, 250, 4000], ['min 8 (below 64)', 4096, 8, 16384], ['avg 128 (below 256)', 128, 64, 512]] as const) {
    it(`${what}: the send fails as the peer's malformed HELLO, and so does the next`, async () => {
      const { tx } = senderWith(hello(avg, min, max));
      try {
        const err = await failure(tx.send(new Uint8Array(100_000).fill(1)));
        expect(err?.code).toBe(ErrorCode.Malformed);
        expect(err?.message).toMatch(/HELLO with unusable parameters/);
        const again = await failure(tx.send(new Uint8Array(1000).fill(2)));
        expect(again?.code).toBe(ErrorCode.Malformed);
      } finally {
        tx.close();
      }
    }, 10_000);
  }

  it('a HELLO refused for its other parameters (0 slots) fails the waiting send too, not leaving it waiting', async () => {
    // The same path: before the fix a refused HELLO was dropped by the sender's shell and a
    // send waited for a HELLO that had already come.
    const { tx } = senderWith(hello(4096, 1024, 16384, 0));
    try {
      const err = await failure(tx.send(new Uint8Array(10_000).fill(4)));
      expect(err?.code).toBe(ErrorCode.Malformed);
      expect(err?.message).toMatch(/HELLO with unusable parameters/);
    } finally {
      tx.close();
    }
  }, 10_000);

  it('usable parameters (avg 4096, min 1024, max 16384) are taken', async () => {
    // The control: the same HELLO with parameters the chunker takes gets as far as the OFFERs.
    const { tx, sent } = senderWith(hello(4096, 1024, 16384));
    const p = failure(tx.send(new Uint8Array(50_000).fill(3)));
    for (let i = 0; i < 100 && sent.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(sent.length).toBeGreaterThan(0);
    tx.close(); // the transfer never ends (no receiver): its send stays unsettled
    void p;
  });
});
