// One REQ must never make a device's CM deaf. The REP echoes the REQ's id, and the requester
// writes that number as long as it likes (-2.2250738585072014e-308: 24 characters, against at most
// 15 for the ids sabre draws): with private data that leaves an ordinary REP just under the 1 KiB
// slot, the REP could not be encoded, the throw left the listener's handler, and the CM agent's
// completion loop — the device's whole CM — ended on it, silently: every later connect timed
// out. Also: listen() took private data whose REP can never fit, and a handler that throws ended
// the loop the same way.
import { afterAll, describe, expect, it } from 'vitest';
import { connect, type Device, listen, openDevice } from '../../src/index.js';
import { agentOf } from '../../src/cm/agent.js';
import { rawCm } from './cm-raw.js';

const SERVICE = 81;
type CmStats = { dropped: number; handlerErrors: number };
const cmStats = (d: Device): CmStats => (d.stats() as unknown as { cm: CmStats }).cm;

describe('a REQ that cannot be answered as written', () => {
  const devs: Device[] = [];
  afterAll(async () => {
    for (const d of devs) await d.close();
  });
  const three = async (): Promise<Device[]> => {
    const ds = await Promise.all([0, 1, 2].map(() => openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 })));
    devs.push(...ds);
    return ds;
  };

  it('a REQ whose id is no id sabre draws is dropped and counted; the CM keeps serving', async () => {
    const [srv, client, evil] = await three();
    // 723 bytes: base64 964 characters; a REP with a 15-digit id and a 10-digit QPN fits the slot.
    const l = listen(srv!, { service: SERVICE, privateData: new Uint8Array(723).fill(7) });
    void (async () => {
      for await (const qp of l) qp.destroy();
    })().catch(() => {});
    const first = await connect(client!, srv!.address, { service: SERVICE, timeoutMs: 5000 });
    first.destroy();
    const cm = rawCm(evil!);
    const ids = [-2.2250738585072014e-308, 0, 2 ** 48, 1.5, 2 ** 53 + 2];
    for (const [i, id] of ids.entries()) cm.send(srv!.address, { t: 'req', id, service: SERVICE, qpn: 1234 + i });
    // Bounded: wait until the listener has counted them all (or 3 s).
    for (let i = 0; i < 300 && cmStats(srv!).dropped < ids.length; i++) await cm.pump(10);
    expect(cmStats(srv!).dropped).toBe(ids.length);
    expect(cm.inbox).toEqual([]);
    const again = await connect(client!, srv!.address, { service: SERVICE, timeoutMs: 5000 });
    expect(again.qpn).toBeGreaterThan(0);
    again.destroy();
    l.close();
  }, 30_000);

  it('listen() refuses private data whose REP cannot fit (ERR_INVALID_ARGUMENT); the device\'s other services still connect', async () => {
    const [srv, client] = await three();
    expect(() => listen(srv!, { service: SERVICE + 1, privateData: new Uint8Array(760) })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }));
    const ok = listen(srv!, { service: SERVICE + 2 });
    void (async () => {
      for await (const qp of ok) qp.destroy();
    })().catch(() => {});
    const qp = await connect(client!, srv!.address, { service: SERVICE + 2, timeoutMs: 5000 });
    qp.destroy();
    ok.close();
  }, 30_000);

  it('a listener handler that throws: that REQ gets a REJ, it is counted, and the CM keeps serving', async () => {
    const [srv, client, evil] = await three();
    agentOf(srv!).listen(SERVICE + 3, () => {
      throw new Error('handler bug');
    });
    // setup() throwing a message longer than a slot: the REJ that reports it must still fit.
    const long = listen(srv!, { service: SERVICE + 4, setup: () => {
      throw new Error('x'.repeat(5000));
    } });
    const cm = rawCm(evil!);
    cm.send(srv!.address, { t: 'req', id: 77, service: SERVICE + 3, qpn: 1234 });
    cm.send(srv!.address, { t: 'req', id: 78, service: SERVICE + 4, qpn: 1235 });
    await cm.pump(3000, () => cm.inbox.length >= 2);
    const rejs = cm.inbox.map((m) => m.msg).sort((a, b) => a.id - b.id);
    expect(rejs.map((m) => [m.t, m.id])).toEqual([['rej', 77], ['rej', 78]]);
    expect(cmStats(srv!).handlerErrors).toBe(1);
    const ok = listen(srv!, { service: SERVICE + 5 });
    void (async () => {
      for await (const qp of ok) qp.destroy();
    })().catch(() => {});
    const qp = await connect(client!, srv!.address, { service: SERVICE + 5, timeoutMs: 5000 });
    qp.destroy();
    ok.close();
    long.close();
    agentOf(srv!).listen(SERVICE + 3, undefined);
  }, 30_000);
});
