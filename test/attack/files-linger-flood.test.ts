// A refused or evicted control pipe lingers up to REFUSED_LINGER_MS (250 ms) for its
// Status(SessionLimit) to be read. That bound was on time only: a stranger connecting as fast as
// it can from many loopback addresses (each new pipe evicting an older one past
// maxUnauthenticatedPipes), keeping its end open, held rate × 250 ms sockets in the server —
// 755 pipes at once against maxPipes 256, in 2 s of one process's connects, growing with the
// rate. Now at most REFUSED_LINGER_MAX linger; past it a pipe is destroyed at once, untold
// (`pipeRefusalsCut`), and a real client still logs in during the flood.
import net from 'node:net';
import { describe, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { REFUSED_LINGER_MAX } from '../../src/core/refuse.js';
import { tempDirsRemovedAfter } from '../files/helpers.js';

const TOKEN = 'linger-flood-0123456789abcdef';
const tempDir = tempDirsRemovedAfter();

describe('a flood of pipes from many addresses, each evicting an older one', () => {
  it('at most maxPipes + REFUSED_LINGER_MAX sockets held; those past the linger bound cut, counted; a real client logs in meanwhile', async ({ expect, onTestFinished }) => {
    const maxPipes = 32;
    const srv = await serveFiles(tempDir('linger'), { port: 0, token: TOKEN, transports: ['tcp'], maxPipes, maxUnauthenticatedPipes: 4 });
    onTestFinished(() => srv.close());
    const port = srv.address.port;
    let peak = 0;
    let opened = 0;
    const socks = new Set<net.Socket>();
    onTestFinished(() => {
      for (const s of socks) s.destroy();
    });
    const sample = setInterval(() => (peak = Math.max(peak, srv.stats().pipes)), 5);
    onTestFinished(() => clearInterval(sample));
    const t0 = performance.now();
    // 64 connects in flight at a time for 1.5 s, each from the next of 127.0.x.y; the stranger
    // keeps its end open (half-open: it does not answer the server's FIN) for a second.
    const flood = new Promise<void>((done) => {
      let inflight = 0;
      const one = (): void => {
        if (performance.now() - t0 > 1500 || opened >= 20_000) {
          if (inflight === 0) done();
          return;
        }
        inflight++;
        opened++;
        const s = net.connect({ host: '127.0.0.1', port, localAddress: `127.0.${(opened >> 8) & 255}.${(opened & 255) || 1}`, allowHalfOpen: true });
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
      for (let i = 0; i < 64; i++) one();
    });
    // A real client from 127.0.0.1 during the flood.
    await new Promise((r) => setTimeout(r, 300));
    const c = await FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 8000 });
    await c.end();
    await flood;
    clearInterval(sample);
    const st = srv.stats();
    expect(opened).toBeGreaterThan(maxPipes + REFUSED_LINGER_MAX);
    expect(peak).toBeLessThanOrEqual(maxPipes + REFUSED_LINGER_MAX);
    expect(st.pipesLingering).toBeLessThanOrEqual(REFUSED_LINGER_MAX);
    expect(st.pipeRefusalsCut).toBeGreaterThan(0);
    expect(st.pipesEvicted).toBe(st.pipeEvictionsTold + st.pipeEvictionsUntold);
  }, 20_000);
});
