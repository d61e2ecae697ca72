// A token holder opens files on a few connections and never closes them. Open files were capped
// per connection (limits.maxOpenFiles 64) and connections per server (maxConnections 64), but
// nothing bounded the server's descriptors as a whole against the process's RLIMIT_NOFILE: a
// Replace open holds two (its temporary and its held directory), so 64 × 64 files could need
// 8192. Under a soft limit of 400 the attacker's opens ran the process out of descriptors, after
// which every other client's open failed with EMFILE (reported as IoError) and new connections
// could not be accepted — no counter said why (this test failed then). Checked now: the server
// caps its open files, all connections and dedup transfers together (ServeOptions.maxOpenFilesTotal,
// by default a quarter of the soft fd limit: 100 here): past it an open, and a dedup transfer at
// its AUTH, is refused with TooManyOpenFiles and counted (openFiles, openFilesRefused), the
// server keeps descriptors for its sockets (another client still connects), and the room comes
// back when the files are closed. The server runs in a child process (dist/, built) under
// `ulimit -n 400`; the clients run here, over tcp on 127.0.0.1.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileClient } from '../../src/index.js';
import { statusCode } from '../../src/files/status.js';
import { FileStatus } from '../../src/wire/files-spec.js';
import { tempDir } from '../files/helpers.js';

const TOKEN = 'attack-fd-exhaust-0123456789abcdef';
const FD_LIMIT = 400;
const TOO_MANY = statusCode(FileStatus.TooManyOpenFiles);

interface Stats { openFiles?: number; openFilesRefused?: number; refusedTooManyOpen: number }

describe('open files across connections, against the process\'s descriptor limit', () => {
  let child: ChildProcess | undefined;
  const dir = tempDir('attack-fd');
  const local = tempDir('attack-fd-local');
  fs.writeFileSync(join(dir, 'hello.txt'), 'hello');
  fs.writeFileSync(join(local, 'put.bin'), Buffer.alloc(4096, 'p'));
  afterAll(() => {
    child?.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  });

  /** The child server's stats (over IPC). */
  const stats = (): Promise<Stats> => new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('no stats from the server')), 5000);
    child!.once('message', (m) => {
      clearTimeout(t);
      resolve(m as Stats);
    });
    child!.send('stats');
  });

  const connect = (port: number): Promise<FileClient> => FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 5000 });

  it(`a token holder holding Replace files open on 4 connections (soft limit ${FD_LIMIT}): refused at the server's cap, counted; another client still connects, is refused cleanly, and opens once they close`, async () => {
    const script = join(local, 'server.mjs');
    fs.writeFileSync(script, `import(${JSON.stringify(join(process.cwd(), 'dist', 'index.js'))}).then(async (m) => {
      const s = await m.serveFiles(${JSON.stringify(dir)}, { token: ${JSON.stringify(TOKEN)}, transports: ['tcp'] });
      process.on('message', () => process.send(s.stats()));
      console.log('PORT ' + s.address.port);
    }).catch((e) => { console.log('FAILED ' + e.message); process.exit(1); });`);
    child = spawn('bash', ['-c', `ulimit -n ${FD_LIMIT}; exec node ${script}`], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      const t = setTimeout(() => reject(new Error(`no port: ${out}`)), 20_000);
      child!.stdout!.on('data', (b: Buffer) => {
        out += b.toString();
        const m = /PORT (\d+)/.exec(out);
        if (m) {
          clearTimeout(t);
          resolve(Number(m[1]));
        }
      });
    });
    const bad: FileClient[] = [];
    let opened = 0;
    let firstRefusal: string | undefined;
    try {
      // Bounded: at most 4 connections × 64 opens (each connection's own cap).
      for (let k = 0; k < 4 && !firstRefusal; k++) {
        const c = await connect(port);
        bad.push(c);
        for (let i = 0; i < 64; i++) {
          try {
            await c.open(`f-${k}-${i}.bin`, { flags: 'replace' });
            opened++;
          } catch (e) {
            firstRefusal = (e as { code?: string }).code;
            break;
          }
        }
      }
      // The server's cap (a quarter of 400), not the process's descriptors, refused the attacker.
      expect(firstRefusal).toBe(TOO_MANY);
      expect(opened).toBe(FD_LIMIT / 4);
      const held = await stats();
      expect(held.openFiles).toBe(FD_LIMIT / 4);
      expect(held.openFilesRefused).toBe(1);

      // Another client: it connects (the server has descriptors left for its sockets), and its
      // open and its put --dedup are refused as what they are, not as an I/O error.
      const h = await connect(port);
      try {
        expect(await h.open('hello.txt').then(() => 'opened', (e: { code?: string }) => e.code)).toBe(TOO_MANY);
        expect(await h.put(join(local, 'put.bin'), 'put.bin', { dedup: true }).then(() => 'put', (e: { code?: string }) => e.code)).toBe(TOO_MANY);
        expect((await stats()).openFilesRefused).toBe(3);
        // The attacker's files closed (its temporaries dropped with its connections): room again.
        for (const c of bad.splice(0)) await c.end().catch(() => undefined);
        const end = Date.now() + 10_000;
        while ((await stats()).openFiles !== 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
        expect((await stats()).openFiles).toBe(0);
        const f = await h.open('hello.txt');
        expect(new TextDecoder().decode(await h.read(f, 0, 100))).toBe('hello');
        await h.close(f);
        expect(await h.put(join(local, 'put.bin'), 'put.bin', { dedup: true }).then(() => 'put', (e: { code?: string }) => e.code)).toBe('put');
        expect((await stats()).openFiles).toBe(0);
      } finally {
        await h.end().catch(() => undefined);
      }
      expect(fs.readdirSync(dir).filter((n) => n.startsWith('.sabre-'))).toEqual([]);
    } finally {
      for (const c of bad) await c.end().catch(() => undefined);
    }
  }, 120_000);
});
