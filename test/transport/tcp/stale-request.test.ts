// A raw QP-to-QP connect made again right after the initiator gave its last attempt up
// (src/transport/tcp/connector.ts): the responder connects before it has read the FIN of that
// attempt's dial, so the Request parked from it is still in its handshake and is the one taken.
// The initiator's new Request must still pair the two: the responder may not count the stale
// Request's connection established on its own Reply, since nobody is left at the other end.
// Before: it did (sabre asked for no peer-to-peer RTR), its connect resolved with a connection
// that closed a moment later, and the new Request waited parked, unanswered, until the
// initiator's deadline. Seen as the 10 s timeout of verbs/connect-timeout.test's "reset, it
// connects" over tcp under load (a fresh-clone CI run); here the order is made, not hoped for:
// everything from the give-up to both connects runs in one turn of the event loop, before any
// socket is read.
import { expect, it } from 'vitest';
import { connectorEndpoints } from './connectors.js';

const eps = connectorEndpoints();
const endpoint = () => eps.listen({ host: '127.0.0.1', fallbackMs: 200, connectTimeoutMs: 2500 });

it('a Request parked from an attempt the initiator gave up does not take the pairing from its next one', async () => {
  const a = await endpoint();
  const b = await endpoint();
  const [ini, resp] = a.isInitiator(10, b.address, 20) ? [a, b] : [b, a];
  const [qi, qr] = ini === a ? [10, 20] : [20, 10];
  // The initiator's first attempt: its Request is parked at the responder, which is not connecting.
  const first = ini.connectQp(qi, { address: resp.address, qpn: qr }).then(() => 'connected', (e: Error) => e.message);
  for (let i = 0; i < 100 && resp.parkedRequests === 0; i++) await new Promise((r) => setTimeout(r, 10));
  expect(resp.parkedRequests).toBe(1);
  // In one turn: the initiator gives that attempt up (its dial closes), and both connect afresh.
  ini.cancel(qi);
  const late = resp.connectQp(qr, { address: ini.address, qpn: qi });
  const again = ini.connectQp(qi, { address: resp.address, qpn: qr });
  expect(await first).toMatch(/given up/);
  const r = await Promise.allSettled([late, again]);
  const conns = r.flatMap((x) => (x.status === 'fulfilled' ? [x.value] : []));
  try {
    expect(r.map((x) => (x.status === 'rejected' ? String(x.reason) : x.status))).toEqual(['fulfilled', 'fulfilled']);
    // One connection, its two ends, both still up once what was in flight has been read.
    await new Promise((r2) => setTimeout(r2, 100));
    const [cr, ci] = conns as [(typeof conns)[0], (typeof conns)[0]];
    expect(cr.socket.remotePort).toBe(ci.socket.localPort);
    expect(ci.socket.remotePort).toBe(cr.socket.localPort);
    expect([cr.state, ci.state]).toEqual(['established', 'established']);
  } finally {
    for (const c of conns) c.close();
  }
}, 10_000);
