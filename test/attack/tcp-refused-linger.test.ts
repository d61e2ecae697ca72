// A connection refused past maxConnectionsPerHost (or maxConnections) is written an MPA Reply
// with Reject and lingers up to REFUSED_LINGER_MS (250 ms) for it to be read. That was bounded in
// time only: a host connecting as fast as it can past its cap, keeping its end open, made the
// device hold rate × 250 ms refused sockets (file descriptors) on top of its caps. Now at most
// REFUSED_LINGER_MAX linger; past it a refused socket is destroyed at once (`refusalsCut`).
// Measured as the process's descriptors less the attacker's own sockets open at that instant.
import fs from 'node:fs';
import net from 'node:net';
import { describe, it } from 'vitest';
import { connect, type Device, listen, openDevice } from '../../src/index.js';
import { REFUSED_LINGER_MAX } from '../../src/core/refuse.js';

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
    const socks = new Set<net.Socket>();
    onTestFinished(() => {
      for (const s of socks) s.destroy();
    });
    const base = fds();
    let peak = 0;
    let opened = 0;
    // Sockets the server holds for the flood: descriptors beyond the start, less the attacker's own.
    const sample = setInterval(() => (peak = Math.max(peak, fds() - base - socks.size)), 5);
    onTestFinished(() => clearInterval(sample));
    const t0 = performance.now();
    await new Promise<void>((done) => {
      let inflight = 0;
      const one = (): void => {
        if (performance.now() - t0 > 1500 || opened >= 20_000) {
          if (inflight === 0) done();
          return;
        }
        inflight++;
        opened++;
        const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2', allowHalfOpen: true });
        socks.add(s);
        let settled = false;
        const next = (): void => {
          if (settled) return;
          settled = true;
          inflight--;
          setImmediate(one);
        };
        s.on('connect', next);
        s.on('error', next);
        s.on('close', () => {
          socks.delete(s);
          next();
        });
        setTimeout(() => s.destroy(), 1000);
      };
      for (let i = 0; i < 32; i++) one();
    });
    clearInterval(sample);
    const st = link(server);
    // The cap's 2, those lingering, and a few closing in the event loop's turn.
    expect(opened).toBeGreaterThan(4 * REFUSED_LINGER_MAX);
    expect(peak).toBeLessThanOrEqual(2 + REFUSED_LINGER_MAX + 32);
    expect(st.refusalsLingering).toBeLessThanOrEqual(REFUSED_LINGER_MAX);
    expect(st.refusalsCut).toBeGreaterThan(0);
    const qp = await connect(client, server.address, { service: 7, timeoutMs: 5000 });
    qp.destroy();
  }, 20_000);
});
