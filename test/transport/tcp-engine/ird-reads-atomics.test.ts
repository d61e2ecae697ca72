// A standard iWARP peer (MPA without sabre's block, hand-built RFC FPDUs) keeping reads and
// atomics in flight up to the IRD it was offered, with limits.maxIrd 4: the MPA Reply offers 4
// (src/nic/tcp.ts), the link counts atomics in the IRD with reads (RFC 7306) and the engine's
// own bound agrees, so a conforming peer is never Terminated, whatever mix it sends.
import { afterEach, describe, expect, it } from 'vitest';
import { listen, openDevice, QpState } from '../../../src/index.js';
import { encodeAtomicRequest } from '../../../src/wire/rdmap.js';
import { cat, fpdu, rawConnect, readRequest, replyLength, untagged } from '../tcp/raw-mpa.js';
import { ALL } from './helpers.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const M64 = (1n << 64n) - 1n;
/** RFC 7306 Atomic Request (fetch-add 1): untagged opcode 10, QN 1. */
const atomicReq = (msn: number, stag: number, to: number): Uint8Array => {
  const p = new Uint8Array(52);
  encodeAtomicRequest({ op: 'fetchAdd', reqId: msn, stag, to, addOrSwap: 1n, addOrSwapMask: M64, compare: 0n, compareMask: M64 }, p, 0);
  return fpdu(cat(untagged(true, 10, 1, msn, 0), p));
};

/** Until the peer has `n` bytes after the MPA Reply (bounded in time). */
async function received(raw: Awaited<ReturnType<typeof rawConnect>>, n: number): Promise<void> {
  const end = Date.now() + 3000;
  while (raw.received().length < n) {
    if (Date.now() > end) throw new Error(`raw peer: ${raw.received().length}/${n} bytes`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

describe('a standard peer at its ORD, reads and atomics', () => {
  for (const depth of [1, 4]) it(`maxIrd 4, ${depth} in flight at a time, 100 rounds: never Terminated`, async () => {
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, limits: { maxIrd: 4 } });
    cleanup.push(() => dev.close());
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 256 });
    const mr = pd.regMr(256 * 1024, ALL);
    const l = listen(dev, { pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 4 } });
    cleanup.push(() => l.close());
    const raw = await rawConnect(dev.address.port as number);
    cleanup.push(() => void raw.s.destroy());
    await received(raw, 20);
    const qp = await l.accept(5000);
    let want = replyLength(raw.received());
    await received(raw, want);
    let msn = 1;
    for (let round = 0; round < 100; round++) {
      const reqs: Uint8Array[] = [];
      for (let k = 0; k < depth; k++) {
        // A Read Response of 8 bytes is a 28-byte FPDU, an Atomic Response 36.
        if ((round + k) % 2 === 0) {
          reqs.push(readRequest(msn++, 0x55, 0, 8, mr.rkey, mr.addr));
          want += 28;
        } else {
          reqs.push(atomicReq(msn++, mr.rkey, mr.addr + 64));
          want += 36;
        }
      }
      raw.s.write(cat(...reqs));
      await received(raw, want);
    }
    expect(qp.state).toBe(QpState.Rts);
    expect(dev.stats().readsRefused).toBe(0);
    expect(dev.stats().link?.readsRefused ?? 0).toBe(0);
    expect(new DataView(mr.buffer.buffer, mr.buffer.byteOffset + 64, 8).getBigUint64(0, true)).toBe(BigInt(50 * depth));
  });
});
