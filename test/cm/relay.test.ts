// rdma_cm-style connect to a listener behind a lossy relay (test/relay.ts): the client only
// knows the relay's address, and the listener sees the client at the relay's upstream socket
// for it (a NAT-like mapping) — never at the address the client itself has. The listener must
// answer and connect to where the REQ came from, as the link observed it; then writes, reads
// and sends flow both ways through the relay, byte-exact, while it drops, duplicates, corrupts
// and reorders datagrams.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, connect, connectionInfo, listen, openDevice, Opcode, QpState, WcOpcode, WcStatus, type Device } from '../../src/index.js';
import { startUdpRelay, type UdpRelay } from '../relay.js';
import { fill, take } from '../verbs/helpers.js';

const devs: Device[] = [];
const relays: UdpRelay[] = [];
afterEach(async () => {
  for (const r of relays.splice(0)) await r.close();
  for (const d of devs.splice(0)) await d.close();
});

const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite;
const te = new TextEncoder();
const td = new TextDecoder();

describe('cm through a relay (udp)', () => {
  it('connect(dev, relay.address): the listener replies to and connects with the address the REQ came from', async () => {
    const server = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, mtu: 9000 });
    const client = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, mtu: 9000 });
    devs.push(server, client);
    const relay = await startUdpRelay({
      target: { host: '127.0.0.1', port: server.address.port as number },
      drop: 0.02, dup: 0.02, corrupt: 0.01, reorder: 0.02, reorderMs: 3, seed: 11,
    });
    relays.push(relay);
    const sp = server.allocPd();
    const cp = client.allocPd();
    const scq = server.createCq({ depth: 256 });
    const ccq = client.createCq({ depth: 256 });
    const smr = sp.regMr(1 << 18, ALL);
    const cmr = cp.regMr(1 << 18, ALL);
    const l = listen(server, {
      pd: sp, qpInit: { sendCq: scq, recvCq: scq, maxSendWr: 64, maxRecvWr: 16, maxSge: 1 }, service: 12, privateData: te.encode('behind the relay'),
      setup: (qp) => qp.postRecv({ wrId: 500, sgList: [{ addr: smr.addr, length: 4096, lkey: smr.lkey }] }),
    });
    const [qpC, qpS] = await Promise.all([
      connect(client, relay.address, { pd: cp, qpInit: { sendCq: ccq, recvCq: ccq, maxSendWr: 64, maxRecvWr: 16, maxSge: 1 }, service: 12, privateData: te.encode('via relay'), timeoutMs: 15_000 }),
      l.accept(15_000),
    ]);
    expect(qpC.state).toBe(QpState.Rts);
    expect(qpS.state).toBe(QpState.Rts);
    expect(td.decode(connectionInfo(qpS)!.privateData)).toBe('via relay');
    expect(td.decode(connectionInfo(qpC)!.privateData)).toBe('behind the relay');
    // The listener names the client by where it reaches it: the relay, not the client's own address.
    expect(connectionInfo(qpC)!.peer).toEqual(relay.address);
    expect(connectionInfo(qpS)!.peer).not.toEqual(client.address);

    // Client → server: writes into the server's region, then a send into its posted receive.
    fill(cmr.buffer, 21);
    const N = 16;
    const SZ = 8192;
    for (let i = 0; i < N; i++) {
      qpC.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: cmr.addr + i * SZ, length: SZ, lkey: cmr.lkey }], remoteAddr: smr.addr + 65536 + i * SZ, rkey: smr.rkey });
    }
    qpC.postSend({ wrId: 100, opcode: Opcode.Send, sgList: [{ addr: cmr.addr, length: 300, lkey: cmr.lkey }] });
    expect((await take(ccq, N + 1, 20_000)).map((w) => w.status)).toEqual(new Array(N + 1).fill(WcStatus.Success));
    expect(Buffer.from(smr.buffer.subarray(65536, 65536 + N * SZ)).equals(Buffer.from(cmr.buffer.subarray(0, N * SZ)))).toBe(true);
    expect(await take(scq, 1, 20_000)).toMatchObject([{ wrId: 500, status: WcStatus.Success, opcode: WcOpcode.Recv, byteLen: 300 }]);

    // Server → client: the accepted QP reads back from the client through the relay.
    qpS.postSend({ wrId: 7, opcode: Opcode.RdmaRead, sgList: [{ addr: smr.addr + 200_000, length: SZ, lkey: smr.lkey }], remoteAddr: cmr.addr + SZ, rkey: cmr.rkey });
    expect(await take(scq, 1, 20_000)).toMatchObject([{ wrId: 7, status: WcStatus.Success, byteLen: SZ }]);
    expect(Buffer.from(smr.buffer.subarray(200_000, 200_000 + SZ)).equals(Buffer.from(cmr.buffer.subarray(SZ, 2 * SZ)))).toBe(true);
    expect(relay.stats.forwarded).toBeGreaterThan(N);
  });

  it('a full backlog whose last busy answer is lost still ends as "backlog stayed full" (ERR_TIMEOUT), not as no answer', async () => {
    const server = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const client = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(server, client);
    // The listener's busy answers, seen on the path (a CM REJ carries its JSON in the clear).
    let busy = 0;
    const relay = await startUdpRelay({
      target: { host: '127.0.0.1', port: server.address.port as number },
      seed: 5,
      tap: (msg, toServer) => void (!toServer && msg.includes('"busy":true') && busy++),
    });
    relays.push(relay);
    const sp = server.allocPd();
    const cp = client.allocPd();
    const scq = server.createCq({ depth: 64 });
    const ccq = client.createCq({ depth: 64 });
    const init = (cq: typeof scq) => ({ sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
    listen(server, { pd: sp, qpInit: init(scq), service: 13, backlog: 1 });
    await connect(client, relay.address, { pd: cp, qpInit: init(ccq), service: 13, timeoutMs: 15_000 });
    expect(busy).toBe(0);
    const p = connect(client, relay.address, { pd: cp, qpInit: init(ccq), service: 13, timeoutMs: 1500 }).catch((e: unknown) => e);
    // The listener has said it is busy at least once; then its answers stop coming (a partition).
    await new Promise((r) => setTimeout(r, 400));
    relay.pause();
    expect(busy).toBeGreaterThan(0);
    expect(await p).toMatchObject({ code: 'ERR_TIMEOUT', message: expect.stringMatching(/backlog stayed full/) });
    relay.resume();
  });
});
