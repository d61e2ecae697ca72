// A refused or evicted control pipe lingers up to REFUSED_LINGER_MS (250 ms) for its
// Status(SessionLimit) to be read. That bound was on time only: a stranger connecting as fast as
// it can from many loopback addresses (each new pipe evicting an older one past
// maxUnauthenticatedPipes), keeping its end open, held rate × 250 ms sockets in the server —
// 755 pipes at once against maxPipes 256, in 2 s of one process's connects, growing with the
// rate. Now at most REFUSED_LINGER_MAX linger; past it a pipe is destroyed at once, untold
// (`pipeRefusalsCut`), and a real client still logs in during the flood.
import { describe, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { REFUSED_LINGER_MAX } from '../../src/core/refuse.js';
import { tempDirsRemovedAfter } from '../files/helpers.js';
import { connectFlood } from './flood.js';

const TOKEN = 'linger-flood-0123456789abcdef';
const tempDir = tempDirsRemovedAfter();

describe('a flood of pipes from many addresses, each evicting an older one', () => {
  it('at most maxPipes + REFUSED_LINGER_MAX sockets held; those past the linger bound cut, counted; a real client logs in meanwhile', async ({ expect, onTestFinished }) => {
    const maxPipes = 32;
    const srv = await serveFiles(tempDir('linger'), { port: 0, token: TOKEN, transports: ['tcp'], maxPipes, maxUnauthenticatedPipes: 4 });
    onTestFinished(() => srv.close());
    const port = srv.address.port;
    let peak = 0;
    const sample = setInterval(() => (peak = Math.max(peak, srv.stats().pipes)), 5);
    onTestFinished(() => clearInterval(sample));
    // 64 connects in flight at a time for 1.5 s, each from the next of 127.0.x.y, each kept open a second.
    const flood = connectFlood({ port, ms: 1500, parallel: 64, from: (n) => `127.0.${(n >> 8) & 255}.${(n & 255) || 1}`, holdMs: 1000 });
    onTestFinished(() => {
      for (const s of flood.socks) s.destroy();
    });
    // A real client from 127.0.0.1 during the flood.
    await new Promise((r) => setTimeout(r, 300));
    const c = await FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 8000 });
    await c.end();
    await flood.done;
    clearInterval(sample);
    const st = srv.stats();
    expect(flood.opened).toBeGreaterThan(maxPipes + REFUSED_LINGER_MAX);
    expect(peak).toBeLessThanOrEqual(maxPipes + REFUSED_LINGER_MAX);
    expect(st.pipesLingering).toBeLessThanOrEqual(REFUSED_LINGER_MAX);
    expect(st.pipeRefusalsCut).toBeGreaterThan(0);
    expect(st.pipesEvicted).toBe(st.pipeEvictionsTold + st.pipeEvictionsUntold);
  }, 20_000);
});
