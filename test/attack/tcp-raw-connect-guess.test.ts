// A raw tcp `qp.connect` is matched by the QPN pair in sabre's MPA private data: the side that
// waits takes the Request naming its QPN and the QPN it was told of, whoever sends it (the
// connector does not compare the source with the address it was given: a relay or an alias
// would then fail). A third host that reaches the listening port and can guess both numbers
// would take the pairing, before or after the local call. QPNs are therefore drawn at random
// (src/verbs/qpn.ts): here an attacker tries the numbers a device handing QPNs out in order
// would use, and the two real peers must still meet each other.
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { type Device, openDevice, type QueuePair } from '../../src/index.js';
import { sabreMpaRequest } from '../transport/tcp/raw-mpa.js';

/** A sabre MPA Request for a raw connect: initiator `from`, responder `to`. */
const request = (from: number, to: number): Uint8Array => sabreMpaRequest({ kind: 'connect', initiatorQpn: from, responderQpn: to, nonce: from * 7919 + to });

const REPLY_KEY = 'MPA ID Rep Frame';
/** RFC 5044 §7.1: the R bit of the flags byte after the key (set: rejected). */
const REJECT = 0x20;

type Answer = 'accepted' | 'rejected' | 'closed' | 'silent';

/** Sends `bytes` on a fresh connection to `port`; resolves with what came back within `ms`. */
function probe(port: number, bytes: Uint8Array, ms: number): { sock: net.Socket; answer: Promise<Answer> } {
  const sock = net.connect({ host: '127.0.0.1', port });
  sock.on('error', () => {});
  const answer = new Promise<Answer>((resolve) => {
    let got = Buffer.alloc(0);
    const t = setTimeout(() => resolve('silent'), ms);
    sock.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (got.length < 17) return;
      clearTimeout(t);
      resolve(got.subarray(0, 16).toString('latin1') === REPLY_KEY && (got[16]! & REJECT) === 0 ? 'accepted' : 'rejected');
    });
    sock.on('close', () => {
      clearTimeout(t);
      resolve('closed');
    });
  });
  sock.write(bytes);
  return { sock, answer };
}

/** An rc QP of its own CQ on `d`. */
function rcQp(d: Device): QueuePair {
  const cq = d.createCq({ depth: 16 });
  return d.allocPd().createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
}

describe('a third host guessing the QPN pair of a raw tcp connect', () => {
  const devs: Device[] = [];
  afterAll(async () => {
    await Promise.all(devs.map((d) => d.close()));
  });

  it('does not take the pairing: the real peers connect to each other and the guesses are refused', async () => {
    const a = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    const b = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    devs.push(a, b);
    const qa = rcQp(a);
    const qb = rcQp(b);
    // The first QPNs an in-order device hands out, both ways round, sent to both listeners before the real connects.
    const guesses = [1, 2, 3, 4];
    const probes = [a, b].flatMap((d) => guesses.flatMap((x) => guesses.map((y) => probe(d.address.port as number, request(x, y), 4000))));
    await new Promise((r) => setTimeout(r, 200));
    await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);

    // The pair really joins a and b: b's Send lands in a's receive.
    const recv = qa.recv();
    await qb.send({ imm: 0xb0b });
    expect((await recv).imm).toBe(0xb0b);

    const answers = await Promise.all(probes.map((p) => p.answer));
    for (const p of probes) p.sock.destroy();
    expect(answers.filter((x) => x === 'accepted')).toHaveLength(0);
  }, 20_000);

  it('tells a prober nothing: a Request naming a connected QP is held as one naming no QP is', async () => {
    const a = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    const b = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    devs.push(a, b);
    const qa = rcQp(a);
    const qb = rcQp(b);
    await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);
    const port = a.address.port as number;
    const unknown = qa.qpn === 7 ? 9 : 7;
    const probes = [probe(port, request(12345, qa.qpn), 1500), probe(port, request(12345, unknown), 1500)];
    const answers = await Promise.all(probes.map((p) => p.answer));
    for (const p of probes) p.sock.destroy();
    expect(answers).toEqual(['silent', 'silent']);
  }, 20_000);

  it('draws QPNs at random within 24 bits, spread over the NIC threads in turn', async () => {
    const d = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 2 });
    devs.push(d);
    const cq = d.createCq({ depth: 16 });
    const pd = d.allocPd();
    const qpns = Array.from({ length: 64 }, () => pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1, maxRecvWr: 1, maxSge: 1 }).qpn);
    expect(new Set(qpns).size).toBe(64);
    for (const q of qpns) expect(q >= 1 && q < 1 << 24).toBe(true);
    // Thread qpn mod 2 alternates, as it did with numbers handed out in order.
    expect(qpns.map((q) => q % 2)).toEqual(qpns.map((_, i) => i % 2));
    // Not in order: the gaps between consecutive numbers are not all small.
    expect(qpns.slice(1).filter((q, i) => Math.abs(q - qpns[i]!) > 1000).length).toBeGreaterThan(32);
  }, 20_000);
});
