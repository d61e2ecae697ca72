// The pipeline of get and put: transfers cut at whole segments of the device's mss, deeper
// defaults on udp than tcp (explicit limits win), and the devices' integrity chosen through
// ServeOptions / ConnectOptions.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileClient, type FileServer, serveFiles } from '../../src/index.js';
import { fitToSegments } from '../../src/files/client.js';
import { randomFile, sha256File, tempDir } from './helpers.js';

const TOKEN = 'pipeline-token';

describe('fitToSegments', () => {
  it('cuts a message to whole segments, header included', () => {
    // The audit's numbers: a 256 KiB Write (32-byte header) at mss 64 858 went as 5 datagrams.
    expect(fitToSegments(262_144, 32, 64_858)).toBe(4 * 64_858 - 32);
    expect(fitToSegments(1 << 20, 0, 64_858)).toBe(16 * 64_858);
    // Already whole: unchanged. Smaller than one segment: the maximum itself.
    expect(fitToSegments(4 * 1000 - 32, 32, 1000)).toBe(4 * 1000 - 32);
    expect(fitToSegments(500, 32, 64_858)).toBe(500);
  });
});

describe('get / put pipeline over a real server', () => {
  let dir: string;
  let local: string;
  let srv: FileServer;

  beforeAll(async () => {
    dir = tempDir('pipeline');
    local = tempDir('pipeline-local');
    srv = await serveFiles(dir, { token: TOKEN, integrity: 'none' });
  }, 30_000);

  afterAll(async () => {
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  });

  it('the devices run the integrity asked for', () => {
    expect(srv.devices.udp!.integrity).toBe('none');
    expect(srv.devices.tcp!.integrity).toBe('none');
  });

  it('udp gets deeper defaults than tcp (staging buffers, sinks, write buffers); both take 1 MiB Writes on 16 credits', async () => {
    const u = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'udp', integrity: 'none' });
    const t = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'tcp', integrity: 'none' });
    try {
      expect([u.limits.rwDepth, u.limits.creditsMax, u.limits.maxWriteSize]).toEqual([16, 16, 1 << 20]);
      expect([t.limits.rwDepth, t.limits.creditsMax, t.limits.maxWriteSize]).toEqual([4, 16, 1 << 20]);
      expect([u.pipeline.sinks, u.pipeline.writeBuffers]).toEqual([16, 16]);
      expect([t.pipeline.sinks, t.pipeline.writeBuffers]).toEqual([8, 8]);
      const mss = srv.devices.udp!.nic.mss;
      expect(u.pipeline.readChunk % mss).toBe(0);
      expect((u.pipeline.writeChunk + 32) % mss).toBe(0);
      expect(u.pipeline.readChunk).toBeLessThanOrEqual(u.limits.maxReadWriteSize);
      expect(u.pipeline.writeChunk).toBeLessThanOrEqual(u.limits.maxWriteSize);
    } finally {
      await u.end();
      await t.end();
    }
  });

  it('explicit limits win over the provider defaults', async () => {
    const d = tempDir('pipeline-explicit');
    const s = await serveFiles(d, { token: TOKEN, transports: ['udp'], limits: { rwDepth: 2, credits: 8 } });
    try {
      const c = await FileClient.connect(`127.0.0.1:${s.address.port}`, { token: TOKEN, sinks: 3, writeBuffers: 5 });
      expect([c.limits.rwDepth, c.limits.creditsMax, c.pipeline.sinks, c.pipeline.writeBuffers]).toEqual([2, 8, 3, 5]);
      await c.end();
      const plain = await FileClient.connect(`127.0.0.1:${s.address.port}`, { token: TOKEN, segmentFit: false });
      expect([plain.pipeline.readChunk, plain.pipeline.writeChunk]).toEqual([plain.limits.maxReadWriteSize, plain.limits.maxWriteSize]);
      await plain.end();
    } finally {
      await s.close();
      fs.rmSync(d, { recursive: true, force: true });
    }
  });

  for (const transport of ['udp', 'tcp'] as const) {
    it(`get and put at the fitted sizes are byte-exact (${transport}, a size that is no multiple of either chunk)`, async () => {
      const size = 5 * (1 << 20) + 12_345;
      const sum = randomFile(join(dir, `src-${transport}.bin`), size);
      const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport, integrity: 'none' });
      try {
        await c.get(`src-${transport}.bin`, join(local, `got-${transport}.bin`));
        expect(sha256File(join(local, `got-${transport}.bin`))).toBe(sum);
        await c.put(join(local, `got-${transport}.bin`), `back-${transport}.bin`);
        expect(sha256File(join(dir, `back-${transport}.bin`))).toBe(sum);
        const f = await c.open(`src-${transport}.bin`);
        const all = await c.read(f, 0, size);
        expect(Buffer.from(all).equals(fs.readFileSync(join(dir, `src-${transport}.bin`)))).toBe(true);
        await c.close(f);
      } finally {
        await c.end();
      }
    }, 60_000);
  }
});
