// The edges of a QP-to-QP tcp connect with a secret (src/transport/tcp/connect-proof.ts,
// connector.ts) that a review found, each seen failing on the first version:
// - a connect that timed out left its connector attempt waiting, without the secret: the retry
//   with one was dropped on the floor and the old attempt took a stranger's Request;
// - a proof seen once on the wire could be replayed when the same QPs reconnected (MPA is one
//   round trip: the responder adds nothing fresh to a Request's proof), so a secret now pairs
//   once: a connect given a secret an earlier one had is refused;
// - a responder that connected over a second before its initiator dialled it after its 1 s
//   fallback; the initiator, connecting later, did not look at that parked Request and, when
//   its nonce was the higher one, had its own dial refused as a crossing: both timed out. (The
//   first mend let an initiator take any parked Request before dialling, a stranger's too: a
//   second review; now only one that proves the secret, or after losing the crossing.)
// A third review: "a secret pairs once" held per NIC thread for the secret alone, so two QPs of
// one device could not pair with each other; and the newest parked Request was taken first, so
// a copy of a parked Request, sent by whoever saw it, paired instead of the real one. Now a
// secret pairs once per QP, the oldest parked Request goes first, its copies are refused, and
// a QP with a secret answers one Request at a time. A fourth, on connects without a secret: that
// guard let a stranger's peer-to-peer Request that never sends its RTR hold the QP, and an
// initiator that lost the crossing took a stranger's parked Request; now the guard is for
// secrets only, and that initiator takes only one from the host it dialled.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { describe, expect as expectAny, it, type OnTestFinishedHandler } from 'vitest';
import { type Device, openDevice, QpState } from '../../src/index.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { cat } from '../transport/tcp/raw-mpa.js';

/** An MPA Request (enhanced, CRC, IRD/ORD 16; `p2p`: peer-to-peer, an RTR due) carrying `block` as sabre's private data. */
function request(block: Uint8Array, p2p = false): Uint8Array {
  const pd = cat(p2p ? Uint8Array.of(0x80, 0x10, 0x80, 0x10) : Uint8Array.of(0x00, 0x10, 0x00, 0x10), block);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

/** The test's own cleanup (the tests run concurrently: each closes what it opened). */
type Fin = (fn: OnTestFinishedHandler) => void;
const closing = (fin: Fin, d: Device): Device => (fin(() => d.close()), d);

async function pair(fin: Fin, workers = 0) {
  const a = closing(fin, await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers }));
  const b = closing(fin, await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers }));
  const mk = (d: Device) => {
    const pd = d.allocPd();
    const cq = d.createCq({ depth: 16 });
    return pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
  };
  // The side whose (host, port) sorts higher waits for the other's request.
  const [ini, resp] = (a.address.port as number) < (b.address.port as number) ? [a, b] : [b, a];
  return { ini, resp, qi: mk(ini), qr: mk(resp) };
}

/** Send `bytes` to `port` from 127.0.0.2; the answer collects in `got`. */
async function stranger(fin: Fin, port: number, bytes: Uint8Array): Promise<{ got: Buffer[] }> {
  const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
  fin(() => void s.destroy());
  const got: Buffer[] = [];
  s.on('error', () => {});
  s.on('data', (d: Buffer) => got.push(d));
  await new Promise<void>((r) => s.once('connect', () => r()));
  s.write(bytes);
  return { got };
}

/** An MPA Reply in `got` that accepted (Reject bit clear). */
const accepted = (got: Buffer[]): boolean => {
  const r = Buffer.concat(got);
  return r.length >= 18 && (r[16]! & 0x20) === 0;
};

/**
 * A tap in front of `resp` that only reads what passes (`seen`), at a port that sorts above
 * `ini`'s so that `ini` still dials (the port decides who initiates; ephemeral ports mostly
 * rise, a few tries find one).
 */
async function tapFor(fin: Fin, ini: Device, resp: Device): Promise<{ seen: Buffer[]; at: { transport: 'tcp'; host: string; port: number } }> {
  const seen: Buffer[] = [];
  const make = (): net.Server => net.createServer((c) => {
    const up = net.connect({ host: '127.0.0.1', port: resp.address.port as number });
    c.on('data', (d: Buffer) => (seen.push(d), up.write(d)));
    up.on('data', (d: Buffer) => c.write(d));
    for (const [x, y] of [[c, up], [up, c]] as const) {
      x.on('error', () => y.destroy());
      x.on('close', () => y.destroy());
    }
  });
  let tap = make();
  for (let i = 0; ; i++) {
    await new Promise<void>((r) => tap.listen(0, '127.0.0.1', () => r()));
    if ((tap.address() as net.AddressInfo).port > (ini.address.port as number) || i === 50) break;
    await new Promise((r) => tap.close(() => r(undefined)));
    tap = make();
  }
  const t = tap;
  fin(() => void t.close()); // not awaited: close waits for the piped connections, which the devices end
  const at = { transport: 'tcp' as const, host: '127.0.0.1', port: (tap.address() as net.AddressInfo).port };
  expectAny(at.port).toBeGreaterThan(ini.address.port as number);
  return { seen, at };
}

// Concurrent: most of the file is waiting (a responder 1.5 s early, deadlines); each test has
// devices of its own and asserts with its context's expect.
describe.concurrent('tcp QP-to-QP connect with a secret: the edges', { timeout: 30_000 }, () => {
  it.for([0, 1])('a retry after a connect that timed out carries its secret: a stranger\'s Request is refused (workers: %i)', async (workers, { expect, onTestFinished: fin }) => {
    const { ini, resp, qi, qr } = await pair(fin, workers);
    await expect(qr.connect({ address: ini.address, qpn: qi.qpn, timeoutMs: 300 })).rejects.toMatchObject({ code: 'ERR_TIMEOUT' });
    qr.modify({ state: QpState.Error });
    qr.modify({ state: QpState.Reset });
    const secret = new Uint8Array(randomBytes(32));
    const p = qr.connect({ address: ini.address, qpn: qi.qpn, timeoutMs: 1500, secret });
    const s = await stranger(fin, resp.address.port as number, request(encodeSabrePd({ kind: 'connect', initiatorQpn: qi.qpn, responderQpn: qr.qpn, nonce: 0 })));
    await expect(p).rejects.toBeTruthy(); // its peer never connects
    expect(accepted(s.got)).toBe(false);
    expect(Buffer.concat(s.got).toString('latin1')).toContain('does not prove');
  });

  it('a Request seen on the wire once does not pair the same QPs again: a secret is given to one connect, the next attempt has its own', async ({ expect, onTestFinished: fin }) => {
    const { ini, resp, qi, qr } = await pair(fin);
    // A tap in front of the responder that only reads (a host on the path, once).
    const { seen, at: tapAt } = await tapFor(fin, ini, resp);
    const secret = new Uint8Array(randomBytes(32));
    await Promise.all([
      qi.connect({ address: tapAt, qpn: qr.qpn, secret, timeoutMs: 5000 }),
      qr.connect({ address: ini.address, qpn: qi.qpn, secret, timeoutMs: 5000 }),
    ]);
    const wire = Buffer.concat(seen);
    const block = new Uint8Array(wire.subarray(24, 20 + wire.readUInt16BE(18)));
    for (const q of [qi, qr]) q.modify({ state: QpState.Error });
    await new Promise((r) => setTimeout(r, 200));
    for (const q of [qi, qr]) q.modify({ state: QpState.Reset });
    // The same secret again: refused at the connect (the replay below would prove it).
    await expect(qr.connect({ address: ini.address, qpn: qi.qpn, secret, timeoutMs: 4000 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringMatching(/earlier connect/) });
    for (const q of [qi, qr]) {
      if (q.state !== QpState.Reset) {
        q.modify({ state: QpState.Error });
        q.modify({ state: QpState.Reset });
      }
    }
    // The tap, now off the path, replays the Request first; the next attempt has a new secret.
    const s = await stranger(fin, resp.address.port as number, request(block));
    await new Promise((r) => setTimeout(r, 200));
    const next = new Uint8Array(randomBytes(32));
    const r = await Promise.allSettled([
      qr.connect({ address: ini.address, qpn: qi.qpn, secret: next, timeoutMs: 4000 }),
      qi.connect({ address: resp.address, qpn: qr.qpn, secret: next, timeoutMs: 4000 }),
    ]);
    expect(accepted(s.got)).toBe(false);
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  });

  it.for([0, 1])('two QPs of one device pair with each other under one secret (workers: %i)', async (workers, { expect, onTestFinished: fin }) => {
    const dev = closing(fin, await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers }));
    const mk = () => dev.allocPd().createQp({ type: 'rc', sendCq: dev.createCq({ depth: 8 }), recvCq: dev.createCq({ depth: 8 }), maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    const [q1, q2] = [mk(), mk()];
    const secret = new Uint8Array(randomBytes(32));
    const r = await Promise.allSettled([
      q1.connect({ address: dev.address, qpn: q2.qpn, secret, timeoutMs: 4000 }),
      q2.connect({ address: dev.address, qpn: q1.qpn, secret, timeoutMs: 4000 }),
    ]);
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  });

  it('a copy of the initiator\'s Request, parked at the responder, sent by a host that saw it: the real one pairs', async ({ expect, onTestFinished: fin }) => {
    const { ini, resp, qi, qr } = await pair(fin);
    const { seen, at: tapAt } = await tapFor(fin, ini, resp);
    const secret = new Uint8Array(randomBytes(32));
    // The initiator connects first: its Request (through the tap) waits parked at the responder.
    const pi = qi.connect({ address: tapAt, qpn: qr.qpn, secret, timeoutMs: 4000 });
    await new Promise((r) => setTimeout(r, 200));
    const s = await stranger(fin, resp.address.port as number, new Uint8Array(Buffer.concat(seen)));
    await new Promise((r) => setTimeout(r, 100));
    const r = await Promise.allSettled([qr.connect({ address: ini.address, qpn: qi.qpn, secret, timeoutMs: 4000 }), pi]);
    expect(accepted(s.got)).toBe(false);
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  });

  it.for([false, true])('a stranger\'s Request parked at the initiator before both connect is not taken: the real pair connects (secret: %s)', async (withSecret, { expect, onTestFinished: fin }) => {
    const { ini, resp, qi, qr } = await pair(fin);
    const secret = withSecret ? { secret: new Uint8Array(randomBytes(32)) } : {};
    const s = await stranger(fin, ini.address.port as number, request(encodeSabrePd({ kind: 'connect', initiatorQpn: qr.qpn, responderQpn: qi.qpn, nonce: 0 })));
    await new Promise((r) => setTimeout(r, 200));
    const r = await Promise.allSettled([
      qr.connect({ address: ini.address, qpn: qi.qpn, timeoutMs: 4000, ...secret }),
      qi.connect({ address: resp.address, qpn: qr.qpn, timeoutMs: 4000, ...secret }),
    ]);
    expect(accepted(s.got)).toBe(false);
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  });

  it.for([0, 1])('without a secret, a stranger\'s peer-to-peer Request that never sends its RTR does not hold the waiting QP (workers: %i)', async (workers, { expect, onTestFinished: fin }) => {
    const { ini, resp, qi, qr } = await pair(fin, workers);
    const pr = qr.connect({ address: ini.address, qpn: qi.qpn, timeoutMs: 4000 });
    await new Promise((r) => setTimeout(r, 100));
    await stranger(fin, resp.address.port as number, request(encodeSabrePd({ kind: 'connect', initiatorQpn: qi.qpn, responderQpn: qr.qpn, nonce: 0 }), true));
    await new Promise((r) => setTimeout(r, 100));
    const pi = qi.connect({ address: resp.address, qpn: qr.qpn, timeoutMs: 4000 });
    expect((await Promise.allSettled([pr, pi])).map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  });

  it.for([1, 2, 3, 4])('without a secret, a stranger\'s Request parked at the initiator, the responder 1.5 s early: the real pair connects (run %i)', async (_, { expect, onTestFinished: fin }) => {
    const { ini, resp, qi, qr } = await pair(fin);
    const s = await stranger(fin, ini.address.port as number, request(encodeSabrePd({ kind: 'connect', initiatorQpn: qr.qpn, responderQpn: qi.qpn, nonce: 0 })));
    await new Promise((r) => setTimeout(r, 100));
    const early = qr.connect({ address: ini.address, qpn: qi.qpn, timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 1500));
    const late = qi.connect({ address: resp.address, qpn: qr.qpn, timeoutMs: 5000 });
    const r = await Promise.allSettled([early, late]);
    expect(accepted(s.got)).toBe(false);
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  });

  it.for([false, true, false, true, false, true])('a responder that connects 1.5 s before its initiator pairs with it (secret: %s)', async (withSecret, { expect, onTestFinished: fin }) => {
    const { ini, resp, qi, qr } = await pair(fin);
    const secret = withSecret ? { secret: new Uint8Array(randomBytes(32)) } : {};
    const early = qr.connect({ address: ini.address, qpn: qi.qpn, timeoutMs: 5000, ...secret });
    await new Promise((r) => setTimeout(r, 1500));
    const late = qi.connect({ address: resp.address, qpn: qr.qpn, timeoutMs: 5000, ...secret });
    expect((await Promise.allSettled([early, late])).map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  });
});
