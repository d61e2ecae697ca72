// The CM exchange's sans-I/O core (src/cm/core.ts), driven with a virtual clock and no QP: what
// it sends, what it hands a listener, how each way a request can end settles it.
import { describe, expect, it } from 'vitest';
import { type CmAction, CmCore, isAtPortOnly } from '../../src/cm/core.js';
import type { DeviceAddress } from '../../src/core/address.js';

const A: DeviceAddress = { transport: 'udp', host: '127.0.0.1', port: 1111 } as DeviceAddress;
const B: DeviceAddress = { transport: 'udp', host: '127.0.0.1', port: 2222 } as DeviceAddress;
const dec = new TextDecoder();
const enc = new TextEncoder();

function drain(c: CmCore): CmAction[] {
  const out: CmAction[] = [];
  for (let a = c.pollAction(); a !== undefined; a = c.pollAction()) out.push(a);
  return out;
}
const json = (a: CmAction): unknown => (a.kind === 'send' ? JSON.parse(dec.decode(a.bytes)) : undefined);

describe('CmCore', () => {
  it('a request sends a REQ and settles with the REP that names it', () => {
    const c = new CmCore();
    const id = c.request(B, 7, 3, new Uint8Array([1, 2]), 1000, 0);
    const [send] = drain(c);
    expect(send).toMatchObject({ kind: 'send', to: B, req: id });
    expect(json(send!)).toEqual({ t: 'req', id, service: 7, qpn: 3, pd: 'AQI=' });
    c.handleMessage(enc.encode(JSON.stringify({ t: 'rep', id: id + 1, qpn: 9 })), B, 1);
    expect(drain(c)).toEqual([]);
    expect(c.dropped).toBe(1);
    c.handleMessage(enc.encode(JSON.stringify({ t: 'rep', id, qpn: 9 })), B, 2);
    expect(drain(c)).toEqual([{ kind: 'settled', id, value: { qpn: 9, privateData: undefined } }]);
    expect(c.pollTimeout()).toBeUndefined();
  });

  it('a REQ for a listened service goes to the listener, whose reply is a REP to where it came from; others get a REJ', () => {
    const c = new CmCore();
    c.listen(5, true);
    expect(() => c.listen(5, true)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_STATE' }));
    c.handleMessage(enc.encode(JSON.stringify({ t: 'req', id: 4, service: 5, qpn: 12 })), A, 0);
    const [req] = drain(c);
    expect(req).toEqual({ kind: 'request', id: 4, service: 5, qpn: 12, from: A, peer: A, routes: false, privateData: undefined });
    c.reply(A, 4, 13, undefined);
    expect(drain(c).map(json)).toEqual([{ t: 'rep', id: 4, qpn: 13 }]);
    c.handleMessage(enc.encode(JSON.stringify({ t: 'req', id: 5, service: 6, qpn: 12 })), A, 0);
    const [rej] = drain(c);
    expect(rej).toMatchObject({ kind: 'send', to: A });
    expect(json(rej!)).toEqual({ t: 'rej', id: 5, reason: 'no listener for service 6' });
  });

  it('a requester of several NIC threads tells its ports; the listener connects to them only when the REQ came from its CM QP\'s port', () => {
    // The CM QP is on thread 0: its port is ports[0].
    const c = new CmCore({ ports: [1111, 1112] });
    c.request({ ...B, ports: [2222, 2223] }, 7, 3, undefined, 1000, 0);
    expect(json(drain(c)[0]!)).toMatchObject({ t: 'req', qpn: 3, ports: [1111, 1112], routes: true });
    // A listener that lists no ports may reach the requester at its `port` alone: no ports told
    // (the requester's QP is on thread 0, ../../src/cm/index.ts).
    c.request(B, 7, 4, undefined, 1000, 0);
    const plain = json(drain(c)[0]!);
    expect(plain).not.toHaveProperty('routes');
    expect(plain).not.toHaveProperty('ports');
    const l = new CmCore();
    l.listen(5, true);
    l.handleMessage(enc.encode(JSON.stringify({ t: 'req', id: 4, service: 5, qpn: 12, ports: [1111, 1112], routes: true })), A, 0);
    expect(drain(l)).toMatchObject([{ kind: 'request', from: A, peer: { ...A, ports: [1111, 1112] }, routes: true }]);
    // From another port (a relay, a NAT): the address as it came.
    const other = { ...A, port: 1112 };
    l.handleMessage(enc.encode(JSON.stringify({ t: 'req', id: 5, service: 5, qpn: 12, ports: [1111, 1112] })), other, 0);
    expect(drain(l)).toMatchObject([{ kind: 'request', from: other, peer: other, routes: false }]);
    l.handleMessage(enc.encode(JSON.stringify({ t: 'req', id: 6, service: 5, qpn: 12, ports: ['x', 1112] })), A, 0);
    expect(drain(l)).toMatchObject([{ kind: 'request', peer: A }]);
  });

  it('a requester\'s ports aim the listener\'s QP only at ports a device of several threads can have: none well known, none twice, at most 16', () => {
    // Honoured, a list aims the listener's connect traffic at ports of the REQ's host the listener
    // never heard from; past the CM QP's port (checked against the datagram) a device's threads
    // bind ports the system picks. Any other list is ignored: the listener connects to `from`.
    const l = new CmCore();
    l.listen(5, true);
    const req = (from: DeviceAddress, ports: number[]) => {
      // QP 48: thread 0 of 2, 3 or 16 (a QP off thread 0 behind ports not honoured is the next case).
      l.handleMessage(enc.encode(JSON.stringify({ t: 'req', id: 9, service: 5, qpn: 48, ports, routes: true })), from, 0);
      return (drain(l)[0] as { peer: DeviceAddress }).peer;
    };
    const sixteen = [1111, ...Array.from({ length: 15 }, (_, i) => 40000 + i)];
    expect(req(A, [1111, 53])).toEqual(A);
    expect(req(A, [1111, 40000, 123])).toEqual(A);
    expect(req(A, [1111, 40000, 40000])).toEqual(A);
    expect(req(A, [1111, 1111])).toEqual(A);
    expect(req(A, [...sixteen, 40100])).toEqual(A);
    expect(req(A, sixteen)).toEqual({ ...A, ports: sixteen });
    // The CM QP's own port was seen: a device opened at a well-known port is one.
    const low = { ...A, port: 500 };
    expect(req(low, [500, 40000])).toEqual({ ...low, ports: [500, 40000] });
  });

  it('ports told but not honoured, for a QP they put off thread 0: a REJ that asks for one on thread 0, which the requester tells apart', () => {
    const l = new CmCore();
    l.listen(5, true);
    // From another port than the CM QP's (a NAT rewrote it): QP 13 would be on thread 1 of 2.
    const other = { ...A, port: 3333 };
    l.handleMessage(enc.encode(JSON.stringify({ t: 'req', id: 9, service: 5, qpn: 13, ports: [1111, 1112], routes: true })), other, 0);
    const [rej] = drain(l);
    expect(rej).toMatchObject({ kind: 'send', to: other });
    expect(json(rej!)).toMatchObject({ t: 'rej', id: 9, port: true });
    // A list that is no device's, likewise: the listener never aims at it.
    l.handleMessage(enc.encode(JSON.stringify({ t: 'req', id: 10, service: 5, qpn: 13, ports: [1111, 53], routes: true })), A, 0);
    expect(json(drain(l)[0]!)).toMatchObject({ t: 'rej', id: 10, port: true });
    const c = new CmCore({ ports: [1111, 1112], randomId: () => 9 });
    c.request({ ...B, ports: [2222, 2223] }, 5, 13, undefined, 1000, 0);
    drain(c);
    c.handleMessage(rej!.kind === 'send' ? rej!.bytes : new Uint8Array(), B, 1);
    const [settled] = drain(c);
    expect(settled).toMatchObject({ kind: 'settled', id: 9, error: { code: 'ERR_UNREACHABLE' } });
    expect(isAtPortOnly((settled as { error?: unknown }).error)).toBe(true);
    // Asked again with a QP on thread 0: routes, and no ports.
    const c2 = new CmCore({ ports: [1111, 1112] });
    c2.request({ ...B, ports: [2222, 2223] }, 5, 14, undefined, 1000, 0, true);
    const again = json(drain(c2)[0]!);
    expect(again).toMatchObject({ routes: true });
    expect(again).not.toHaveProperty('ports');
  });

  it('a REJ, a refusal, a lost peer, a timeout and a close each settle with their own code', () => {
    const c = new CmCore();
    const r1 = c.request(B, 1, 1, undefined, 1000, 0);
    const r2 = c.request(B, 1, 2, undefined, 1000, 0);
    const r3 = c.request(A, 1, 3, undefined, 1000, 0);
    const r4 = c.request(A, 1, 4, undefined, 500, 0);
    const r5 = c.request(A, 1, 5, undefined, 1000, 0);
    drain(c);
    c.handleMessage(enc.encode(JSON.stringify({ t: 'rej', id: r1, reason: 'full' })), B, 1);
    c.handleRefused(r2, 1);
    c.handlePeerLost(B, 1);
    expect(c.pollTimeout()).toBe(500);
    c.handleTimeout(499);
    expect(drain(c).map((a) => (a.kind === 'settled' ? [a.id, a.error?.code] : a.kind))).toEqual([[r1, 'ERR_UNREACHABLE'], [r2, 'ERR_UNREACHABLE']]);
    c.handleTimeout(500);
    expect(drain(c).map((a) => (a.kind === 'settled' ? [a.id, a.error?.code] : a.kind))).toEqual([[r4, 'ERR_TIMEOUT']]);
    c.handlePeerLost(A, 600);
    c.handleClose(600);
    expect(drain(c).map((a) => (a.kind === 'settled' ? [a.id, a.error?.code] : a.kind))).toEqual([[r3, 'ERR_UNREACHABLE'], [r5, 'ERR_UNREACHABLE']]);
    expect(c.pollTimeout()).toBeUndefined();
    const r6 = c.request(A, 1, 6, undefined, 1000, 700);
    drain(c);
    c.handleClose(701);
    expect(drain(c)).toEqual([expect.objectContaining({ kind: 'settled', id: r6, error: expect.objectContaining({ code: 'ERR_CLOSED' }) })]);
  });

  it('a REQ the peer\'s CM had no receive for (its RNR retries ran out) goes again while the request has time, at most 8 times; then the timeout settles it', () => {
    const c = new CmCore();
    const id = c.request(B, 7, 3, undefined, 1000, 0);
    const [first] = drain(c);
    c.handleBusy(id, 100);
    const again = drain(c);
    expect(again).toEqual([{ kind: 'send', to: B, bytes: (first as { bytes: Uint8Array }).bytes, req: id }]);
    for (let i = 0; i < 10; i++) c.handleBusy(id, 200 + i);
    expect(drain(c)).toHaveLength(7);
    c.handleBusy(id + 1, 300);
    expect(drain(c)).toEqual([]);
    c.handleTimeout(1000);
    expect(drain(c)).toEqual([expect.objectContaining({ kind: 'settled', id, error: expect.objectContaining({ code: 'ERR_TIMEOUT' }) })]);
    // Past its deadline a busy REQ is not sent again.
    const id2 = c.request(B, 7, 3, undefined, 100, 2000);
    drain(c);
    c.handleBusy(id2, 2100);
    expect(drain(c)).toEqual([]);
  });

  it('bytes that are not a message, or name nothing, are dropped and counted; private data past one slot is refused before anything waits', () => {
    const c = new CmCore();
    for (const b of ['{', '7', '{"t":"req","id":1,"service":1}', '{"t":"what","id":1}']) c.handleMessage(enc.encode(b), A, 0);
    c.handleMessage(enc.encode('{"t":"req","id":1,"service":1,"qpn":1}'), undefined, 0);
    expect(c.dropped).toBe(5);
    expect(() => c.request(B, 1, 1, new Uint8Array(2000), 1000, 0)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }));
    expect(drain(c)).toEqual([]);
    expect(c.pollTimeout()).toBeUndefined();
  });
});
