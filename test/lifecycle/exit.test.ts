// Nothing a listener holds outlives it: a child process that listens, leaves waits pending and a
// connection unaccepted, then closes the listener (or only its device) must exit on its own,
// promptly — a timer or a registration left behind would keep its event loop alive. The file
// server, whose listeners live inside serveFiles, likewise. Children load dist/ (npm run build:ts).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const child = fileURLToPath(new URL('./exit.child.mjs', import.meta.url));

/** Run the child; resolves with how long it lived past printing "closed" (rejects past `boundMs`). */
function run(args: string[], boundMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [child, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let closedAt = 0;
    let t: ReturnType<typeof setTimeout> | undefined;
    const overall = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`child did not finish in 20 s: ${out} ${err}`));
    }, 20_000);
    p.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (!closedAt && out.includes('closed')) {
        closedAt = performance.now();
        t = setTimeout(() => {
          p.kill('SIGKILL');
          reject(new Error(`child still alive ${boundMs} ms after closing everything`));
        }, boundMs);
      }
    });
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('exit', (code) => {
      clearTimeout(overall);
      if (t) clearTimeout(t);
      if (code !== 0) reject(new Error(`child exited ${code}: ${err}`));
      else if (!closedAt) reject(new Error(`child never closed: ${out} ${err}`));
      else resolve(performance.now() - closedAt);
    });
  });
}

describe.each(['udp', 'tcp', 'inproc'] as const)('nothing outlives a closed listener over %s', (t) => {
  it.each([
    ['cm', 'listener'], ['cm', 'device'], ['channel', 'listener'], ['channel', 'device'],
  ])('%s listener, closed by its %s: the process exits', async (what, how) => {
    expect(await run([what, t, how], 3000)).toBeLessThan(3000);
  }, 30_000);
});

describe.each(['udp', 'tcp'] as const)('the file server over %s', (t) => {
  it('closed (twice): the process exits', async () => {
    expect(await run(['files', t], 3000)).toBeLessThan(3000);
  }, 30_000);
});
