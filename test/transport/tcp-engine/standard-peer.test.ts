// sabre against a standard iWARP peer that is not sabre: a raw node:net client speaks MPA
// revision 2 without sabre's private-data block, then hand-built RFC FPDUs. Expected bytes are
// written out from the RFC 5040/5041/5044 layouts here (not from sabre's encoders), and every
// CRC is computed with @node-rs/crc32.
//   - sabre's RdmaRead goes out as RFC 5040 §4.4 Read Requests and completes on the Read
//     Response with L (several sources → several requests, completion after the last one);
//   - the peer's Read Request is answered with Read Response FPDUs and nothing else;
//   - RdmaWrite / RdmaWriteWithImm arrive as RFC tagged FPDUs / RFC 7306 Immediate Data;
//   - SendWithImm is refused at post time (NotSupported).
import net from 'node:net';
import { crc32c as refCrc } from '@node-rs/crc32';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, listen, openDevice, Opcode, SabreError, WcOpcode, WcStatus, type Device, type QueuePair } from '../../../src/index.js';
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

async function setup() {
  const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
  devs.push(dev);
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 256 });
  const mr = pd.regMr(256 * 1024, ALL);
  const l = listen(dev, { pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 4 } });
  const raw = await rawPeer(dev.address.port as number);
  // Revision-2 Reply, CRC on, and no sabre block after the IRD/ORD word.
  expect([...raw.reply.subarray(0, 16)]).toEqual([...new TextEncoder().encode('MPA ID Rep Frame')]);
  expect(raw.reply[16]! & 0x40).toBe(0x40);
  expect(raw.reply[17]).toBe(2);
  const qp: QueuePair = await l.accept(5000);
  return { dev, pd, cq, mr, qp, raw };
}

describe('sabre with a standard iWARP peer (no sabre block in the MPA exchange)', () => {
  it('RdmaRead, one source and one sink: one RFC 5040 Read Request; completes on the Read Response with L', async () => {
    const { cq, mr, qp, raw } = await setup();
    const sinkTo = mr.addr + 4096;
    qp.postSend({ wrId: 7, opcode: Opcode.RdmaRead, sgList: [{ addr: sinkTo, length: 100, lkey: mr.lkey }], remoteAddr: 0x1_0000_2000, rkey: 0xaabbccdd });
    const req = readRequest(1, mr.lkey, sinkTo, 100, 0xaabbccdd, 0x1_0000_2000);
    expect(req.length).toBe(52); // 2 + 18 + 28 + CRC 4, no pad
    expect([...(await raw.read(req.length))]).toEqual([...req]);

    const data = Uint8Array.from({ length: 100 }, (_, i) => (i * 7 + 3) & 0xff);
    raw.s.write(cat(readResponse(false, mr.lkey, sinkTo, data.subarray(0, 60)), readResponse(true, mr.lkey, sinkTo + 60, data.subarray(60))));
    expect(await take(cq, 1)).toMatchObject([{ wrId: 7, status: WcStatus.Success, opcode: WcOpcode.RdmaRead, byteLen: 100 }]);
    expect([...mr.buffer.subarray(4096, 4196)]).toEqual([...data]);
    expect(raw.pending).toBe(0); // no ack, no ReadComplete, nothing of sabre's own
  });

  it('RdmaRead with several sources and sinks: one RFC Read Request per (source, sink) piece; completes after the last response', async () => {
    const { cq, mr, qp, raw } = await setup();
    const a = mr.addr;
    const b = mr.addr + 1000;
    qp.postSend({
      wrId: 9, opcode: Opcode.RdmaRead,
      sgList: [{ addr: a, length: 50, lkey: mr.lkey }, { addr: b, length: 30, lkey: mr.lkey }],
      remoteSgList: [{ addr: 0x7000, length: 30, rkey: 0x11 }, { addr: 0x9000, length: 50, rkey: 0x22 }],
    });
    // source 1 (30) → sink 1 [0,30); source 2 (50) → sink 1 [30,50) then sink 2 [0,30)
    const reqs = [
      readRequest(1, mr.lkey, a, 30, 0x11, 0x7000),
      readRequest(2, mr.lkey, a + 30, 20, 0x22, 0x9000),
      readRequest(3, mr.lkey, b, 30, 0x22, 0x9000 + 20),
    ];
    expect([...(await raw.read(52 * 3))]).toEqual([...cat(...reqs)]);
    const src = Uint8Array.from({ length: 80 }, (_, i) => 200 - i);
    raw.s.write(cat(readResponse(true, mr.lkey, a, src.subarray(0, 30)), readResponse(true, mr.lkey, a + 30, src.subarray(30, 50))));
    // A Read Request of ours behind them: once its answer is back, sabre has processed both
    // responses (one stream, in order) — and the read must still be outstanding.
    raw.s.write(readRequest(1, 0x55, 0, 0, mr.rkey, mr.addr + 8192));
    expect([...(await raw.read(20))]).toEqual([...readResponse(true, 0x55, 0, new Uint8Array(0))]);
    expect(cq.poll(4)).toEqual([]);
    raw.s.write(readResponse(true, mr.lkey, b, src.subarray(50)));
    expect(await take(cq, 1)).toMatchObject([{ wrId: 9, status: WcStatus.Success, opcode: WcOpcode.RdmaRead, byteLen: 80 }]);
    expect([...mr.buffer.subarray(0, 50), ...mr.buffer.subarray(1000, 1030)]).toEqual([...src]);
  });

  it("the peer's RFC Read Request is answered with Read Response FPDUs only (L on the last), no ReadComplete", async () => {
    const { mr, raw } = await setup();
    for (let i = 0; i < mr.length; i++) mr.buffer[i] = (i * 13 + 5) & 0xff;
    // 100 bytes: one segment; 70000 bytes: 49152 + 20848 (sabre's segment size on loopback).
    raw.s.write(readRequest(1, 0x1234, 0x5000, 100, mr.rkey, mr.addr + 200));
    const r1 = readResponse(true, 0x1234, 0x5000, mr.buffer.subarray(200, 300));
    expect([...(await raw.read(r1.length))]).toEqual([...r1]);
    raw.s.write(readRequest(2, 0x4321, 0x10_0000_0000, 70000, mr.rkey, mr.addr + 1));
    const want = cat(
      readResponse(false, 0x4321, 0x10_0000_0000, mr.buffer.subarray(1, 1 + 49152)),
      readResponse(true, 0x4321, 0x10_0000_0000 + 49152, mr.buffer.subarray(1 + 49152, 1 + 70000)),
    );
    const got = await raw.read(want.length);
    expect(Buffer.compare(Buffer.from(got), Buffer.from(want))).toBe(0);
    // Nothing else follows: the next bytes are the answer to the next request.
    raw.s.write(readRequest(3, 0x99, 0x40, 8, mr.rkey, mr.addr));
    const r3 = readResponse(true, 0x99, 0x40, mr.buffer.subarray(0, 8));
    expect([...(await raw.read(r3.length))]).toEqual([...r3]);
    expect(raw.pending).toBe(0);
  });

  it('RdmaWrite arrives as RFC tagged FPDUs (CRC32C checked), RdmaWriteWithImm as RFC 7306 Immediate Data; both complete once written to the socket (no acks)', async () => {
    const { cq, mr, qp, raw } = await setup();
    for (let i = 0; i < 70000; i++) mr.buffer[i] = (i * 31 + 1) & 0xff;
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: mr.addr, length: 70000, lkey: mr.lkey }], remoteAddr: 0x2_0000_0000, rkey: 0xdeadbeef });
    const w = cat(
      fpdu(cat(tagged(false, 0, 0xdeadbeef, 0x2_0000_0000), mr.buffer.subarray(0, 49152))),
      fpdu(cat(tagged(true, 0, 0xdeadbeef, 0x2_0000_0000 + 49152), mr.buffer.subarray(49152, 70000))),
    );
    const got = await raw.read(w.length);
    expect(Buffer.compare(Buffer.from(got), Buffer.from(w))).toBe(0);
    expect(await take(cq, 1)).toMatchObject([{ wrId: 1, status: WcStatus.Success, opcode: WcOpcode.RdmaWrite, byteLen: 70000 }]);

    qp.postSend({ wrId: 2, opcode: Opcode.RdmaWriteWithImm, imm: 0xcafe0001, sgList: [{ addr: mr.addr, length: 16, lkey: mr.lkey }], remoteAddr: 0x300, rkey: 0x77 });
    // RFC 7306: Immediate Data is untagged opcode 8 on QN 0 (MSN 1: the first message of that queue), 8 bytes.
    const wi = cat(
      fpdu(cat(tagged(true, 0, 0x77, 0x300), mr.buffer.subarray(0, 16))),
      fpdu(cat(untagged(true, 8, 0, 1, 0), Uint8Array.of(...be32(0xcafe0001), ...be32(16)))),
    );
    expect([...(await raw.read(wi.length))]).toEqual([...wi]);
    expect(await take(cq, 1)).toMatchObject([{ wrId: 2, status: WcStatus.Success, opcode: WcOpcode.RdmaWrite }]);
    expect(raw.pending).toBe(0);
  });

  it('SendWithImm to a standard peer is refused at post time (NotSupported), nothing goes on the wire', async () => {
    const { mr, qp, raw } = await setup();
    let err: unknown;
    try {
      qp.postSend({ wrId: 3, opcode: Opcode.SendWithImm, imm: 1, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SabreError);
    expect((err as SabreError).code).toBe(ErrorCode.NotSupported);
    // A plain Send still works and is the first thing on the stream: opcode 3, QN 0, MSN 1.
    qp.postSend({ wrId: 4, opcode: Opcode.Send, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] });
    const s = fpdu(cat(untagged(true, 3, 0, 1, 0), mr.buffer.subarray(0, 8)));
    expect([...(await raw.read(s.length))]).toEqual([...s]);
  });
});
