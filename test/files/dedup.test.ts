// put --dedup / get --dedup (src/files/dedup.ts): rsync over RDMA. A 4 MiB v1, then v2 = v1 with
// 10% of it changed (20 scattered 20 KiB runs); the file that results is byte-exact and the
// bytes on the wire — the control pipe and the RDMA device connection, both through counting TCP
// proxies (counted at the socket) — are at most 0.2x of v2. Also: the server's old file changing
// under the transfer; a wrong key; the CLI flag; udp and inproc (no counting, byte-exact).
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { connectChannel } from '../../src/channel/listen.js';
import { dedupAuth, dedupGet, FILE_DEDUP_SERVICE } from '../../src/files/dedup.js';
import { FileClient, type FileServer, serveFiles } from '../../src/files/index.js';
import { openDevice } from '../../src/index.js';
import { countingProxy } from '../dedup/proxy.js';
import { MAIN, tempDir } from './helpers.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const SIZE = 4 << 20;
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** v1 with 10% of its bytes replaced: 20 runs of 20 KiB (~2 KiB short of 10%) at spread offsets. */
function modify(v1: Uint8Array): Uint8Array {
  const v2 = v1.slice();
  const run = Math.floor((SIZE * 0.1) / 20);
  for (let i = 0; i < 20; i++) v2.set(randomBytes(run), Math.floor((i + 0.3) * (SIZE / 20)));
  return v2;
}

async function server(transports: Array<'udp' | 'tcp' | 'inproc'>): Promise<{ srv: FileServer; dir: string }> {
  const dir = tempDir('dedup');
  const srv = await serveFiles(dir, { transports, token: 't0ken' });
  cleanup.push(() => srv.close(), () => fs.rmSync(dir, { recursive: true, force: true }));
  return { srv, dir };
}

/** A client over tcp whose pipe and RDMA connection both go through counting proxies. */
async function countedClient(srv: FileServer) {
  const pipe = await countingProxy({ host: '127.0.0.1', port: srv.address.port });
  const rdma = await countingProxy({ host: '127.0.0.1', port: Number(srv.devices.tcp!.address.port) });
  cleanup.push(() => pipe.close(), () => rdma.close());
  const c = await FileClient.connect({ host: '127.0.0.1', port: pipe.address.port }, { token: 't0ken', transport: 'tcp', via: { host: '127.0.0.1', port: rdma.address.port } });
  cleanup.push(() => c.end());
  const wire = async <T>(f: () => Promise<T>): Promise<[T, number]> => {
    await new Promise((r) => setTimeout(r, 20));
    const b0 = pipe.bytes() + rdma.bytes();
    const v = await f();
    await new Promise((r) => setTimeout(r, 20));
    return [v, pipe.bytes() + rdma.bytes() - b0];
  };
  return { c, wire };
}

describe('put --dedup / get --dedup (rsync over RDMA)', () => {
  it('tcp, counted at the sockets: put v1, put --dedup v2 (10% changed) moves <= 0.2x; get --dedup likewise; byte-exact', async () => {
    const { srv, dir } = await server(['tcp']);
    const { c, wire } = await countedClient(srv);
    const local = tempDir('dedup-local');
    cleanup.push(() => fs.rmSync(local, { recursive: true, force: true }));
    const v1 = new Uint8Array(randomBytes(SIZE));
    const v2 = modify(v1);
    fs.writeFileSync(join(local, 'v1'), v1);
    fs.writeFileSync(join(local, 'v2'), v2);
    const [, plain] = await wire(() => c.put(join(local, 'v1'), 'f.bin'));
    expect(sha(fs.readFileSync(join(dir, 'f.bin')))).toBe(sha(v1));
    const [res, dd] = await wire(() => c.put(join(local, 'v2'), 'f.bin', { dedup: true }));
    expect(sha(fs.readFileSync(join(dir, 'f.bin')))).toBe(sha(v2));
    console.log(`put: plain v1 ${plain} B on the wire; put --dedup v2 ${dd} B = ${(dd / v2.length).toFixed(3)}x of v2; moved ${res.dedup!.bytesMoved} B in ${res.dedup!.chunksMoved}/${res.dedup!.chunks} chunks`);
    expect(res.dedup!.basisBytes).toBe(v1.length);
    expect(dd).toBeLessThanOrEqual(0.2 * v2.length);
    expect(plain).toBeGreaterThan(v1.length);

    // get: the server has v3 (v2 with 10% changed), the client's local copy is v2.
    const v3 = modify(v2);
    fs.writeFileSync(join(dir, 'g.bin'), v3);
    fs.copyFileSync(join(local, 'v2'), join(local, 'copy'));
    const [gres, gd] = await wire(() => c.get('g.bin', join(local, 'copy'), { dedup: true }));
    expect(sha(fs.readFileSync(join(local, 'copy')))).toBe(sha(v3));
    console.log(`get --dedup v3 ${gd} B on the wire = ${(gd / v3.length).toFixed(3)}x; moved ${gres.dedup!.bytesMoved} B`);
    expect(gd).toBeLessThanOrEqual(0.2 * v3.length);
    // With no local copy, get --dedup still works (everything moves).
    const [fresh] = await wire(() => c.get('g.bin', join(local, 'new'), { dedup: true }));
    expect(fresh.dedup!.bytesMoved).toBe(v3.length);
    expect(sha(fs.readFileSync(join(local, 'new')))).toBe(sha(v3));
    expect(srv.stats()).toMatchObject({ dedupPuts: 1, dedupGets: 2, dedupRefused: 0, dedupBasisBytes: v1.length });
  });

  it('the server\'s old file changing during the put: the new file is still byte-exact', async () => {
    const { srv, dir } = await server(['tcp']);
    const c = await FileClient.connect({ host: '127.0.0.1', port: srv.address.port }, { token: 't0ken', transport: 'tcp' });
    cleanup.push(() => c.end());
    const local = tempDir('dedup-local');
    cleanup.push(() => fs.rmSync(local, { recursive: true, force: true }));
    const v1 = new Uint8Array(randomBytes(SIZE));
    const v2 = modify(v1);
    fs.writeFileSync(join(dir, 'f.bin'), v1);
    fs.writeFileSync(join(local, 'v2'), v2);
    // Scribble over the old file (its inode: the fd stays on it after the rename) while the put runs.
    const fd = fs.openSync(join(dir, 'f.bin'), 'r+');
    let n = 0;
    const t = setInterval(() => {
      for (let k = 0; k < 8 && n < 4000; k++, n++) fs.writeSync(fd, randomBytes(4096), 0, 4096, Math.floor(Math.random() * (SIZE - 4096)));
    }, 1);
    try {
      const r = await c.put(join(local, 'v2'), 'f.bin', { dedup: true });
      expect(r.bytes).toBe(v2.length);
    } finally {
      clearInterval(t);
      fs.closeSync(fd);
    }
    expect(n).toBeGreaterThan(0);
    expect(sha(fs.readFileSync(join(dir, 'f.bin')))).toBe(sha(v2));
  });

  it.each(['udp', 'inproc'] as const)('%s: put --dedup and get --dedup byte-exact; a missing file is ERR_FILE_NOT_FOUND and leaves no local file', async (transport) => {
    const { srv, dir } = await server([transport]);
    const c = await FileClient.connect({ host: '127.0.0.1', port: srv.address.port }, { token: 't0ken', transport });
    cleanup.push(() => c.end());
    const local = tempDir('dedup-local');
    cleanup.push(() => fs.rmSync(local, { recursive: true, force: true }));
    const v1 = new Uint8Array(randomBytes(1 << 20));
    fs.writeFileSync(join(dir, 'a'), v1);
    const v2 = v1.slice();
    v2.set(randomBytes(50_000), 300_000);
    fs.writeFileSync(join(local, 'a'), v2);
    const r = await c.put(join(local, 'a'), 'a', { dedup: true });
    expect(sha(fs.readFileSync(join(dir, 'a')))).toBe(sha(v2));
    expect(r.dedup!.bytesMoved).toBeLessThan(200_000);
    fs.writeFileSync(join(local, 'b'), v1);
    const g = await c.get('a', join(local, 'b'), { dedup: true });
    expect(sha(fs.readFileSync(join(local, 'b')))).toBe(sha(v2));
    expect(g.dedup!.bytesMoved).toBeLessThan(200_000);
    await expect(c.get('missing', join(local, 'm'), { dedup: true })).rejects.toMatchObject({ code: 'ERR_FILE_NOT_FOUND' });
    expect(fs.existsSync(join(local, 'm'))).toBe(false);
  });

  it('a dedup channel without a valid key is refused before any file is touched', async () => {
    const { srv, dir } = await server(['inproc']);
    fs.writeFileSync(join(dir, 'secret'), 'x');
    const dev = await openDevice({ transport: 'inproc' });
    cleanup.push(() => dev.close());
    const ch = await connectChannel(dev, srv.devices.inproc!.address, { service: FILE_DEDUP_SERVICE });
    const forged = dedupAuth({ resumeKey: new Uint8Array(24), keyId: new Uint8Array(16), kAuth: new Uint8Array(32) }, 'get', 'secret', false);
    const [, answer] = await Promise.all([ch.send(forged), ch.next()]);
    expect(answer.value).toMatchObject({ ok: false });
    expect(srv.stats()).toMatchObject({ dedupRefused: 1, dedupGets: 0, authUnknownSession: 1 });
  });

  it('the CLI: sabre put --dedup and sabre get --dedup', async () => {
    const { srv, dir } = await server(['tcp']);
    const local = tempDir('dedup-cli');
    cleanup.push(() => fs.rmSync(local, { recursive: true, force: true }));
    const v1 = new Uint8Array(randomBytes(1 << 20));
    fs.writeFileSync(join(dir, 'c'), v1);
    const v2 = v1.slice();
    v2.set(randomBytes(10_000), 0);
    fs.writeFileSync(join(local, 'c'), v2);
    const run = (args: string[]) => promisify(execFile)(process.execPath, [MAIN, ...args], { env: { ...process.env, SABRE_TOKEN: 't0ken' } });
    const put = await run(['put', join(local, 'c'), `127.0.0.1:${srv.address.port}/c`, '--dedup', '--json', '--transport', 'tcp']);
    const pj = JSON.parse(put.stdout.trim());
    expect(pj.dedup.basisBytes).toBe(v1.length);
    expect(pj.dedup.bytesMoved).toBeLessThan(200_000);
    expect(sha(fs.readFileSync(join(dir, 'c')))).toBe(sha(v2));
    fs.writeFileSync(join(local, 'd'), v1);
    const get = await run(['get', `127.0.0.1:${srv.address.port}/c`, join(local, 'd'), '--dedup', '--transport', 'tcp']);
    expect(get.stdout).toMatch(/dedup: \d+ bytes of \d+\/\d+ chunks moved/);
    expect(sha(fs.readFileSync(join(local, 'd')))).toBe(sha(v2));
  });

  it('get --dedup reads and ingests the local copy while it negotiates the channel\'s key (as the channel connects)', async () => {
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    cleanup.push(() => dev.close());
    const local = new Uint8Array(randomBytes(2 << 20));
    let closed = false;
    const basis = {
      size: local.length,
      read: async (into: Uint8Array, length: number, position: number) => {
        const n = Math.min(length, local.length - position);
        into.set(local.subarray(position, position + n));
        return n;
      },
      close: async () => void (closed = true),
    };
    const referenced = (): number => (dev.stats().dedup as { store: { referenced: number } } | undefined)?.store.referenced ?? 0;
    let during = 0;
    const side = {
      dev, address: dev.address, timeoutMs: 2000,
      // The negotiation waits (a slow pipe): the basis goes into the store meanwhile. Bounded: 200 turns.
      negotiate: async (): Promise<never> => {
        for (let i = 0; i < 200 && during === 0; i++) {
          await new Promise((r) => setTimeout(r, 5));
          during = referenced();
        }
        throw new Error('no negotiation in this test');
      },
    };
    await expect(dedupGet(side, 'f.bin', basis)).rejects.toThrow('no negotiation in this test');
    expect(during).toBeGreaterThan(0);
    for (let i = 0; i < 200 && (referenced() > 0 || !closed); i++) await new Promise((r) => setTimeout(r, 5));
    expect(referenced()).toBe(0); // the scope dropped with the failure
    expect(closed).toBe(true); // and the local file closed
  });
});
