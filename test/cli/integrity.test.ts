// `sabre perf --integrity`: each side's device asks for what its command line says, the header
// and the JSON report show what the connection settled on and what this side asked for
// (docs/integrity.md); the stronger wish of the two sides wins.
import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { MAIN, sabre } from './helpers.js';

describe('sabre perf --integrity', () => {
  it('udp, both sides none (the forked server gets the flag too): header and JSON say none', () => {
    const r = sabre(['perf', 'write_bw', '--transport', 'udp', '-s', '65536', '-n', '100', '--integrity', 'none']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ Integrity {7}: none \(asked none\)$/m);
    const j = sabre(['perf', 'write_bw', '--transport', 'udp', '-s', '4096', '-n', '100', '--integrity', 'crc32c', '--json']);
    expect(j.code, j.stderr).toBe(0);
    expect(JSON.parse(j.stdout).integrity).toBe('crc32c (asked crc32c)');
  });

  it('udp, server crc32c and client none: both settle on crc32c, the client says it asked none', async () => {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const server = spawn(process.execPath, [MAIN, 'perf', 'write_bw', '--server', '-p', String(port), '--transport', 'udp', '--integrity', 'crc32c'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    server.stdout.on('data', (d) => (out += d));
    try {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 10_000);
        server.stdout.on('data', () => {
          if (out.includes('Waiting for client')) {
            clearTimeout(t);
            resolve();
          }
        });
      });
      const c = spawnSync(process.execPath, [MAIN, 'perf', 'write_bw', '127.0.0.1', '-p', String(port), '--transport', 'udp', '-s', '8192', '-n', '100', '--integrity', 'none'], { encoding: 'utf8', timeout: 30_000 });
      expect(c.status, c.stderr).toBe(0);
      expect(c.stdout).toMatch(/^ Integrity {7}: crc32c \(asked none\)$/m);
      await new Promise<number | null>((r) => server.once('exit', (code) => r(code)));
      expect(out).toMatch(/^ Integrity {7}: crc32c \(asked crc32c\)$/m);
    } finally {
      server.kill();
    }
  });

  it('tcp: none on both sides turns MPA CRC off; xxh3 is refused as a usage error', () => {
    const r = sabre(['perf', 'write_bw', '--transport', 'tcp', '-s', '65536', '-n', '100', '--integrity', 'none']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ Integrity {7}: none \(asked none\)$/m);
    const d = sabre(['perf', 'write_bw', '--transport', 'tcp', '-s', '65536', '-n', '100']);
    expect(d.code, d.stderr).toBe(0);
    expect(d.stdout).toMatch(/^ Integrity {7}: crc32c \(asked crc32c\)$/m);
    const x = sabre(['perf', 'write_bw', '--transport', 'tcp', '--integrity', 'xxh3']);
    expect(x.code).toBe(2);
    expect(x.stderr).toMatch(/xxh3 is udp only/);
    expect(sabre(['perf', 'write_bw', '--integrity', 'md5']).code).toBe(2);
  });
});
