// A dedup send waits on its receiver at every step: the receiver's HELLO after the OPEN, a NEED
// for each OFFER page, a GRANT for each slot, the END. A receiver that stops answering while its
// transport stays up — a process stopped (SIGSTOP) whose kernel still acknowledges tcp, or a
// hostile client that says nothing — left the send waiting for ever: nothing in the dedup
// protocol has a deadline of its own ("the pipe's are the transfer's"), and the channel had none
// for it. On the file server that was a get --dedup holding its open file, its staging memory and
// a transfer slot without end. The sending channel now fails (ERR_TIMEOUT) once the receiver has
// said nothing and no write of the send has completed for dedupIdleMs.
//
// Over tcp only: over udp a stopped peer stops acknowledging, and the link's retries end the
// channel already.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { within } from '../lifecycle/within.js';
import { listenChannels, openDevice } from '../../src/index.js';

const SERVICE = 0x5354414c;
const DIST = join(process.cwd(), 'dist', 'index.js');

/**
 * A receiver in its own process: connects a channel to `port` and takes what comes; 'ready' once
 * connected. It stops itself (SIGSTOP) at the first bytes of the object it verified: mid-transfer,
 * with its HELLO and first NEED sent.
 */
function receiver(port: number): Promise<ChildProcess> {
  const src = `
    import { openDevice, connectChannel } from ${JSON.stringify(DIST)};
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    const ch = await connectChannel(dev, { transport: 'tcp', host: '127.0.0.1', port: ${port} }, { service: ${SERVICE}, maxMessage: 64 << 20 });
    ch.dedupBasis('stall', new Uint8Array(32).fill(7), undefined, () => process.kill(process.pid, 'SIGSTOP'));
    process.send('ready');
    for await (const m of ch) void m;
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', src], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the receiver did not connect')), 20_000);
    child.once('message', () => {
      clearTimeout(t);
      resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`the receiver exited ${code}`)));
  });
}

describe('a dedup send whose receiver stops answering (tcp, a stopped process)', () => {
  it('the send fails with ERR_TIMEOUT after dedupIdleMs and the channel fails, instead of waiting for ever', async () => {
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    const l = listenChannels(dev, { service: SERVICE, maxMessage: 64 << 20, dedupIdleMs: 2000 });
    let child: ChildProcess | undefined;
    try {
      const accepted = l[Symbol.asyncIterator]().next();
      child = await receiver(dev.address.port as number);
      const ch = (await accepted).value!;
      const bytes = new Uint8Array(32 << 20).map((_, i) => (i * 2654435761) >>> 24);
      // Bounded: the old code waited for ever; 40 s is far past the 2 s idle deadline.
      const out = await within(ch.send(bytes, { dedup: true }).then(() => 'sent', (e: { code?: string }) => e.code ?? 'failed'), 40_000).catch((e: Error) => e.message);
      expect(child.signalCode ?? 'stopped').toBe('stopped');
      expect(out).toBe('ERR_TIMEOUT');
      expect(ch.stats().state).toBe('failed');
    } finally {
      child?.kill('SIGKILL');
      l.close();
      await dev.close();
    }
  }, 60_000);
});
