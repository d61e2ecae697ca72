// connect()'s timeoutMs is the whole connect's deadline. It gave the full budget to the CM
// exchange and then the full budget again to qp.connect: a listener that answers REP just inside
// the deadline, for a QP that never greets back, held the connect for about twice timeoutMs.
import { afterAll, describe, expect, it } from 'vitest';
import { connect, type Device, openDevice } from '../../src/index.js';
import { rawCm } from './cm-raw.js';

describe('connect against a listener that answers late and never connects', () => {
  const devs: Device[] = [];
  afterAll(async () => {
    for (const d of devs) await d.close();
  });

  it('connect({ timeoutMs: 1500 }) with the REP at 0.9 × 1500 ms fails ERR_TIMEOUT well before 2 × 1500 ms', async () => {
    const evil = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const client = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(evil, client);
    const cm = rawCm(evil);
    const T = 1500;
    const t0 = performance.now();
    const p = connect(client, evil.address, { service: 5, timeoutMs: T }).then(
      () => 'connected',
      (e: { code?: string }) => e.code ?? 'error',
    );
    await cm.pump(T, () => cm.inbox.length > 0);
    const req = cm.inbox[0]!;
    expect(req.msg.t).toBe('req');
    await new Promise((r) => setTimeout(r, Math.max(0, 0.9 * T - (performance.now() - t0))));
    cm.send(req.src, { t: 'rep', id: req.msg.id, qpn: 4321 });
    expect(await p).toBe('ERR_TIMEOUT');
    // Generous under load; the old path took about 2 × T (2 970 ms measured).
    expect(performance.now() - t0).toBeLessThan(1.5 * T);
  }, 20_000);
});
