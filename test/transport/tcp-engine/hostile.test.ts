// Hostile and failing peers against a tcp device: a raw node:net client speaks MPA (as a
// standard iWARP initiator, reaching the device's rdma_cm listener), then sends a bad-CRC FPDU,
// an unknown opcode or a bad DDP version → the exact Terminate bytes come back, then a FIN;
// the accepted QP goes to ERROR with its work flushed; the device keeps serving others. And a
// peer process killed mid-transfer → every outstanding work request completes (an error
// status, not a hang), within a bounded time.
import net from 'node:net';
import { crc32c as refCrc } from '@node-rs/crc32';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Access, connect, listen, openDevice, Opcode, QpState, WcStatus, type CmListener, type Device } from '../../../src/index.js';
import { ALL, openLocal, startPeer, take, type RemoteMr } from './helpers.js';

const devs: Device[] = [];
afterEach(async () => {
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

/** An FPDU around `ulpdu` with a correct CRC32C (independent implementation). */
function fpdu(ulpdu: Uint8Array, corrupt = false): Uint8Array {
  const pad = (4 - ((2 + ulpdu.length) & 3)) & 3;
  const body = cat(Uint8Array.of(ulpdu.length >> 8, ulpdu.length & 0xff), ulpdu, new Uint8Array(pad));
  const crc = (refCrc(Buffer.from(body)) ^ (corrupt ? 0x01 : 0)) >>> 0;
  return cat(body, Uint8Array.of(crc & 0xff, (crc >>> 8) & 0xff, (crc >>> 16) & 0xff, crc >>> 24));
}

/** Untagged DDP header: ctrl0 (T/L/DV), ctrl1 (RV/opcode), RsvdULP, QN, MSN, MO. */
const untagged = (c0: number, c1: number, qn: number, msn: number, mo: number): Uint8Array => {
  const b = new Uint8Array(18);
  const dv = new DataView(b.buffer);
  b[0] = c0;
  b[1] = c1;
  dv.setUint32(6, qn);
  dv.setUint32(10, msn);
  dv.setUint32(14, mo);
  return b;
};

/** A standard MPA v2 initiator on a raw socket (no sabre private data), CRC on. */
async function rawInitiator(port: number) {
  const s = net.connect({ host: '127.0.0.1', port });
  s.on('error', () => {});
  await new Promise((r) => s.once('connect', r));
  s.write(cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10)));
  let buf: Uint8Array = new Uint8Array(0);
  let ended = false;
  const waiters: Array<() => void> = [];
  s.on('data', (d: Buffer) => {
    buf = cat(buf, d);
    for (const w of waiters.splice(0)) w();
  });
  s.on('close', () => {
    ended = true;
    for (const w of waiters.splice(0)) w();
  });
  const until = async (pred: () => boolean, ms = 5000) => {
    const t0 = Date.now();
    while (!pred()) {
      if (Date.now() - t0 > ms) throw new Error('raw client: timed out');
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 50);
      });
    }
  };
  await until(() => buf.length >= 20);
  const frameLen = 20 + ((buf[18]! << 8) | buf[19]!);
  await until(() => buf.length >= frameLen);
  const reply = buf.slice(0, frameLen);
  buf = buf.slice(frameLen);
  return { s, reply, until, get rest() { return buf; }, get ended() { return ended; } };
}

/** The Terminate FPDU a device sends for (layer, etype, ecode), with no header copy: MSN 1, QN 2. */
function expectedTerminate(layerEtype: number, ecode: number): number[] {
  const ulpdu = cat(untagged(0x41, 0x47, 2, 1, 0), Uint8Array.of(layerEtype, ecode, 0, 0));
  return [...fpdu(ulpdu)];
}

async function server() {
  const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
  devs.push(dev);
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 256 });
  const mr = pd.regMr(65536, ALL);
  let n = 0;
  const l: CmListener = listen(dev, {
    pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 },
    setup: (qp) => qp.postRecv({ wrId: 100 + n++, sgList: [{ addr: mr.addr, length: 4096, lkey: mr.lkey }] }),
  });
  return { dev, pd, cq, mr, l };
}

describe('malformed streams from a raw MPA client → Terminate, clean close, device keeps serving', () => {
  const cases: { name: string; wire: () => Uint8Array; term: number[] }[] = [
    {
      name: 'bad CRC (LLP / MPA / CRC error)',
      wire: () => fpdu(cat(untagged(0x41, 0x43, 0, 1, 0), Uint8Array.of(1, 2, 3, 4)), true),
      term: expectedTerminate(0x20, 0x02),
    },
    {
      name: 'unknown opcode: a tagged Send (RDMAP / remote operation / opcode)',
      wire: () => fpdu(cat(Uint8Array.of(0xc1, 0x43, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0), Uint8Array.of(9, 9, 9, 9))),
      term: expectedTerminate(0x02, 0x06),
    },
    {
      name: 'opcode 15 from a peer that is not sabre (RDMAP / remote operation / opcode)',
      wire: () => fpdu(cat(untagged(0x41, 0x4f, 0, 0, 0), new Uint8Array(8))),
      term: expectedTerminate(0x02, 0x06),
    },
    {
      name: "sabre's ReadRequestV (opcode 13) from a peer that is not sabre (RDMAP / remote operation / opcode)",
      wire: () => fpdu(cat(untagged(0x41, 0x4d, 1, 1, 0), new Uint8Array(40))),
      term: expectedTerminate(0x02, 0x06),
    },
    {
      name: 'bad DDP version in an untagged segment (DDP / untagged buffer / version)',
      wire: () => fpdu(cat(untagged(0x40, 0x43, 0, 1, 0), Uint8Array.of(1, 2, 3, 4))),
      term: expectedTerminate(0x12, 0x06),
    },
    {
      name: 'wrong MO in a Send (DDP / untagged buffer / invalid MO)',
      wire: () => fpdu(cat(untagged(0x41, 0x43, 0, 1, 8), Uint8Array.of(1, 2, 3, 4))),
      term: expectedTerminate(0x12, 0x04),
    },
  ];

  it.each(cases)('$name', async ({ wire, term }) => {
    const s = await server();
    const raw = await rawInitiator(s.dev.address.port as number);
    expect(raw.reply[16]! & 0x40).toBe(0x40); // CRC on in the reply
    const qp = await s.l.accept(5000);
    expect(qp.state).toBe(QpState.Rts);
    raw.s.write(wire());
    await raw.until(() => raw.ended);
    expect([...raw.rest]).toEqual(term);
    // The accepted QP failed: its posted receive flushed.
    expect(await take(s.cq, 1, 5000)).toMatchObject([{ wrId: 100, status: WcStatus.WrFlushErr }]);
    expect(qp.state).toBe(QpState.Error);

    // The device keeps serving: a sabre client connects through the same listener and writes.
    const c = await openLocal();
    devs.push(c);
    const cpd = c.allocPd();
    const ccq = c.createCq({ depth: 16 });
    const cqp = await connect(c, s.dev.address, { pd: cpd, qpInit: { sendCq: ccq, recvCq: ccq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 } });
    const src = cpd.regMr(256, Access.LocalWrite);
    src.buffer.fill(0x77);
    cqp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 256, lkey: src.lkey }], remoteAddr: s.mr.addr + 8192, rkey: s.mr.rkey });
    expect(await take(ccq, 1)).toMatchObject([{ wrId: 1, status: WcStatus.Success }]);
    expect(s.mr.buffer.subarray(8192, 8192 + 256).every((x) => x === 0x77)).toBe(true);
  });

  it('garbage, truncated FPDUs and a garbage FPDU (bad CRC) do not crash the device', async () => {
    const s = await server();
    for (const bytes of [Uint8Array.of(0xff, 0xff, 1, 2, 3), Uint8Array.of(0x00), new Uint8Array(600).fill(0xaa), Uint8Array.of(0, 2, 0xaa, 0xaa, 1, 2, 3, 4)]) {
      const raw = await rawInitiator(s.dev.address.port as number);
      raw.s.end(bytes);
      await raw.until(() => raw.ended);
    }
    await vi.waitFor(() => expect(s.dev.stats().link!.streamFaults).toBeGreaterThan(0));
    expect(s.dev.closed).toBe(false);
  });
});

describe('a peer killed mid-transfer', () => {
  it('outstanding work completes with an error status, bounded in time', async () => {
    const peer = await startPeer();
    const dev = await openLocal();
    devs.push(dev);
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 4096 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1024, maxRecvWr: 16, maxSge: 1 });
    const r = await peer.call<{ h: number; qpn: number }>('qp', { type: 'rc' });
    await Promise.all([
      qp.connect({ address: { ...peer.address }, qpn: r.qpn }),
      peer.call('connect', { qp: r.h, address: JSON.parse(JSON.stringify(dev.address)), qpn: qp.qpn }),
    ]);
    const N = 256;
    const LEN = 256 * 1024;
    const dst = await peer.call<RemoteMr>('mr', { length: 64 * LEN, access: ALL });
    const src = pd.regMr(LEN, ALL);
    qp.postRecv({ wrId: 99n, sgList: [] });
    const post = (i: number) =>
      qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: LEN, lkey: src.lkey }], remoteAddr: dst.addr + (i % 64) * LEN, rkey: dst.rkey });
    post(0);
    const first = await take(cq, 1);
    expect(first[0]).toMatchObject({ wrId: 0, status: WcStatus.Success });
    // The rest go to a peer frozen before it can take them, so they are outstanding when it dies
    // however fast this machine is (posted to a live peer, a fast run finished them all first).
    peer.proc.kill('SIGSTOP');
    for (let i = 1; i < N; i++) post(i);
    await peer.kill();
    const rest = await take(cq, N, 10_000); // N - 1 writes + the receive
    const sends = rest.filter((w) => typeof w.wrId === 'number');
    const recvs = rest.filter((w) => typeof w.wrId === 'bigint');
    expect(sends.length).toBe(N - 1);
    const firstBad = sends.findIndex((w) => w.status !== WcStatus.Success);
    expect(firstBad).toBeGreaterThanOrEqual(0);
    expect(sends[firstBad]!.status).toBe(WcStatus.RetryExcErr);
    expect(sends.slice(firstBad + 1).every((w) => w.status === WcStatus.WrFlushErr)).toBe(true);
    expect(recvs).toMatchObject([{ wrId: 99n, status: WcStatus.WrFlushErr }]);
    expect(qp.state).toBe(QpState.Error);
  });
});
