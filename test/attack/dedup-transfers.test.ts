// Authenticated but hostile: dedup transfers that are started and never finished. A put --dedup
// makes the server read the file it replaces into memory (the basis, up to dedupMaxBytes) as soon
// as its AUTH is verified, and then wait up to a minute for the new bytes; a client that sends the
// AUTH and nothing more holds that memory for the minute. Each session may have a few channels
// and there are many sessions, so without a bound of its own across sessions a token holder could
// make the server hold sessions × channels × dedupMaxBytes. The transfers under way at once are
// capped server-wide (dedupMaxTransfers): past it an AUTH is refused with SessionLimit, counted,
// before any file is opened or read.
import fs from 'node:fs';
import { join } from 'node:path';
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { type Channel, connectChannel, FileClient, openDevice } from '../../src/index.js';
import { dedupAuth, type DedupReply, FILE_DEDUP_SERVICE } from '../../src/files/dedup.js';
import { FileStatus } from '../../src/wire/files-spec.js';
import { negotiate } from '../files/raw.js';
import { servedDir, until } from '../files/helpers.js';

const TOKEN = 'attack-dedup-transfers-0123456789';
const BASE = 1 << 20;

describe('dedup puts that never send their bytes, from many sessions', () => {
  const served = servedDir('attack-dedup-transfers', { token: TOKEN, transports: ['udp'], dedupMaxTransfers: 3 }, { 'base.bin': 'b'.repeat(BASE) });

  it('10 sessions each start a put --dedup over a 1 MiB file and stall: at most 3 are under way, the rest are refused (counted) without reading the file; an honest put --dedup works once they go', async () => {
    const srv = served.srv;
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const pipes: net.Socket[] = [];
    const chans: Channel[] = [];
    const replies: DedupReply[] = [];
    try {
      for (let i = 0; i < 10; i++) {
        const { neg, pipe } = await negotiate(srv.address.port, TOKEN, 'udp');
        pipes.push(pipe);
        const ch = await connectChannel(dev, { transport: 'udp', host: '127.0.0.1', port: neg.udpPort }, { service: FILE_DEDUP_SERVICE });
        chans.push(ch);
        await ch.send(dedupAuth(neg, 'put', 'base.bin', false));
        const r = await ch.next();
        replies.push(r.value as DedupReply);
      }
      const ok = replies.filter((r) => r.ok).length;
      const busy = replies.filter((r) => !r.ok && r.status === FileStatus.SessionLimit).length;
      expect(ok).toBe(3);
      expect(busy).toBe(7);
      const s = srv.stats();
      expect(s.dedupBusy).toBe(7);
      expect(s.dedupTransfers).toBe(3);
      // Only the transfers under way read their basis.
      expect(s.dedupBasisBytes).toBe(3 * BASE);
    } finally {
      for (const ch of chans) await ch.close().catch(() => undefined);
      for (const p of pipes) p.destroy();
      await dev.close();
    }
    await until(() => srv.stats().dedupTransfers === 0, 15_000, 'the stalled transfers to end with their sessions');
    const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'udp' });
    try {
      const local = join(served.dir, '..', `adt-${process.pid}.bin`);
      fs.writeFileSync(local, Buffer.alloc(BASE, 'c'));
      expect((await c.put(local, 'base.bin', { dedup: true })).dedup).toBeDefined();
      fs.rmSync(local, { force: true });
      expect(fs.readFileSync(join(served.dir, 'base.bin')).equals(Buffer.alloc(BASE, 'c'))).toBe(true);
    } finally {
      await c.end();
    }
  }, 60_000);
});
