// Dedup channels waiting for their AUTH are few (maxUnauthenticated); past it one of them is
// closed for the newcomer. It was the oldest of all, whoever opened it: a stranger opening
// channels faster than an honest client's AUTH arrives (a slow link, a loaded client) closed the
// client's channel. Now it is the oldest of the source holding the most, as the file server's
// other pre-authentication caps make room: the stranger churns its own share.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Channel, connectChannel, type FileServer, openDevice, serveFiles } from '../../src/index.js';
import type { Device } from '../../src/verbs/device.js';
import { FILE_DEDUP_SERVICE } from '../../src/files/dedup.js';
import { tempDir, until } from '../files/helpers.js';

const TOKEN = 'attack-dedup-pending-0123456789';

describe('dedup channels from a stranger while a client\'s AUTH is on its way', () => {
  let dir: string;
  let srv: FileServer;
  let client: Device;
  let stranger: Device;

  beforeAll(async () => {
    dir = tempDir('atk-dedup-pending');
    srv = await serveFiles(dir, { token: TOKEN, transports: ['udp'], maxUnauthenticated: 4 });
    client = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    stranger = await openDevice({ transport: 'udp', host: '127.0.0.2', port: 0 });
  }, 30_000);

  afterAll(async () => {
    await client?.close();
    await stranger?.close();
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('6 channels from 127.0.0.2 after one from 127.0.0.1 (its AUTH not yet sent): the stranger\'s own are closed, the client\'s stays', async () => {
    const at = { transport: 'udp' as const, host: '127.0.0.1', port: srv.devices.udp!.address.port as number };
    const t0 = srv.stats();
    const mine = await connectChannel(client, at, { service: FILE_DEDUP_SERVICE });
    let closed = false;
    void mine.next().then(() => (closed = true), () => (closed = true));
    await until(() => srv.stats().dedupPending === 1, 5000, 'the client\'s channel to wait for its AUTH');
    const theirs: Channel[] = [];
    try {
      for (let i = 0; i < 6; i++) theirs.push(await connectChannel(stranger, at, { service: FILE_DEDUP_SERVICE }));
      await until(() => srv.stats().dedupEvicted === t0.dedupEvicted + 3, 5000, 'three waiting channels closed for newer ones');
      // A close travels to its peer in a round trip; the stranger's evicted ones have heard of theirs.
      await until(() => theirs.filter((c) => c.stats().state !== 'open').length >= 3, 5000, 'the stranger to hear of three closes');
      // Before: the client's channel, the oldest, was the first closed.
      expect(closed).toBe(false);
      expect(srv.stats().dedupPending).toBe(4);
    } finally {
      await mine.close().catch(() => undefined);
      for (const c of theirs) await c.close().catch(() => undefined);
    }
  }, 30_000);
});
