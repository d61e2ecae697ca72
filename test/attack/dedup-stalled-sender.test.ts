// The other half of dedup-stalled-receiver.test.ts: a dedup sender that stops mid-object while
// its transport stays up (a process stopped over tcp; a hostile peer that says nothing more).
// The receiver holds the object being assembled (up to maxMessage) and its landing zone while it
// waits for the rest, and nothing in the dedup protocol ends that wait: only, by chance, a
// channel deadline of its own (the fence of an idle shrink, 2 s + 5 s) or the link giving up on
// the receiver's own unanswered traffic; with shrinkAfterMs 0 it still waited after 40 s.
// The receiving channel now fails (ERR_TIMEOUT) once a transfer it has begun receiving has been
// silent for dedupIdleMs.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { within } from '../lifecycle/within.js';
import { listenChannels, openDevice } from '../../src/index.js';

const SERVICE = 0x53544c53;
const DIST = join(process.cwd(), 'dist', 'index.js');

/** A sender in its own process: a 32 MiB dedup send read piece by piece, stopping itself (SIGSTOP) at 20 MiB, past its first OFFER page. */
function sender(port: number): ChildProcess {
  const src = `
    import { openDevice, connectChannel } from ${JSON.stringify(DIST)};
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    const ch = await connectChannel(dev, { transport: 'tcp', host: '127.0.0.1', port: ${port} }, { service: ${SERVICE}, maxMessage: 64 << 20 });
    const read = async (into, at) => {
      // A turn of the event loop per piece, as a file read gives: the receiver's answers are read meanwhile.
      await new Promise((r) => setTimeout(r, 5));
      if (at >= 20 << 20) process.kill(process.pid, 'SIGSTOP');
      for (let i = 0; i < into.length; i++) into[i] = ((at + i) * 2654435761) >>> 24;
      return into.length;
    };
    await ch.sendDedupFrom({ length: 32 << 20, read });
  `;
  return spawn(process.execPath, ['--input-type=module', '-e', src], { stdio: ['ignore', 'inherit', 'inherit'] });
}

describe('a dedup send whose sender stops mid-object (tcp, a stopped process)', () => {
  it('the receiving channel fails with ERR_TIMEOUT after dedupIdleMs instead of holding the object for ever', async () => {
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    // shrinkAfterMs 0: no shrink of the idle receive slots, whose fence the stopped peer would miss
    // (that deadline ended some of these waits by chance; a channel that never shrinks had none).
    const l = listenChannels(dev, { service: SERVICE, maxMessage: 64 << 20, dedupIdleMs: 2000, shrinkAfterMs: 0 });
    let child: ChildProcess | undefined;
    try {
      const accepted = l[Symbol.asyncIterator]().next();
      child = sender(dev.address.port as number);
      const ch = (await accepted).value!;
      // Bounded: 40 s, far past the 2 s idle deadline.
      const out = await within(ch.next().then(() => 'delivered', (e: { code?: string }) => e.code ?? 'failed'), 40_000).catch((e: Error) => e.message);
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
