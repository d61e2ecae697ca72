// 1 GiB each way through the real binary, server and client in separate processes, on udp and
// tcp, checked by sha256. The slowest tests of the file service (each case is tens of seconds
// on this 2-vCPU machine); FILES_BIG=0 skips them.
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAndWait, randomFile, sabre, sha256File, spawnServer, tempDir } from './helpers.js';

const GIB = 1 << 30;
const TOKEN = 'big-token';

describe.skipIf(process.env.FILES_BIG === '0').each(['udp', 'tcp'] as const)('1 GiB over %s (sabre serve / get / put in separate processes)', (transport) => {
  let dir: string;
  let local: string;
  let sum: string;
  let srv: Awaited<ReturnType<typeof spawnServer>>;
  beforeAll(async () => {
    dir = tempDir(`big-${transport}`);
    local = tempDir(`big-${transport}-local`);
    sum = randomFile(join(dir, 'gib.bin'), GIB);
    srv = await spawnServer(dir, ['--transport', transport], { SABRE_TOKEN: TOKEN });
  }, 120_000);
  afterAll(async () => {
    if (srv) await killAndWait(srv.child, 'SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  });

  it('get then put of 1 GiB are byte-exact', async () => {
    const g = await sabre(['get', `127.0.0.1:${srv.port}/gib.bin`, join(local, 'gib.bin'), '--transport', transport, '--json'], { env: { SABRE_TOKEN: TOKEN }, timeoutMs: 400_000 });
    expect(g.code, g.stderr).toBe(0);
    const gj = JSON.parse(g.stdout);
    expect(gj).toMatchObject({ bytes: GIB, transport });
    expect(sha256File(join(local, 'gib.bin'))).toBe(sum);
    const p = await sabre(['put', join(local, 'gib.bin'), `127.0.0.1:${srv.port}/back.bin`, '--transport', transport, '--json'], { env: { SABRE_TOKEN: TOKEN }, timeoutMs: 400_000 });
    expect(p.code, p.stderr).toBe(0);
    expect(JSON.parse(p.stdout)).toMatchObject({ bytes: GIB, transport });
    expect(sha256File(join(dir, 'back.bin'))).toBe(sum);
    console.log(`1 GiB ${transport}: get ${(GIB / 1e6 / gj.seconds).toFixed(0)} MB/s, put ${(GIB / 1e6 / JSON.parse(p.stdout).seconds).toFixed(0)} MB/s`);
  }, 900_000);
});
