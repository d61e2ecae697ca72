// The dedup service before its AUTH is proven: the channel is untrusted (the listener's preauth),
// so a stranger's first message is small or refused — never a huge value decoded, a large
// receive ladder registered, or a dedup object assembled — the AUTH has a short deadline, few
// channels wait for theirs, and every refusal is counted. After all of it a real put --dedup works.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectChannel, FileClient, type FileServer, openDevice, serveFiles } from '../../src/index.js';
import type { Device } from '../../src/verbs/device.js';
import { FILE_DEDUP_SERVICE } from '../../src/files/dedup.js';
import { tempDir, until } from './helpers.js';

const TOKEN = 'preauth-dedup-token-0123456789';

describe('the dedup service before the AUTH', () => {
  let dir: string;
  let srv: FileServer;
  let dev: Device;
  let at: { transport: 'udp'; host: string; port: number };
  const used = (): number => (srv.devices.udp!.stats() as { memory: { used: number } }).memory.used;

  beforeAll(async () => {
    dir = tempDir('preauth-dedup');
    fs.writeFileSync(join(dir, 'base.bin'), Buffer.alloc(64 << 10, 3));
    srv = await serveFiles(dir, { token: TOKEN, transports: ['udp'], maxUnauthenticated: 4 });
    dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    at = { transport: 'udp', host: '127.0.0.1', port: srv.devices.udp!.address.port as number };
  }, 30_000);

  afterAll(async () => {
    await dev?.close();
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a huge msgpack value as the first message (one empty object per byte) is refused, not decoded; counted', async () => {
    const before = srv.stats().dedupRefused;
    const ch = await connectChannel(dev, at, { service: FILE_DEDUP_SERVICE, maxMessage: 64 << 20 });
    const huge = new Array<object>(4 << 20).fill({});
    const sent = await ch.send(huge).then(() => 'sent', (e: { code?: string }) => e.code ?? 'failed');
    expect(sent).not.toBe('sent');
    await ch.close().catch(() => undefined);
    await until(() => srv.stats().dedupRefused > before, 10_000, 'the refusal to be counted');
  }, 30_000);

  it('a receive ladder of large slots offered in the HELLO makes the server register little before the AUTH', async () => {
    const base = used();
    const ch = await connectChannel(dev, at, {
      service: FILE_DEDUP_SERVICE, maxMessage: 64 << 20, ladder: [{ slotSize: 4 << 20, slots: 16 }],
    });
    // A first message that makes the server answer (a refusal) into those slots.
    await ch.send({ hello: 1 }).catch(() => undefined);
    await until(() => used() - base > 0 || srv.stats().dedupRefused > 0, 5000, 'the server to answer');
    const peak = used() - base;
    for await (const _ of ch) break;
    expect(peak).toBeLessThan(1 << 20);
    expect(used() - base).toBeLessThan(1 << 20);
    await ch.close().catch(() => undefined);
  }, 30_000);

  it('a dedup send of one repeated chunk as the first message is refused, nothing assembled; counted', async () => {
    const before = srv.stats().dedupRefused;
    const base = used();
    const ch = await connectChannel(dev, at, { service: FILE_DEDUP_SERVICE, maxMessage: 256 << 20 });
    const sent = await ch.send(new Uint8Array(32 << 20), { dedup: true }).then(() => 'sent', (e: { code?: string }) => e.code ?? 'failed');
    expect(sent).not.toBe('sent');
    expect(used() - base).toBeLessThan(1 << 20);
    await ch.close().catch(() => undefined);
    await until(() => srv.stats().dedupRefused > before, 10_000, 'the refusal to be counted');
  }, 60_000);

  it('a silent channel is closed at the AUTH deadline (counted); past maxPending the oldest waiting one is closed for a newer one', async () => {
    const t0 = srv.stats();
    const silent = [];
    for (let i = 0; i < 6; i++) silent.push(await connectChannel(dev, at, { service: FILE_DEDUP_SERVICE }));
    await until(() => srv.stats().dedupEvicted >= t0.dedupEvicted + 2, 10_000, 'two waiting channels evicted');
    expect(srv.stats().dedupPending).toBeLessThanOrEqual(4);
    await until(() => srv.stats().dedupAuthTimeouts >= t0.dedupAuthTimeouts + 4, 10_000, 'the other four to reach the AUTH deadline');
    // The last deadline's close lands a moment after its count (and a channel of the test before
    // may still be waiting out its own): nothing is left pending once they have run.
    await until(() => srv.stats().dedupPending === 0, 10_000, 'no channel left waiting for its AUTH');
    for (const ch of silent) await ch.close().catch(() => undefined);
  }, 30_000);

  it('after all of it a real put --dedup and get --dedup work', async () => {
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'udp' });
    try {
      const local = join(dir, '..', `pd-${process.pid}.bin`);
      fs.writeFileSync(local, Buffer.alloc(64 << 10, 4));
      const r = await c.put(local, 'base.bin', { dedup: true });
      expect(r.dedup).toBeDefined();
      expect(fs.readFileSync(join(dir, 'base.bin')).equals(Buffer.alloc(64 << 10, 4))).toBe(true);
      fs.rmSync(local, { force: true });
    } finally {
      await c.end();
    }
  }, 30_000);
});
