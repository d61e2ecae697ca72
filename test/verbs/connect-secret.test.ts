// qp.connect({ address, qpn, secret }): a QP-to-QP connect whose ends exchanged a secret along
// with { address, qpn }. On tcp each end's MPA frame proves it (src/transport/tcp/connect-proof.ts;
// a stranger that read the QPNs: test/attack/tcp-qp-hijack.test.ts); udp and inproc bind the QP to
// the peer's address and take the secret without a check of their own.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { Access, type Device, ErrorCode, Opcode, openDevice, WcStatus } from '../../src/index.js';
import { take } from './helpers.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function side(transport: 'udp' | 'tcp' | 'inproc') {
  const dev = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
  devs.push(dev);
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 16 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
  const mr = pd.regMr(4096, Access.LocalWrite | Access.RemoteWrite);
  return { dev, cq, qp, mr };
}

const secret = (): Uint8Array => new Uint8Array(randomBytes(32));

describe('qp.connect with a secret', () => {
  it.each(['udp', 'tcp', 'inproc'] as const)('%s: both ends given the same one connect, and a write lands', async (t) => {
    const [a, b] = [await side(t), await side(t)];
    const s = secret();
    await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn, secret: s }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn, secret: s.slice() })]);
    a.mr.buffer.fill(9, 0, 64);
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }], remoteAddr: b.mr.addr, rkey: b.mr.rkey });
    expect((await take(a.cq, 1, 5000))[0]!.status).toBe(WcStatus.Success);
    expect(b.mr.buffer.subarray(0, 64).every((x) => x === 9)).toBe(true);
  });

  it('one that is not 16..64 bytes of a Uint8Array is refused at the call (ERR_INVALID_ARGUMENT)', async () => {
    const [a, b] = [await side('tcp'), await side('tcp')];
    for (const bad of [new Uint8Array(15), new Uint8Array(65), 'a string secret of many characters', [1, 2, 3]]) {
      await expect(a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn, secret: bad as Uint8Array })).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    }
  });

  it.each([0, 1])('tcp: a secret on one end only (end %i) does not pair; an end is told the other does not prove it', async (k) => {
    const [a, b] = [await side('tcp'), await side('tcp')];
    const s = [k === 0 ? secret() : undefined, k === 1 ? secret() : undefined];
    const results = await Promise.allSettled([
      a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn, timeoutMs: 2500, ...(s[0] ? { secret: s[0] } : {}) }),
      b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn, timeoutMs: 2500, ...(s[1] ? { secret: s[1] } : {}) }),
    ]);
    // Whichever end initiates (their ports decide): the end with the secret refuses a Reply
    // without a proof, or the Request without one is refused and its sender told why.
    const why = results.map((r) => (r.status === 'rejected' ? String((r.reason as Error).message) : 'connected'));
    expect(why.some((w) => /does not prove/.test(w))).toBe(true);
    expect(results[k]!.status).toBe('rejected');
  });
});
