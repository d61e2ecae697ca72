// The listener did not remember the REQs it answered: a REQ arriving twice (the requester's CM
// resends one its link flushed — src/cm/core.ts handleBusy — or anyone repeats one) made a second
// QP, a second REP with another QPN, and took a second backlog slot for the QP's whole connect
// deadline. The same REQ (same source, same id) now gets the same REP and makes no QP. And a REQ
// whose QPN is no requester's (not a u32, 0, the CM QP's own) got a QP made for it: dropped now.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Device, listen, openDevice } from '../../src/index.js';
import type { CmListener } from '../../src/cm/index.js';
import { type RawCm, rawCm } from './cm-raw.js';

const SERVICE = 78;
type CmStats = { dropped: number; repeatedRequests: number };
const cmStats = (d: Device): CmStats => (d.stats() as unknown as { cm: CmStats }).cm;

describe('repeated and malformed REQs', () => {
  let srv: Device;
  let evil: Device;
  let l: CmListener;
  let cm: RawCm;
  beforeAll(async () => {
    srv = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    evil = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    l = listen(srv, { service: SERVICE, backlog: 4 });
    cm = rawCm(evil);
  });
  afterAll(async () => {
    l?.close();
    await evil?.close();
    await srv?.close();
  });

  it('the same REQ sent 3 times gets one QPN, three times; another id from the same source gets its own', async () => {
    for (let i = 0; i < 3; i++) cm.send(srv.address, { t: 'req', id: 9001, service: SERVICE, qpn: 1234 });
    await cm.pump(3000, () => cm.inbox.length >= 3);
    const reps = cm.inbox.filter((m) => m.msg?.t === 'rep');
    expect(reps.length).toBe(3);
    expect(new Set(reps.map((m) => m.msg.qpn)).size).toBe(1);
    expect(cmStats(srv).repeatedRequests).toBe(2);
    cm.send(srv.address, { t: 'req', id: 9002, service: SERVICE, qpn: 1235 });
    await cm.pump(3000, () => cm.inbox.length >= 4);
    expect(cm.inbox[3]?.msg?.qpn).not.toBe(reps[0]!.msg.qpn);
  });

  it('a REQ whose qpn is not a requester\'s QPN is dropped and counted before a QP is made', async () => {
    const answered = cm.inbox.length;
    const before = cmStats(srv).dropped;
    const bad = [-5, 2 ** 40, 0, 0xffff_ffff, 1.5, '7'];
    for (const [i, qpn] of bad.entries()) cm.send(srv.address, { t: 'req', id: 9100 + i, service: SERVICE, qpn });
    for (let i = 0; i < 300 && cmStats(srv).dropped - before < bad.length; i++) await cm.pump(10);
    expect(cmStats(srv).dropped - before).toBe(bad.length);
    await cm.pump(200);
    expect(cm.inbox.length).toBe(answered);
  });
});
