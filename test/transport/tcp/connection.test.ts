// Real sockets on 127.0.0.1: two endpoints, one MPA connection per rc QP pair, every RDMAP
// opcode carried both ways with the ULPDU bytes compared, the initiator rule under simultaneous
// connects, crossing connects, and malformed streams answered with a Terminate and a close.
import net from 'node:net';
import { crc32c as refCrc } from '@node-rs/crc32';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import {
  encodeAtomicRequest, encodeAtomicResponse, encodeDdp, encodeImmediateData, encodeReadComplete, encodeReadRequest,
  encodeReadRequestV, encodeTerminate, RdmapOpcode, type DdpHdr,
} from '../../../src/wire/rdmap.js';
import { MpaConnection } from '../../../src/transport/tcp/connection.js';
import { MpaConnector, type TcpAddress } from '../../../src/transport/tcp/connector.js';

let dmA: DeviceMemory;
let dmB: DeviceMemory;
const endpoints: MpaConnector[] = [];

beforeAll(async () => {
  dmA = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 64 << 20, regionEntries: 16, workerSlots: 0 });
  dmB = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 64 << 20, regionEntries: 16, workerSlots: 0 });
});
afterAll(async () => {
  await Promise.all(endpoints.map((e) => e.close()));
});

async function ep(dm: DeviceMemory, opts: Partial<Parameters<typeof MpaConnector.listen>[0]> = {}): Promise<MpaConnector> {
  const e = await MpaConnector.listen({ dp: dm, ...opts });
  endpoints.push(e);
  return e;
}

/** Collect ULPDUs (copied) from a connection; resolve once `n` arrived. */
function inbox(c: MpaConnection) {
  const got: Uint8Array[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  c.onUlpdus((batch, u8) => {
    for (const u of batch) got.push(u8.slice(u.ptr, u.ptr + u.len));
    for (const w of waiters.splice(0)) if (got.length >= w.n) w.resolve();
      else waiters.push(w);
  });
  return {
    got,
    until(n: number): Promise<void> {
      if (got.length >= n) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
  };
}

/** One header per RDMAP opcode (RFC 5040 1-7, RFC 7306 8-11, sabre 12-14), with its control payload. */
function allOpcodes(): Array<{ name: string; hdr: Uint8Array; payload: Uint8Array }> {
  const out: Array<{ name: string; hdr: Uint8Array; payload: Uint8Array }> = [];
  const mk = (name: string, h: DdpHdr, ctl: (b: Uint8Array, o: number) => number = () => 0, payloadLen = 0) => {
    const buf = new Uint8Array(18 + 200);
    const n = encodeDdp(h, buf, 0);
    const m = ctl(buf, n);
    const payload = new Uint8Array(payloadLen).map((_, i) => (i * 7 + name.length) & 0xff);
    out.push({ name, hdr: buf.slice(0, n + m), payload });
  };
  const u = (opcode: number, qn: number, ulp = 0) => ({ tagged: false as const, last: true, opcode, ulp, qn, msn: 1, mo: 0 });
  mk('RdmaWrite', { tagged: true, last: true, opcode: RdmapOpcode.RdmaWrite, stag: 0x1234, to: 4096 }, undefined, 3000);
  mk('ReadRequest', u(RdmapOpcode.ReadRequest, 1), (b, o) => encodeReadRequest({ sinkStag: 5, sinkTo: 64, size: 4096, srcStag: 6, srcTo: 128 }, b, o));
  mk('ReadResponse', { tagged: true, last: true, opcode: RdmapOpcode.ReadResponse, stag: 5, to: 64 }, undefined, 777);
  mk('Send', u(RdmapOpcode.Send, 0), undefined, 64);
  mk('SendInv', u(RdmapOpcode.SendInv, 0, 0xabcdef01), undefined, 1);
  mk('SendSe', u(RdmapOpcode.SendSe, 0), undefined, 0);
  mk('SendSeInv', u(RdmapOpcode.SendSeInv, 0, 0x11), undefined, 5);
  mk('Terminate', u(RdmapOpcode.Terminate, 2), (b, o) => encodeTerminate({ layer: 0, etype: 2, ecode: 6 }, b, o));
  mk('ImmediateData', u(RdmapOpcode.ImmediateData, 0), (b, o) => encodeImmediateData({ imm: 0xfeedf00d, len: 12 }, b, o));
  mk('ImmediateDataSe', u(RdmapOpcode.ImmediateDataSe, 0), (b, o) => encodeImmediateData({ imm: 1, len: 0 }, b, o));
  mk('AtomicRequest', u(RdmapOpcode.AtomicRequest, 1), (b, o) =>
    encodeAtomicRequest({ op: 'cmpSwap', reqId: 9, stag: 3, to: 8, addOrSwap: 5n, addOrSwapMask: -1n, compare: 4n, compareMask: -1n }, b, o));
  mk('AtomicResponse', u(RdmapOpcode.AtomicResponse, 3), (b, o) => encodeAtomicResponse({ reqId: 9, value: 0x0102030405060708n }, b, o));
  mk('SendWithImm', u(RdmapOpcode.SendWithImm, 0, 0x77), undefined, 100);
  mk('ReadRequestV', u(RdmapOpcode.ReadRequestV, 1), (b, o) =>
    encodeReadRequestV({ srcs: [{ stag: 1, to: 0, len: 10 }, { stag: 2, to: 64, len: 6 }], sinks: [{ stag: 3, to: 128, len: 16 }] }, b, o));
  mk('ReadComplete', u(RdmapOpcode.ReadComplete, 0), (b, o) => encodeReadComplete({ imm: 4, len: 16 }, b, o));
  return out;
}

const cat = (a: Uint8Array, b: Uint8Array) => {
  const o = new Uint8Array(a.length + b.length);
  o.set(a);
  o.set(b, a.length);
  return o;
};

describe('TCP endpoints on 127.0.0.1', () => {
  it('simultaneous connect: one TCP connection per QP pair, the lower tuple initiates; every opcode both ways, bytes compared', async () => {
    const a = await ep(dmA);
    const b = await ep(dmB);
    const [ca, cb] = await Promise.all([
      a.connectQp(1, { address: b.address, qpn: 2 }),
      b.connectQp(2, { address: a.address, qpn: 1 }),
    ]);
    expect(ca.state).toBe('established');
    expect(cb.state).toBe('established');
    // The same TCP connection, seen from both ends.
    expect(ca.socket.localPort).toBe(cb.socket.remotePort);
    expect(cb.socket.localPort).toBe(ca.socket.remotePort);
    const aInitiates = a.isInitiator(1, b.address, 2);
    expect(aInitiates).toBe(!b.isInitiator(2, a.address, 1));
    expect(ca.role).toBe(aInitiates ? 'initiator' : 'responder');
    // The dial offers the peer-to-peer RTR and a sabre responder takes it (connector.ts #initiate).
    expect(ca.result).toMatchObject({ crc: true, revision: 2, enhanced: true, rtr: 'write' });
    expect(a.connectionCount).toBe(1);
    expect(b.connectionCount).toBe(1);

    const msgs = allOpcodes();
    const ia = inbox(ca);
    const ib = inbox(cb);
    for (const m of msgs) ca.send(m.hdr, [m.payload]);
    for (const m of msgs) cb.send(m.hdr, [m.payload]);
    await Promise.all([ia.until(msgs.length), ib.until(msgs.length)]);
    expect(ib.got).toEqual(msgs.map((m) => cat(m.hdr, m.payload)));
    expect(ia.got).toEqual(msgs.map((m) => cat(m.hdr, m.payload)));
  });

  it('several QP pairs between the same devices: one connection each, ULPDUs stay on their pair', async () => {
    const a = await ep(dmA);
    const b = await ep(dmB);
    const pairs = [[10, 20], [11, 21], [12, 22]] as const;
    const conns = await Promise.all(pairs.flatMap(([x, y]) => [a.connectQp(x, { address: b.address, qpn: y }), b.connectQp(y, { address: a.address, qpn: x })]));
    expect(a.connectionCount).toBe(3);
    expect(b.connectionCount).toBe(3);
    for (let i = 0; i < pairs.length; i++) {
      const [ca, cb] = [conns[2 * i]!, conns[2 * i + 1]!];
      const ib = inbox(cb);
      ca.send(Uint8Array.of(0xc1, 0x40, 0, 0, 0, i, 0, 0, 0, 0, 0, 0, 0, 0));
      await ib.until(1);
      expect(ib.got[0]![5]).toBe(i);
    }
  });

  it('a request that arrives before the local connect call is parked and matched', async () => {
    const a = await ep(dmA);
    const b = await ep(dmB);
    const ini = a.isInitiator(5, b.address, 6) ? { e: a, l: 5, r: b, rq: 6 } : { e: b, l: 6, r: a, rq: 5 };
    const p1 = ini.e.connectQp(ini.l, { address: ini.r.address, qpn: ini.rq });
    await vi.waitFor(() => expect(ini.r.parkedRequests).toBe(1));
    const p2 = ini.r.connectQp(ini.rq, { address: ini.e.address, qpn: ini.l });
    const [c1, c2] = await Promise.all([p1, p2]);
    expect(c1.socket.localPort).toBe(c2.socket.remotePort);
    expect(ini.r.parkedRequests).toBe(0);
  });

  it('crossing connects (both sides believe they initiate) end with one connection', async () => {
    const a = await ep(dmA, { host: '127.0.0.1' });
    const b = await ep(dmB, { host: '0.0.0.0' });
    // A sees B as 127.0.0.2 (same socket, another name): both tuples sort "lower".
    const bAlias: TcpAddress = { transport: 'tcp', host: '127.0.0.2', port: b.address.port };
    expect(a.isInitiator(1, bAlias, 2)).toBe(true);
    expect(b.isInitiator(2, a.address, 1)).toBe(true);
    const [ca, cb] = await Promise.all([a.connectQp(1, { address: bAlias, qpn: 2 }), b.connectQp(2, { address: a.address, qpn: 1 })]);
    expect(ca.socket.localPort).toBe(cb.socket.remotePort);
    const ib = inbox(cb);
    ca.send(Uint8Array.of(0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0), [Uint8Array.of(42)]);
    await ib.until(1);
    expect(ib.got[0]![18]).toBe(42);
  });

  it('markers and CRC-off negotiated over a real socket still carry the bytes', async () => {
    const a = await ep(dmA, { connection: { mpa: { markers: true, crc: false } } });
    const b = await ep(dmB, { connection: { mpa: { markers: true, crc: false } } });
    const [ca, cb] = await Promise.all([a.connectQp(1, { address: b.address, qpn: 2 }), b.connectQp(2, { address: a.address, qpn: 1 })]);
    expect(ca.result).toMatchObject({ crc: false, markersTx: true, markersRx: true });
    const msgs = allOpcodes();
    const ib = inbox(cb);
    for (const m of msgs) ca.send(m.hdr, [m.payload]);
    await ib.until(msgs.length);
    expect(ib.got).toEqual(msgs.map((m) => cat(m.hdr, m.payload)));
  });

  it('backpressure: a peer that stops reading makes send() return false, then drain; every ULPDU arrives intact and in order', async () => {
    const opts = { connection: { highWaterMark: 256 << 10 } };
    const a = await ep(dmA, opts);
    const b = await ep(dmB, opts);
    const [ca, cb] = await Promise.all([a.connectQp(1, { address: b.address, qpn: 2 }), b.connectQp(2, { address: a.address, qpn: 1 })]);
    cb.socket.pause();
    const hdr = (i: number) => {
      const h = new Uint8Array(14);
      encodeDdp({ tagged: true, last: true, opcode: RdmapOpcode.RdmaWrite, stag: 7, to: i * 4096 }, h, 0);
      return h;
    };
    const payload = (i: number) => new Uint8Array(16384).map((_, k) => (k * 13 + i) & 0xff);
    const sent: Uint8Array[] = [];
    let blockedAt = -1;
    // Until the kernel's socket buffers and then our high-water mark are full (bounded: 4096 × 16 KiB).
    for (let i = 0; i < 4096 && blockedAt < 0; i++) {
      const h = hdr(i);
      const p = payload(i);
      sent.push(cat(h, p));
      if (!ca.send(h, [p])) blockedAt = i;
    }
    expect(blockedAt).toBeGreaterThan(0);
    const drained = new Promise<void>((resolve) => ca.once('drain', () => resolve()));
    const ib = inbox(cb);
    cb.socket.resume();
    await drained;
    // After the drain, sending goes on, behind everything queued.
    for (let i = sent.length; i < sent.length + 8; i++) ca.send(hdr(i), [payload(i)]);
    for (let i = sent.length, n = sent.length + 8; i < n; i++) sent.push(cat(hdr(i), payload(i)));
    await ib.until(sent.length);
    expect(ib.got.length).toBe(sent.length);
    for (let i = 0; i < sent.length; i++) if (!Buffer.from(ib.got[i]!).equals(Buffer.from(sent[i]!))) expect.fail(`ULPDU ${i} differs`);
  });

  it('connecting to a QP nobody waits for: rejected with the reason, promise rejects', async () => {
    const a = await ep(dmA);
    const b = await ep(dmB);
    for (const e of [a, b]) e.onConnectRequest((r) => r.reject(`QP ${r.responderQpn} does not exist`));
    // The side that initiates by the tuple rule gets the reject at once; the other initiates after fallbackMs.
    const target = a.isInitiator(1, b.address, 99) ? { e: a, peer: b } : { e: b, peer: a };
    await expect(target.e.connectQp(1, { address: target.peer.address, qpn: 99 })).rejects.toMatchObject({ code: 'ERR_UNREACHABLE', message: expect.stringMatching(/QP 99 does not exist/) });
  });
});

/** Hand-made initiator on a raw socket: sends a v2 request, returns the reply and the rest of the stream. */
async function rawInitiator(port: number, crc: boolean) {
  const s = net.connect({ host: '127.0.0.1', port });
  await new Promise((r) => s.once('connect', r));
  const key = new TextEncoder().encode('MPA ID Req Frame');
  s.write(Uint8Array.from([...key, crc ? 0x50 : 0x10, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10]));
  let buf = new Uint8Array(0);
  let ended = false;
  const waiters: Array<() => void> = [];
  s.on('data', (d: Buffer) => {
    buf = cat(buf, d);
    for (const w of waiters.splice(0)) w();
  });
  s.on('end', () => {
    ended = true;
    for (const w of waiters.splice(0)) w();
  });
  s.on('error', () => {});
  const until = async (pred: () => boolean) => {
    while (!pred()) await new Promise<void>((r) => waiters.push(r));
  };
  await until(() => buf.length >= 20);
  const frameLen = 20 + ((buf[18]! << 8) | buf[19]!);
  await until(() => buf.length >= frameLen);
  const reply = buf.slice(0, frameLen);
  buf = buf.slice(frameLen);
  return { s, reply, until, get rest() { return buf; }, get ended() { return ended; } };
}

describe('malformed streams on a real socket → Terminate, clean close', () => {
  async function acceptingEndpoint() {
    const b = await ep(dmB);
    const failures: unknown[] = [];
    b.onConnectRequest((r) => {
      void r.accept(7).then((c) => c.on('failed', (f) => failures.push(f)));
    });
    return { b, failures };
  }

  it('bad CRC: the peer receives a Terminate FPDU (LLP, MPA, CRC error) and a FIN', async () => {
    const { b, failures } = await acceptingEndpoint();
    const raw = await rawInitiator(b.address.port, true);
    expect(raw.reply[16]! & 0x40).toBe(0x40);
    // A Send FPDU with a wrong CRC.
    const body = Uint8Array.of(0x00, 0x12, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0);
    raw.s.write(cat(body, Uint8Array.of(1, 2, 3, 4)));
    await raw.until(() => raw.ended);
    const t = raw.rest;
    expect(t.length).toBe(2 + 22 + 0 + 4);
    expect([...t.subarray(0, 24)]).toEqual([0x00, 0x16, 0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0x20, 0x02, 0x00, 0x00]);
    const crc = refCrc(t.subarray(0, 24));
    expect([...t.subarray(24)]).toEqual([crc & 0xff, (crc >>> 8) & 0xff, (crc >>> 16) & 0xff, crc >>> 24]);
    expect(failures).toEqual([expect.objectContaining({ code: 'CRC', layer: 2, etype: 0, ecode: 2 })]);
  });

  it('truncated FPDU then close: stream-lost fault, no crash', async () => {
    const { b, failures } = await acceptingEndpoint();
    const raw = await rawInitiator(b.address.port, false);
    raw.s.end(Uint8Array.of(0x00, 0x40, 0x41));
    await raw.until(() => raw.ended);
    await vi.waitFor(() => expect(failures).toEqual([expect.objectContaining({ code: 'TRUNCATED', ecode: 1 })]));
  });

  it('garbage instead of an MPA Request: the socket is closed, the endpoint keeps serving', async () => {
    const b = await ep(dmB);
    const s = net.connect({ host: '127.0.0.1', port: b.address.port });
    s.on('error', () => {});
    s.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((r) => s.once('close', r));
    const a = await ep(dmA);
    const [ca] = await Promise.all([a.connectQp(3, { address: b.address, qpn: 4 }), b.connectQp(4, { address: a.address, qpn: 3 })]);
    expect(ca.state).toBe('established');
  });
});
