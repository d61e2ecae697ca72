// A connection refused past maxConnectionsPerHost (or maxConnections) is written an MPA Reply
// with Reject and lingers up to REFUSED_LINGER_MS (250 ms) for it to be read. That was bounded in
// time only: a host connecting as fast as it can past its cap, keeping its end open, made the
// device hold rate × 250 ms refused sockets (file descriptors) on top of its caps. Now at most
// REFUSED_LINGER_MAX linger; past it a refused socket is destroyed at once (`refusalsCut`).
// Measured as the process's descriptors less the attacker's own sockets open at that instant.
import fs from 'node:fs';
import { describe, it } from 'vitest';
import { connect, type Device, listen, openDevice } from '../../src/index.js';
import { REFUSED_LINGER_MAX } from '../../src/core/refuse.js';
import { connectFlood } from './flood.js';

const link = (dev: Device): Record<string, number> => dev.stats().link as unknown as Record<string, number>;
const fds = (): number => fs.readdirSync('/proc/self/fd').length;

describe('a flood of connects past maxConnectionsPerHost', () => {
  it('the device holds at most REFUSED_LINGER_MAX refused sockets; the rest cut at once, counted; another host still connects', async ({ expect, onTestFinished }) => {
    const server = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0, limits: { maxConnectionsPerHost: 2 } });
    const client = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0 });
    onTestFinished(async () => {
      await client.close();
      await server.close();
    });
    const port = server.address.port as number;
    const l = listen(server, { service: 7 });
    onTestFinished(() => l.close());
    const base = fds();
    let peak = 0;
    // 32 connects in flight at a time for 1.5 s from 127.0.0.2, each kept open a second.
    const flood = connectFlood({ port, ms: 1500, parallel: 32, from: () => '127.0.0.2', holdMs: 1000 });
    onTestFinished(() => {
      for (const s of flood.socks) s.destroy();
    });
    // Sockets the server holds for the flood: descriptors beyond the start, less the attacker's own.
    const sample = setInterval(() => (peak = Math.max(peak, fds() - base - flood.socks.size)), 5);
    onTestFinished(() => clearInterval(sample));
    await flood.done;
    clearInterval(sample);
    const st = link(server);
    // The cap's 2, those lingering, and a few closing in the event loop's turn.
    expect(flood.opened).toBeGreaterThan(4 * REFUSED_LINGER_MAX);
    expect(peak).toBeLessThanOrEqual(2 + REFUSED_LINGER_MAX + 32);
    expect(st.refusalsLingering).toBeLessThanOrEqual(REFUSED_LINGER_MAX);
    expect(st.refusalsCut).toBeGreaterThan(0);
    const qp = await connect(client, server.address, { service: 7, timeoutMs: 5000 });
    qp.destroy();
  }, 20_000);
});
