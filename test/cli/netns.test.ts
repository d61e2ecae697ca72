// `sabre perf` between two hosts: a server in one network namespace, the client in another,
// joined by a veth pair (impaired as test/netns.ts does: sabre's UDP must cope with the loss).
// Before the fix the server bound its device to 127.0.0.1, which the other host cannot reach.
// Needs root, ip and nft; skips with the reason otherwise.
import { spawn, spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { impairedLink, netnsUnavailable, removeImpairedLinks } from '../netns.js';
import { MAIN } from './helpers.js';

const why = netnsUnavailable();
if (why) console.warn(`cli netns test: skipping: ${why}`);

afterAll(() => removeImpairedLinks());

describe.skipIf(why !== undefined)('sabre perf across two hosts (network namespaces)', () => {
  it('the client in one namespace runs write_bw and read_lat against a server in the other', async () => {
    const { NA, NB, IPA, IPB } = impairedLink('pf', 93);
    for (const [test, args] of [['write_bw', ['-s', '4096', '-n', '200']], ['read_lat', ['-s', '64', '-n', '50']]] as const) {
      const port = String(20000 + Math.floor(Math.random() * 20000));
      const server = spawn('ip', ['netns', 'exec', NA, process.execPath, MAIN, 'perf', test, '--server', '-p', port, '--transport', 'udp'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      server.stdout.on('data', (d) => (out += d));
      const exited = new Promise<number | null>((r) => server.once('exit', (c) => r(c)));
      try {
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 15_000);
          server.stdout.on('data', () => out.includes('Waiting for client') && (clearTimeout(t), resolve()));
        });
        const c = spawnSync('ip', ['netns', 'exec', NB, process.execPath, MAIN, 'perf', test, IPA, '-p', port, '--transport', 'udp', ...args, '--json'], { encoding: 'utf8', timeout: 60_000 });
        expect(c.status, `${test}: ${c.stderr}`).toBe(0);
        const j = JSON.parse(c.stdout);
        expect(j.remote.address.host).toBe(IPA);
        expect(j.local.address.host).toBe(IPB);
        expect(j.results[0].iterations).toBe(Number(args[3]));
        expect(await exited).toBe(0);
        expect(out).toMatch(new RegExp(`^ ${args[1]}\\s+${args[3]}\\s`, 'm'));
      } finally {
        server.kill('SIGKILL');
      }
    }
  }, 120_000);
});
