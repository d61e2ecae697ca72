// A raw tcp connect without a secret (QPNs exchanged by hand, both sides call qp.connect): the side
// that waits answers every MPA Request naming its pair, and the first to finish its handshake
// wins (connector.ts). A stranger that read the QPNs sends such a Request asking for
// peer-to-peer mode, so the handshake ends only with its RTR, and leaves (or breaks the
// handshake) once it has the Reply. That costs the waiting QP the stranger's connection, not its
// connect: it waits on, and dials the peer itself if it gave its own dial up for the
// stranger's, and the real pair connects.
import { describe, expect, it } from 'vitest';
import { QpState } from '../../src/index.js';
import { encodeMpaV2Private } from '../../src/wire/mpa.js';
import { MPA_V2_PRIVATE_SIZE } from '../../src/wire/fields.gen.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { cat } from '../transport/tcp/raw-mpa.js';
import { until } from '../files/helpers.js';
import { rawTcpPairWithStranger } from './tcp-stranger.js';

/** An enhanced MPA Request (CRC, peer-to-peer with a zero-length RDMA Write RTR) with a sabre block for the pair. */
function p2pRequest(initiatorQpn: number, responderQpn: number, nonce: number): Uint8Array {
  const v2 = new Uint8Array(MPA_V2_PRIVATE_SIZE);
  encodeMpaV2Private({ p2p: true, zeroLenSendRtr: false, writeRtr: true, readRtr: false, ird: 16, ord: 16 }, v2, 0);
  const pd = cat(v2, encodeSabrePd({ kind: 'connect', initiatorQpn, responderQpn, nonce }));
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

/**
 * The waiting side's connect starts; a stranger from 127.0.0.2 sends the pair's p2p Request
 * (`nonce`: 0 beats any initiator's crossing), reads the Reply, then `leave`s: closes, or sends
 * bytes that are no RTR. Then the initiator connects.
 */
async function strangerLeaves(leave: 'close' | 'garbage', nonce: number, workers: number) {
  const { ini, resp, qi, qr, stranger, got, close } = await rawTcpPairWithStranger(workers);
  try {
    const waiting = qr.connect({ address: ini.address, qpn: qi.qpn, timeoutMs: 4000 });
    waiting.catch(() => {});
    stranger.write(p2pRequest(qi.qpn, qr.qpn, nonce));
    await until(() => got().length >= 20, 5000, 'the responder\'s Reply to the stranger');
    const reply = got();
    if (leave === 'close') stranger.destroy();
    else stranger.write(Buffer.alloc(64, 0xee));
    await new Promise((r) => setTimeout(r, 100));
    const results = await Promise.allSettled([waiting, qi.connect({ address: resp.address, qpn: qr.qpn, timeoutMs: 4000 })]);
    return { reply, results, states: [qr.state, qi.state] };
  } finally {
    await close();
  }
}

describe('a stranger\'s peer-to-peer Request for a connect without a secret, left before its RTR', () => {
  it.each([
    ['close', 0], ['garbage', 0], ['close', 0xffff_ffff],
  ] as const)('it %s after the Reply (nonce %i): the waiting QP waits on and the real pair connects', async (leave, nonce) => {
    const r = await strangerLeaves(leave, nonce, 0);
    // The stranger was answered (without a secret nothing tells it from the peer) ...
    expect(r.reply.subarray(0, 16).toString('latin1')).toBe('MPA ID Rep Frame');
    expect(r.reply[16]! & 0x20).toBe(0);
    // ... and cost the connect nothing.
    expect(r.results.map((x) => (x.status === 'rejected' ? String((x.reason as Error).message) : x.status))).toEqual(['fulfilled', 'fulfilled']);
    expect(r.states).toEqual([QpState.Rts, QpState.Rts]);
  }, 30_000);

  it('the same through NIC threads (workers: 1)', async () => {
    const r = await strangerLeaves('close', 0, 1);
    expect(r.results.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  }, 30_000);
});
