// Two QPs connected by hand over tcp (QPNs exchanged out of band, both sides call connect): the
// responder side takes the MPA Request that names its QPN and the peer's, and holds such a
// request for a QP whose connect has not been called yet. A third host that knows both QPNs
// sends that request first. Without a secret the responder takes it and binds its QP to the
// stranger's connection — what the application sent goes to the stranger, and the real peer is
// refused. QPNs are drawn at random (src/verbs/qpn.ts), so a blind guess no longer finds them
// (tcp-raw-connect-guess.test.ts); but they are names, not secrets, and this third host read
// them where the application exchanged them. With a secret exchanged along with { address, qpn }
// (qp.connect({ secret })) each end's MPA frame proves it (src/transport/tcp/connect-proof.ts):
// the stranger's request is refused and the real pair connects. Without one the limit stays,
// pinned (it.fails; docs/tcp-framing.md "Guessing the pair"); the cm path is not affected.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { QpState } from '../../src/index.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { cat } from '../transport/tcp/raw-mpa.js';
import { until } from '../files/helpers.js';
import { rawTcpPairWithStranger } from './tcp-stranger.js';

/** An enhanced MPA Request (CRC, IRD/ORD 16, no peer-to-peer) with a sabre block for the QP pair. */
function hijackRequest(initiatorQpn: number, responderQpn: number): Uint8Array {
  const block = encodeSabrePd({ kind: 'connect', initiatorQpn, responderQpn, nonce: 0 });
  const pd = cat(Uint8Array.of(0x00, 0x10, 0x00, 0x10), block);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

/** A raw tcp pair, a stranger at 127.0.0.2 sending the pairing's Request first; then both connect (with `secret`, if given). */
async function hijackFirst(secret?: Uint8Array, otherSecret = secret, workers = 0) {
  const { ini, resp, qi, qr, stranger, got, close } = await rawTcpPairWithStranger(workers);
  try {
    stranger.write(hijackRequest(qi.qpn, qr.qpn));
    await until(() => (resp.stats().link as unknown as Record<string, number>).connectionsAccepted === 1, 5000, 'the request to be read');
    await new Promise((r) => setTimeout(r, 100));
    const results = await Promise.allSettled([
      qr.connect({ address: ini.address, qpn: qi.qpn, timeoutMs: 3000, ...(secret ? { secret } : {}) }),
      qi.connect({ address: resp.address, qpn: qr.qpn, timeoutMs: 3000, ...(otherSecret ? { secret: otherSecret } : {}) }),
    ]);
    // Before: the responder accepted the stranger's request (an MPA Reply without Reject) and the
    // real initiator's connect failed.
    const reply = got();
    const accepted = reply.length >= 18 && (reply[16]! & 0x20) === 0;
    return { accepted, reply, results, states: [qr.state, qi.state] };
  } finally {
    await close();
  }
}

describe('a stranger that read the QPNs of a connect made by hand', () => {
  it.each([0, 1])('with a secret both connects were given, its MPA Request from 127.0.0.2, sent before the connects, is refused: the real pair connects (workers: %i)', async (workers) => {
    const secret = new Uint8Array(randomBytes(32));
    const r = await hijackFirst(secret, secret, workers);
    expect(r.accepted).toBe(false);
    expect(r.reply.toString('latin1')).toContain('does not prove the QP\'s secret');
    expect(r.results.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(r.states).toEqual([QpState.Rts, QpState.Rts]);
  }, 30_000);

  it('two connects given different secrets do not pair, and the initiator is told why', async () => {
    const r = await hijackFirst(new Uint8Array(randomBytes(32)), new Uint8Array(randomBytes(32)));
    expect(r.accepted).toBe(false);
    expect(r.results.map((x) => x.status)).toEqual(['rejected', 'rejected']);
    const why = r.results.map((x) => (x.status === 'rejected' ? String((x.reason as Error).message) : '')).join(' | ');
    expect(why).toMatch(/secret/);
  }, 30_000);

  it.fails('without a secret, its MPA Request does not take the responder\'s QP: the real pair connects (the limit, pinned)', async () => {
    const r = await hijackFirst();
    expect(r.accepted).toBe(false);
    expect(r.results.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  }, 30_000);
});
