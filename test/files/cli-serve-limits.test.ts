// `sabre serve --max-connections-per-host N --part-sweep-age-ms MS`: the FileServer options
// maxConnectionsPerHost and partSweepAgeMs from the command line. Before, serve had no flags for
// them (an unknown option: exit 2). A bad value is one line on stderr and exit 2, as every serve
// flag; a good one reaches the server: a second connection from this host past
// --max-connections-per-host 1 is refused with the server's reason, and a put temporary older than
// --part-sweep-age-ms is swept at start where the default (an hour) keeps it. The real binary in
// child processes, real sockets on 127.0.0.1.
import fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileClient } from '../../src/index.js';
import { killAndWait, sabre, spawnServer, tempDirsRemovedAfter } from './helpers.js';

const TOKEN = 'cli-serve-limits-token-0123456789';
const oneLine = (s: string): string[] => s.trim().split('\n');
const dir = tempDirsRemovedAfter();

describe.concurrent('sabre serve --max-connections-per-host / --part-sweep-age-ms: bad values', () => {
  it.each([
    [['--max-connections-per-host', '0'], /^sabre: --max-connections-per-host must be between 1 and 1024, got 0$/],
    [['--max-connections-per-host', '1025'], /--max-connections-per-host must be between 1 and 1024, got 1025/],
    [['--max-connections-per-host', 'many'], /--max-connections-per-host must be an integer, got 'many'/],
    [['--max-connections-per-host', '-3'], /--max-connections-per-host must be an integer, got '-3'/],
    [['--part-sweep-age-ms', '1.5'], /--part-sweep-age-ms must be an integer, got '1.5'/],
    [['--part-sweep-age-ms', '99999999999999999'], /--part-sweep-age-ms must be between 0 and 9007199254740991/],
  ])('serve . %j: one line on stderr, exit 2', async (args, msg) => {
    const r = await sabre(['serve', '.', '-p', '0', '--token', TOKEN, ...(args as string[])]);
    expect(r.code, r.stderr).toBe(2);
    expect(oneLine(r.stderr)).toHaveLength(1);
    expect(r.stderr.trim()).toMatch(msg as RegExp);
  });

  it('both are in serve --help', async () => {
    const r = await sabre(['serve', '--help']);
    expect(r.stdout).toMatch(/--max-connections-per-host N/);
    expect(r.stdout).toMatch(/--part-sweep-age-ms MS/);
  });
});

describe.each(['udp', 'tcp'] as const)('sabre serve --max-connections-per-host 1 over %s', (transport) => {
  it('a second connection from this host is refused (one line, exit 1, the server\'s reason); once the first leaves, it connects', async () => {
    const d = dir(`cli-limit-${transport}`);
    fs.writeFileSync(join(d, 'hello.txt'), 'hello');
    const s = await spawnServer(d, ['--transport', transport, '--max-connections-per-host', '1'], { SABRE_TOKEN: TOKEN });
    try {
      const held = await FileClient.connect(`127.0.0.1:${s.port}`, { token: TOKEN, transport });
      let ended = false;
      try {
        const t0 = performance.now();
        const r = await sabre(['ls', `127.0.0.1:${s.port}`, '--transport', transport], { env: { SABRE_TOKEN: TOKEN } });
        expect(r.code, r.stderr).toBe(1);
        expect(oneLine(r.stderr)).toEqual(['sabre: ls: the server refused: too many connections from your host (maxConnectionsPerHost)']);
        // Refused at once, not after the client's connect deadline (10 s).
        expect(performance.now() - t0).toBeLessThan(8000);
        await held.end();
        ended = true;
        const ok = await sabre(['ls', `127.0.0.1:${s.port}`, '--transport', transport], { env: { SABRE_TOKEN: TOKEN } });
        expect(ok.code, ok.stderr).toBe(0);
        expect(ok.stdout).toMatch(/hello\.txt/);
      } finally {
        if (!ended) await held.end().catch(() => {});
      }
    } finally {
      await killAndWait(s.child);
    }
  }, 60_000);
});

describe('sabre serve --part-sweep-age-ms', () => {
  it('a put temporary older than MS is swept at start; with the default (an hour) it is kept', async () => {
    const d = dir('cli-sweep');
    const part = join(d, '.sabre-00000000000000ab.part');
    fs.writeFileSync(part, 'left by a killed server');
    const t = new Date(Date.now() - 60_000);
    fs.utimesSync(part, t, t);

    const keep = await spawnServer(d, ['--transport', 'udp'], { SABRE_TOKEN: TOKEN });
    await killAndWait(keep.child);
    expect(fs.existsSync(part)).toBe(true);

    const sweep = await spawnServer(d, ['--transport', 'udp', '--part-sweep-age-ms', '30000'], { SABRE_TOKEN: TOKEN });
    await killAndWait(sweep.child);
    expect(fs.existsSync(part)).toBe(false);
  }, 60_000);
});
