// A stranger at 127.0.0.2 that knows the QPNs of a pair already connected over tcp sends the
// pairing's MPA Request (both ways round) to each side, then a Terminate FPDU on its own stream,
// then resets its connections: the connected pair is untouched (the Requests are held as any
// naming no QP, test/attack/tcp-raw-connect-guess; nothing on another connection reaches the
// pair's stream). Passed on the code it was written against: an audit's regression test.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { type Device, openDevice, QpState, type QueuePair } from '../../src/index.js';
import { cat, fpdu, sabreMpaRequest, untagged } from '../transport/tcp/raw-mpa.js';

function rc(d: Device): QueuePair {
  const cq = d.createCq({ depth: 64 });
  return d.allocPd().createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
}

async function stranger(port: number): Promise<net.Socket> {
  const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
  s.on('error', () => {});
  await new Promise<void>((r) => s.once('connect', () => r()));
  return s;
}

describe('tcp: a stranger naming a connected pair', () => {
  it.each([0, 1])('Requests both ways, a Terminate on its own stream, then a reset: the pair goes on (workers %i)', async (workers) => {
    const a = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers });
    const b = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers });
    try {
      const qa = rc(a);
      const qb = rc(b);
      await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);
      // Terminate (opcode 7, QN 2), RDMAP layer catastrophic, as a peer would send.
      const term = fpdu(cat(untagged(true, 7, 2, 1, 0), Uint8Array.of(0x00, 0x00, 0x00, 0x00)));
      const socks: net.Socket[] = [];
      for (const [d, ini, resp] of [[a, qa.qpn, qb.qpn], [a, qb.qpn, qa.qpn], [b, qa.qpn, qb.qpn], [b, qb.qpn, qa.qpn]] as const) {
        const s = await stranger(Number(d.address.port));
        s.write(sabreMpaRequest({ kind: 'connect', initiatorQpn: ini, responderQpn: resp, nonce: 1 }));
        s.write(term);
        socks.push(s);
      }
      await new Promise((r) => setTimeout(r, 300));
      for (const s of socks) s.resetAndDestroy();
      await new Promise((r) => setTimeout(r, 300));
      for (const [x, y, imm] of [[qa, qb, 1], [qb, qa, 2]] as const) {
        const got = y.recv();
        await x.send({ imm });
        expect((await got).imm).toBe(imm);
      }
      expect([qa.state, qb.state]).toEqual([QpState.Rts, QpState.Rts]);
    } finally {
      await a.close();
      await b.close();
    }
  }, 30_000);
});
