// A standard iWARP peer (MPA without sabre's block, hand-built RFC FPDUs) keeping reads and
// atomics in flight up to the IRD it was offered, with limits.maxIrd 4: the MPA Reply offers 4
// (src/nic/tcp.ts), the link counts atomics in the IRD with reads (RFC 7306) and the engine's
// own bound agrees, so a conforming peer is never Terminated, whatever mix it sends.
import net from 'node:net';
import { crc32c as refCrc } from '@node-rs/crc32';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, listen, openDevice, Opcode, SabreError, WcOpcode, WcStatus, QpState, type Device, type QueuePair } from '../../../src/index.js';
import { encodeAtomicRequest } from '../../../src/wire/rdmap.js';
import { ALL, take } from './helpers.js';

const devs: Device[] = [];
const socks: net.Socket[] = [];
afterEach(async () => {
  for (const s of socks.splice(0)) s.destroy();
  for (const d of devs.splice(0)) await d.close();
});

const cat = (...xs: Uint8Array[]): Uint8Array => {
  const o = new Uint8Array(xs.reduce((n, x) => n + x.length, 0));
  let p = 0;
  for (const x of xs) {
    o.set(x, p);
    p += x.length;
  }
  return o;
};
const be32 = (v: number): number[] => [v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff];
const be64 = (v: number): number[] => [...be32(Math.floor(v / 2 ** 32)), ...be32(v >>> 0)];

/** RFC 5044 §4 FPDU: u16 ULPDU length, ULPDU, pad to 4, CRC32C (least-significant byte first). */
function fpdu(ulpdu: Uint8Array): Uint8Array {
  const pad = (4 - ((2 + ulpdu.length) & 3)) & 3;
  const body = cat(Uint8Array.of(ulpdu.length >> 8, ulpdu.length & 0xff), ulpdu, new Uint8Array(pad));
  const crc = refCrc(Buffer.from(body)) >>> 0;
  return cat(body, Uint8Array.of(crc & 0xff, (crc >>> 8) & 0xff, (crc >>> 16) & 0xff, crc >>> 24));
}

/** RFC 5041 §5.1 tagged header: [T=1|L|DV=01], [RV=01|opcode], STag, TO (64). */
const tagged = (last: boolean, opcode: number, stag: number, to: number): Uint8Array =>
  Uint8Array.of(0x81 | (last ? 0x40 : 0), 0x40 | opcode, ...be32(stag), ...be64(to));
/** RFC 5041 §5.2 untagged header: [T=0|L|DV=01], [RV=01|opcode], RsvdULP (32), QN, MSN, MO. */
const untagged = (last: boolean, opcode: number, qn: number, msn: number, mo: number): Uint8Array =>
  Uint8Array.of(0x01 | (last ? 0x40 : 0), 0x40 | opcode, 0, 0, 0, 0, ...be32(qn), ...be32(msn), ...be32(mo));
/** RFC 5040 §4.4 Read Request: opcode 1, QN 1, L; payload Data Sink STag, Data Sink TO, RDMA Read Message Size, Data Source STag, Data Source TO. */
const readRequest = (msn: number, sinkStag: number, sinkTo: number, size: number, srcStag: number, srcTo: number): Uint8Array =>
  fpdu(cat(untagged(true, 1, 1, msn, 0), Uint8Array.of(...be32(sinkStag), ...be64(sinkTo), ...be32(size), ...be32(srcStag), ...be64(srcTo))));
/** RFC 5040 §4.3 Read Response: tagged, opcode 2, at the sink STag/TO. */
const readResponse = (last: boolean, stag: number, to: number, data: Uint8Array): Uint8Array => fpdu(cat(tagged(last, 2, stag, to), data));

/** A standard MPA revision-2 initiator (C and H set, IRD/ORD 16, no sabre block) on a raw socket. */
async function rawPeer(port: number) {
  const s = net.connect({ host: '127.0.0.1', port });
  socks.push(s);
  s.on('error', () => {});
  await new Promise((r) => s.once('connect', r));
  s.write(cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10)));
  let buf: Uint8Array = new Uint8Array(0);
  let waiter: (() => void) | undefined;
  s.on('data', (d: Buffer) => {
    buf = cat(buf, d);
    waiter?.();
  });
  /** The next n bytes sabre sent (event-driven; bounded in time). */
  const read = async (n: number, ms = 5000): Promise<Uint8Array> => {
    const t = setTimeout(() => waiter?.(), ms);
    while (buf.length < n) {
      const before = buf.length;
      await new Promise<void>((r) => (waiter = r));
      if (buf.length === before) {
        clearTimeout(t);
        throw new Error(`raw peer: ${buf.length}/${n} bytes after ${ms} ms`);
      }
    }
    clearTimeout(t);
    const out = buf.slice(0, n);
    buf = buf.slice(n);
    return out;
  };
  const head = await read(20);
  const reply = cat(head, await read((head[18]! << 8) | head[19]!));
  return { s, reply, read, get pending() { return buf.length; } };
}


const M64 = (1n << 64n) - 1n;
const atomicReq = (msn: number, stag: number, to: number): Uint8Array => {
  const p = new Uint8Array(52);
  encodeAtomicRequest({ op: 'fetchAdd', reqId: msn, stag, to, addOrSwap: 1n, addOrSwapMask: M64, compare: 0n, compareMask: M64 }, p, 0);
  return fpdu(cat(untagged(true, 10, 1, msn, 0), p));
};

async function setup(maxIrd: number) {
  const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, limits: { maxIrd } });
  devs.push(dev);
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 256 });
  const mr = pd.regMr(256 * 1024, ALL);
  const l = listen(dev, { pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 4 } });
  const raw = await rawPeer(dev.address.port as number);
  const qp: QueuePair = await l.accept(5000);
  return { dev, pd, cq, mr, qp, raw };
}

describe('a standard peer at its ORD, reads and atomics', () => {
  for (const depth of [1, 4]) it(`maxIrd 4, ${depth} in flight at a time, 100 rounds: never Terminated`, async () => {
    const { dev, mr, qp, raw } = await setup(4);
    let msn = 1;
    let answered = 0;
    for (let round = 0; round < 100; round++) {
      const reqs: Uint8Array[] = [];
      let want = 0;
      for (let k = 0; k < depth; k++) {
        if ((round + k) % 2 === 0) { reqs.push(readRequest(msn++, 0x55, 0, 8, mr.rkey, mr.addr)); want += 28; }
        else { reqs.push(atomicReq(msn++, mr.rkey, mr.addr + 64)); want += 36; }
      }
      raw.s.write(cat(...reqs));
      await raw.read(want, 3000);
      answered += depth;
    }
    expect(qp.state).toBe(QpState.Rts);
    expect(dev.stats().readsRefused).toBe(0);
    expect(dev.stats().link?.readsRefused ?? 0).toBe(0);
    expect(answered).toBe(100 * depth);
    expect(new DataView(mr.buffer.buffer, mr.buffer.byteOffset + 64, 8).getBigUint64(0, true)).toBe(BigInt(50 * depth));
  });
});
