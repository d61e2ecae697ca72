// MPA's CRC negotiated as RFC 5044 §7.1 says (docs/integrity.md): CRC is used when EITHER side
// asks; the responder MUST set C in its reply when the request had it, and MAY set it on its own.
// A raw MPA peer written here (not sabre: no sabre block in its private data) sends C=0 / C=1 as
// initiator and replies C=0 / C=1 as responder, against sabre configured as openDevice
// configures it for integrity 'crc32c' (asks for CRC) and 'none' (does not); the reply's C bit
// and the FPDUs sabre then sends (a real CRC32C trailer, or zeros) are checked byte by byte. And
// two tcp devices settle the same way, counted in dev.stats().link (mpaCrcOn / mpaCrcOff).
import net from 'node:net';
import { crc32c as refCrc } from '@node-rs/crc32';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { MpaConnector } from '../../../src/transport/tcp/connector.js';
import { Access, Opcode, openDevice, WcStatus } from '../../../src/index.js';
import { take } from '../../verbs/helpers.js';

let dm: DeviceMemory;
const endpoints: MpaConnector[] = [];
const sockets: net.Socket[] = [];
const servers: net.Server[] = [];

beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 64 << 20, regionEntries: 16, workerSlots: 0 });
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
  await Promise.all(endpoints.map((e) => e.close()));
});

const cat = (a: Uint8Array, b: Uint8Array) => {
  const o = new Uint8Array(a.length + b.length);
  o.set(a);
  o.set(b, a.length);
  return o;
};
const REQ_KEY = new TextEncoder().encode('MPA ID Req Frame');
const REP_KEY = new TextEncoder().encode('MPA ID Rep Frame');
/** A v2 frame: flags (M 0x80, C 0x40, R 0x20, H 0x10), rev 2, 4 bytes of private data (the IRD/ORD word, 16/16). */
const frame = (key: Uint8Array, crc: boolean) => Uint8Array.from([...key, crc ? 0x50 : 0x10, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10]);

/** A byte reader over a raw socket. */
function reader(s: net.Socket) {
  let buf = new Uint8Array(0);
  const waiters: Array<() => void> = [];
  s.on('data', (d: Buffer) => {
    buf = cat(buf, d);
    for (const w of waiters.splice(0)) w();
  });
  s.on('error', () => {});
  return {
    async read(n: number): Promise<Uint8Array> {
      const deadline = Date.now() + 5000;
      while (buf.length < n) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} bytes (have ${buf.length})`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 100);
        });
      }
      const out = buf.slice(0, n);
      buf = buf.slice(n);
      return out;
    },
  };
}

// An untagged Send: DDP control (L, untagged, DV 1) + RDMAP (Send 3), QN 0, MSN 1, MO 0, then 6 payload bytes.
const SEND_HDR = Uint8Array.of(0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0);
const PAYLOAD = Uint8Array.of(1, 2, 3, 4, 5, 6);

/** Read one FPDU of SEND_HDR + PAYLOAD (no markers) and say whether its trailer is the CRC32C or zero. */
async function readFpdu(r: ReturnType<typeof reader>): Promise<'crc' | 'zero'> {
  const ulpdu = SEND_HDR.length + PAYLOAD.length;
  const pad = (4 - ((2 + ulpdu) % 4)) % 4;
  const body = await r.read(2 + ulpdu + pad);
  expect((body[0]! << 8) | body[1]!).toBe(ulpdu);
  expect([...body.subarray(2, 2 + ulpdu)]).toEqual([...SEND_HDR, ...PAYLOAD]);
  const t = await r.read(4);
  const v = (t[0]! | (t[1]! << 8) | (t[2]! << 16) | (t[3]! << 24)) >>> 0;
  if (v === 0) return 'zero';
  expect(v).toBe(refCrc(Buffer.from(body)));
  return 'crc';
}

/** An FPDU from the raw peer, with a real CRC or a zero trailer. */
function fpdu(withCrc: boolean): Uint8Array {
  const ulpdu = cat(SEND_HDR, PAYLOAD);
  const pad = (4 - ((2 + ulpdu.length) % 4)) % 4;
  const body = new Uint8Array(2 + ulpdu.length + pad);
  body[0] = ulpdu.length >> 8;
  body[1] = ulpdu.length & 0xff;
  body.set(ulpdu, 2);
  const crc = withCrc ? refCrc(Buffer.from(body)) : 0;
  return cat(body, Uint8Array.of(crc & 0xff, (crc >>> 8) & 0xff, (crc >>> 16) & 0xff, crc >>> 24));
}

describe('MPA CRC with a standard (non-sabre) peer, as openDevice configures it', () => {
  for (const sabreAsks of [true, false]) {
    for (const peerAsks of [true, false]) {
      const used = sabreAsks || peerAsks;
      it(`sabre ${sabreAsks ? 'crc32c' : 'none'} responding to a raw request C=${peerAsks ? 1 : 0}: reply C=${used ? 1 : 0}, FPDUs ${used ? 'with' : 'without'} CRC both ways`, async () => {
        const b = await MpaConnector.listen({ dp: dm, connection: { mpa: { crc: sabreAsks } } });
        endpoints.push(b);
        const got: Uint8Array[] = [];
        const conn = new Promise<import('../../../src/transport/tcp/connection.js').MpaConnection>((resolve) => {
          b.onConnectRequest((req) => {
            void req.accept(7).then((c) => {
              c.onUlpdus((batch, u8) => {
                for (const u of batch) got.push(u8.slice(u.ptr, u.ptr + u.len));
              });
              resolve(c);
            });
          });
        });
        const s = net.connect({ host: '127.0.0.1', port: b.address.port });
        sockets.push(s);
        await new Promise((r) => s.once('connect', r));
        const r = reader(s);
        s.write(frame(REQ_KEY, peerAsks));
        const reply = await r.read(24);
        expect([...reply.subarray(0, 16)]).toEqual([...REP_KEY]);
        expect((reply[16]! & 0x40) !== 0).toBe(used);
        const c = await conn;
        expect(c.result?.crc).toBe(used);
        // sabre → peer: the trailer is a real CRC32C exactly when CRC was negotiated.
        c.send(SEND_HDR, [PAYLOAD]);
        expect(await readFpdu(r)).toBe(used ? 'crc' : 'zero');
        // peer → sabre: a correctly framed FPDU is taken.
        s.write(fpdu(used));
        const deadline = Date.now() + 5000;
        while (got.length === 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 10));
        expect(got.map((g) => [...g])).toEqual([[...SEND_HDR, ...PAYLOAD]]);
      });
    }
  }

  for (const sabreAsks of [true, false]) {
    for (const peerReplies of [true, false]) {
      const refused = sabreAsks && !peerReplies;
      it(`sabre ${sabreAsks ? 'crc32c' : 'none'} initiating to a raw responder replying C=${peerReplies ? 1 : 0}: ${refused ? 'refused (RFC 5044: C MUST be echoed)' : `CRC ${peerReplies ? 'on' : 'off'}`}`, async () => {
        const a = await MpaConnector.listen({ dp: dm, connection: { mpa: { crc: sabreAsks } }, connectTimeoutMs: 3000 });
        endpoints.push(a);
        let peer!: net.Socket;
        let p!: ReturnType<MpaConnector['connectQp']>;
        const accepted = new Promise<void>((res) => {
          const srv = net.createServer((sock) => {
            peer = sock;
            sockets.push(sock);
            res();
          });
          servers.push(srv);
          srv.listen(0, '127.0.0.1', () => {
            const port = (srv.address() as net.AddressInfo).port;
            p = a.connectQp(1, { address: { transport: 'tcp', host: '127.0.0.1', port }, qpn: 2 });
            p.catch(() => {});
          });
        });
        await accepted;
        const r = reader(peer);
        const req = await r.read(20);
        expect([...req.subarray(0, 16)]).toEqual([...REQ_KEY]);
        expect((req[16]! & 0x40) !== 0).toBe(sabreAsks);
        await r.read((req[18]! << 8) | req[19]!); // its private data (IRD/ORD word + sabre block)
        peer.write(frame(REP_KEY, peerReplies));
        if (refused) {
          await expect(p).rejects.toThrow();
          return;
        }
        const c = await p;
        expect(c.result?.crc).toBe(peerReplies);
        c.send(SEND_HDR, [PAYLOAD]);
        expect(await readFpdu(r)).toBe(peerReplies ? 'crc' : 'zero');
      });
    }
  }
});

describe('tcp devices: integrity crc32c | none', () => {
  it.each([
    ['none', 'none', false], ['none', 'crc32c', true], ['crc32c', 'none', true], ['crc32c', 'crc32c', true],
  ] as const)('devices asking %s and %s: CRC %s, counted in stats(), a write exact', async (wa, wb, on) => {
    const a = await openDevice({ transport: 'tcp', integrity: wa });
    const b = await openDevice({ transport: 'tcp', integrity: wb });
    try {
      const pdA = a.allocPd();
      const pdB = b.allocPd();
      const cqA = a.createCq({ depth: 16 });
      const cqB = b.createCq({ depth: 16 });
      const qpA = pdA.createQp({ type: 'rc', sendCq: cqA, recvCq: cqA, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
      const qpB = pdB.createQp({ type: 'rc', sendCq: cqB, recvCq: cqB, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
      await Promise.all([qpA.connect({ address: b.address, qpn: qpB.qpn }), qpB.connect({ address: a.address, qpn: qpA.qpn })]);
      const N = 100_000;
      const src = pdA.regMr(N, Access.LocalWrite);
      const dst = pdB.regMr(N, Access.LocalWrite | Access.RemoteWrite);
      for (let i = 0; i < N; i++) src.buffer[i] = (i * 13) & 0xff;
      qpA.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: N, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
      expect((await take(cqA, 1, 10_000)).map((w) => w.status)).toEqual([WcStatus.Success]);
      expect(Buffer.from(dst.buffer).equals(Buffer.from(src.buffer))).toBe(true);
      expect(a.integrity).toBe(wa);
      for (const d of [a, b]) expect(d.stats().link).toMatchObject(on ? { mpaCrcOn: 1, mpaCrcOff: 0 } : { mpaCrcOn: 0, mpaCrcOff: 1 });
    } finally {
      await a.close();
      await b.close();
    }
  });
});
