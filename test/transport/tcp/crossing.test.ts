// Crossing connects of raw QP-to-QP pairs at the connector (src/transport/tcp/connector.ts): the
// responder connects first and, after fallbackMs, dials its initiator itself; that Request waits
// parked there. When the initiator connects and its own dial loses the crossing (the responder's
// nonce is the lower), it takes that parked Request — without a secret, only one from the host
// it dialled, so a peer named by a host name is resolved first (a fifth review found 'localhost'
// deadlocked: both timed out) — or, from a peer that says which nonce won (the crossing REJECT's
// sabrePdCrossing), the one parked with that nonce, whatever address the peer's dial left from
// (before, a peer reached at one address that dials from another deadlocked the same way).
import { describe, expect, it } from 'vitest';
import type { MpaConnector } from '../../../src/transport/tcp/connector.js';
import { connectorEndpoints } from './connectors.js';

const eps = connectorEndpoints();
const endpoint = (host: string) => eps.listen({ host, fallbackMs: 200, connectTimeoutMs: 2500 });

describe('a responder early, its initiator losing the crossing', () => {
  it.each(['127.0.0.1', 'localhost'])('the pair connects, peers named %s', async (host) => {
    const a = await endpoint(host);
    const b = await endpoint(host);
    const [ini, resp] = a.isInitiator(10, b.address, 20) ? [a, b] : [b, a];
    // The initiator loses the crossing: the lower nonce's connection survives.
    (ini as unknown as { nonce: number }).nonce = 0xfffffff0;
    (resp as unknown as { nonce: number }).nonce = 1;
    const [qi, qr] = ini === a ? [10, 20] : [20, 10];
    const early = resp.connectQp(qr, { address: ini.address, qpn: qi });
    await new Promise((r) => setTimeout(r, 500));
    expect(ini.parkedRequests).toBe(1);
    const late = ini.connectQp(qi, { address: resp.address, qpn: qr });
    const r = await Promise.allSettled([early, late]);
    for (const x of r) if (x.status === 'fulfilled') x.value.close();
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
  }, 10_000);
});

describe('a peer reached at one address whose dials leave from another', () => {
  /** a listens on every address and is told to b as 127.0.0.3; its dials leave from 127.0.0.1. a connects first. */
  async function pair(strangerNonce?: number) {
    const a = await endpoint('0.0.0.0');
    const b = await endpoint('127.0.0.1');
    const aSeen = { ...a.address, host: '127.0.0.3' };
    // b loses the crossing: a's nonce is the lower.
    (a as unknown as { nonce: number }).nonce = 0x100;
    (b as unknown as { nonce: number }).nonce = 0xfffffff0;
    let stranger: MpaConnector | undefined;
    if (strangerNonce !== undefined) {
      // A stranger's Request for the pair, parked at b before a's: same QPNs, another nonce.
      stranger = await endpoint('127.0.0.1');
      (stranger as unknown as { nonce: number }).nonce = strangerNonce;
      void stranger.connectQp(10, { address: b.address, qpn: 20 }).catch(() => {});
      await new Promise((r) => setTimeout(r, 100));
    }
    const early = a.connectQp(10, { address: b.address, qpn: 20 });
    await new Promise((r) => setTimeout(r, 300));
    expect(b.parkedRequests).toBe(strangerNonce === undefined ? 1 : 2);
    const late = b.connectQp(20, { address: aSeen, qpn: 10 });
    const r = await Promise.allSettled([early, late]);
    for (const x of r) if (x.status === 'fulfilled') x.value.close();
    return { r };
  }

  it('the pair connects: the end that lost the crossing takes the Request parked with the nonce the REJECT told', async () => {
    const { r } = await pair();
    expect(r.map((x) => (x.status === 'rejected' ? String(x.reason) : x.status))).toEqual(['fulfilled', 'fulfilled']);
  }, 10_000);

  it('a stranger\'s Request parked first with a lower nonce is not the one taken', async () => {
    // Taken, it would pair b with the stranger and leave a's Request parked: a would time out.
    const { r } = await pair(1);
    expect(r.map((x) => (x.status === 'rejected' ? String(x.reason) : x.status))).toEqual(['fulfilled', 'fulfilled']);
  }, 10_000);
});
