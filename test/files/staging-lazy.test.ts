// A connection's staging buffers (what reads and lists are answered from) are registered at its
// first read or list, not at login: a session that only moves files with --dedup (its bytes go
// over dedup channels of their own) never has the server zero-fill them.
import fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileClient } from '../../src/index.js';
import { randomFile, servedDir, tempDir, until } from './helpers.js';

const TOKEN = 'staging-lazy-token';

describe.each(['udp', 'tcp'] as const)('server staging, registered at first use (%s)', (transport) => {
  const served = servedDir(`staging-lazy-${transport}`, { token: TOKEN, transports: [transport] });

  it('a login and a put --dedup register no staging; the first read registers rwDepth × maxReadWriteSize, once; the session\'s end frees it all', async () => {
    const local = tempDir(`staging-lazy-${transport}-local`);
    try {
      randomFile(join(served.dir, 'f.bin'), 1 << 20);
      const up = join(local, 'up.bin');
      randomFile(up, 1 << 20);
      const L = served.srv.limitsFor(transport);
      const staging = L.rwDepth * L.maxReadWriteSize;
      const c = await FileClient.connect(`127.0.0.1:${served.srv.address.port}`, { token: TOKEN, transport });
      const atLogin = served.srv.stats().registeredBytes;
      expect(atLogin).toBeGreaterThan(0);
      expect(atLogin).toBeLessThan(staging + (L.credits + 8) * (L.maxWriteSize + 4096)); // sanity
      await c.put(up, 'f.bin', { dedup: true });
      expect(served.srv.stats().registeredBytes).toBe(atLogin);
      await c.get('f.bin', join(local, 'down.bin'));
      expect(fs.readFileSync(join(local, 'down.bin')).equals(fs.readFileSync(up))).toBe(true);
      expect(served.srv.stats().registeredBytes).toBe(atLogin + staging);
      await c.get('f.bin', join(local, 'down2.bin'));
      expect(served.srv.stats().registeredBytes).toBe(atLogin + staging);
      await c.end();
      await until(() => served.srv.stats().registeredBytes === 0, 10_000, 'the session to free its memory');
    } finally {
      fs.rmSync(local, { recursive: true, force: true });
    }
  }, 60_000);
});
