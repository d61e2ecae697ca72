// `sabre serve / get / put / ls` as a user runs them: the real binary (dist/cli/main.js) in child
// processes. Every failure mode is one line on stderr and a non-zero exit (1 operational, 2 usage).
import fs from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAndWait, randomFile, sabre, sha256File, spawnServer, tempDir, until } from './helpers.js';

const TOKEN = 'cli-token';
const oneLine = (s: string): string[] => s.trim().split('\n');

describe.concurrent('sabre serve / get / put / ls: usage', () => {
  it.each([
    [['serve'], /serve needs a directory/],
    [['serve', 'a', 'b'], /serve takes one directory/],
    [['serve', '.', '--transport', 'carrier-pigeon'], /--transport must be one of udp\|tcp/],
    [['get', '127.0.0.1:7070/x'], /get takes HOST:PORT\/PATH LOCALFILE/],
    [['get', '127.0.0.1/x', 'y', '--token', 't'], /expected HOST:PORT\/PATH/],
    [['get', '127.0.0.1:7070', 'y', '--token', 't'], /names no remote file/],
    [['put', 'x', '127.0.0.1:70000/y', '--token', 't'], /port must be between 1 and 65535/],
    [['ls', '127.0.0.1:7070'], /ls needs the server's token: --token T or SABRE_TOKEN/],
    [['ls', '127.0.0.1:7070', '--bogus', '--token', 't'], /bogus/],
    [['get', '127.0.0.1:7070/x', 'y', '--token', 't', '--integrity', 'md5'], /--integrity must be one of xxh3\|crc32c\|none/],
    [['serve', '.', '--integrity', 'sha1'], /--integrity must be one of xxh3\|crc32c\|none/],
  ])('%j: one line on stderr, exit 2', async (args, msg) => {
    const r = await sabre(args as string[], { env: { SABRE_TOKEN: '' } });
    expect(r.code, r.stderr).toBe(2);
    expect(oneLine(r.stderr)).toHaveLength(1);
    expect(r.stderr).toMatch(msg as RegExp);
  });

  it('has help for each command and lists them in the main help', async () => {
    for (const c of ['serve', 'get', 'put', 'ls']) {
      const r = await sabre([c, '--help']);
      expect(r.code, c).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`usage: sabre ${c}`));
    }
    expect((await sabre(['--help'])).stdout).toMatch(/serve DIR/);
  });

  it('serve DIR that does not exist: one line, exit 1', async () => {
    const r = await sabre(['serve', '/nonexistent/sabre-dir', '-p', '0', '--token', 't']);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toEqual(['sabre: serve: /nonexistent/sabre-dir is not a directory']);
  });
});

describe.each(['udp', 'tcp'] as const)('sabre serve / get / put / ls over %s', (transport) => {
  let dir: string;
  let local: string;
  let srv: Awaited<ReturnType<typeof spawnServer>>;
  let sum: string;
  const at = (p: string): string => `127.0.0.1:${srv.port}/${p}`;
  const run = (args: string[], token = TOKEN) => sabre([...args, '--transport', transport], { env: { SABRE_TOKEN: token } });

  beforeAll(async () => {
    dir = tempDir(`cli-${transport}`);
    local = tempDir(`cli-${transport}-local`);
    sum = randomFile(join(dir, 'data.bin'), 3 * (1 << 20) + 11);
    fs.mkdirSync(join(dir, 'sub'));
    fs.writeFileSync(join(dir, 'sub', 'a.txt'), 'hello');
    // The put's source, a copy made here rather than the get's output: the tests below run at
    // once (each is a client process against this one server, touching files of its own).
    fs.copyFileSync(join(dir, 'data.bin'), join(local, 'src.bin'));
    srv = await spawnServer(dir, ['--transport', transport], { SABRE_TOKEN: TOKEN });
  }, 30_000);

  afterAll(async () => {
    await killAndWait(srv.child, 'SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  });

  it.concurrent('get --json: one object with bytes, seconds, transport; byte-exact', async () => {
    const r = await run(['get', at('data.bin'), join(local, 'data.bin'), '--json']);
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j).toMatchObject({ bytes: 3 * (1 << 20) + 11, transport });
    expect(j.seconds).toBeGreaterThan(0);
    expect(oneLine(r.stdout)).toHaveLength(1);
    expect(r.stderr).toBe(''); // no progress: stderr is not a terminal
    expect(sha256File(join(local, 'data.bin'))).toBe(sum);
  });

  it.concurrent('put --json and a summary line without it; the server renames the upload into place', async () => {
    const r = await run(['put', join(local, 'src.bin'), at('sub/up.bin'), '--json', '--fsync']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ bytes: 3 * (1 << 20) + 11, transport });
    expect(sha256File(join(dir, 'sub', 'up.bin'))).toBe(sum);
    const plain = await run(['put', join(local, 'src.bin'), at('sub/up2.bin')]);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toMatch(/^put 127\.0\.0\.1:\d+\/sub\/up2\.bin: 3145739 bytes in [\d.]+ s \([\d.]+ MB\/s, (udp|tcp)\)\n$/);
  });

  it.concurrent('ls and ls --json', async () => {
    const r = await run(['ls', at('sub')]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^- 0644\s+5 \S+ a\.txt$/m);
    const top = await run(['ls', `127.0.0.1:${srv.port}`, '--json']);
    const j = JSON.parse(top.stdout);
    expect(j.entries.map((e: { name: string }) => e.name)).toEqual(['data.bin', 'sub']);
  });

  it.concurrent('ls --json: { path, entries } with name, type, mode, size and mtimeMs as the file system has them', async () => {
    const r = await run(['ls', at('sub'), '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(oneLine(r.stdout)).toHaveLength(1);
    const j = JSON.parse(r.stdout) as { path: string; entries: Record<string, unknown>[] };
    expect(j.path).toBe('/sub');
    const st = fs.statSync(join(dir, 'sub', 'a.txt'));
    expect(j.entries.find((e) => e.name === 'a.txt')).toEqual({ name: 'a.txt', type: 'file', mode: st.mode & 0o7777, size: 5, mtimeMs: Math.floor(st.mtimeMs) });
    const top = JSON.parse((await run(['ls', `127.0.0.1:${srv.port}`, '--json'])).stdout) as { path: string; entries: Record<string, unknown>[] };
    expect(top.path).toBe('/');
    expect(top.entries.find((e) => e.name === 'sub')).toMatchObject({ type: 'directory' });
    expect(top.entries.find((e) => e.name === 'data.bin')).toMatchObject({ type: 'file', size: 3 * (1 << 20) + 11 });
    for (const e of top.entries) expect(Object.keys(e).sort()).toEqual(['mode', 'mtimeMs', 'name', 'size', 'type']);
  });

  it.concurrent('--integrity: a server and a client that ask for one still move the bytes exactly', async () => {
    const mode = transport === 'udp' ? 'crc32c' : 'none';
    const s = await spawnServer(dir, ['--transport', transport, '--integrity', mode], { SABRE_TOKEN: TOKEN });
    try {
      await until(() => s.stdout().includes(`integrity ${mode}`), 5000, 'the banner to name the integrity');
      const r = await sabre(['get', `127.0.0.1:${s.port}/data.bin`, join(local, 'integrity.bin'), '--transport', transport, '--integrity', mode, '--json'], { env: { SABRE_TOKEN: TOKEN } });
      expect(r.code, r.stderr).toBe(0);
      expect(sha256File(join(local, 'integrity.bin'))).toBe(sum);
    } finally {
      await killAndWait(s.child, 'SIGTERM');
    }
  });

  it.concurrent.each([
    ['a wrong token', ['get', 'data.bin', 'x'], 'wrong-token', /sabre: get: the server refused the token/],
    ['a missing file', ['get', 'nothing.bin', 'x'], TOKEN, /sabre: get: open nothing\.bin: no such file or directory/],
    ['a path outside DIR', ['get', 'sub/../../etc/passwd', 'x'], TOKEN, /sabre: get: open sub\/..\/..\/etc\/passwd: the path leaves the served directory/],
    ['a local file that is missing', ['put', 'nothing-here.bin', 'x'], TOKEN, /sabre: put: .*nothing-here\.bin: no such file or directory/],
  ])('%s: one line on stderr, exit 1', async (_what, args, token, msg) => {
    const [cmd, a, b] = args as [string, string, string];
    const argv = cmd === 'get' ? [cmd, at(a), join(local, b)] : [cmd, join(local, a), at(b)];
    const r = await run(argv, token as string);
    expect(r.code, r.stderr).toBe(1);
    expect(oneLine(r.stderr)).toHaveLength(1);
    expect(r.stderr).toMatch(msg as RegExp);
    expect(fs.existsSync(join(local, 'x'))).toBe(false);
  });

  it.concurrent('the server gone: one line, exit 1', async () => {
    const free = net.createServer();
    await new Promise<void>((res) => free.listen(0, '127.0.0.1', res));
    const port = (free.address() as net.AddressInfo).port;
    free.close();
    const r = await run(['get', `127.0.0.1:${port}/data.bin`, join(local, 'gone.bin')]);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toHaveLength(1);
    expect(r.stderr).toMatch(/sabre: get: cannot reach 127\.0\.0\.1:\d+: ECONNREFUSED/);
  });
});

describe.concurrent('sabre serve: token, read-only, a server killed mid-transfer', () => {
  it('serve without a token prints a random one, which clients then need', async () => {
    const dir = tempDir('cli-token');
    fs.writeFileSync(join(dir, 'f'), 'x');
    const s = await spawnServer(dir, [], { SABRE_TOKEN: '' });
    try {
      await until(() => /token: (\S+)/.test(s.stdout()), 5000, 'the token line');
      const token = /token: (\S+)/.exec(s.stdout())![1]!;
      expect(token).toBe(s.token);
      expect(token.length).toBeGreaterThanOrEqual(20);
      expect(s.stdout()).not.toMatch(/weak token/);
      const r = await sabre(['ls', `127.0.0.1:${s.port}`, '--token', token]);
      expect(r.code, r.stderr).toBe(0);
      const bad = await sabre(['ls', `127.0.0.1:${s.port}`, '--token', 'guess']);
      expect(bad.code).toBe(1);
    } finally {
      await killAndWait(s.child, 'SIGTERM');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('serve with a token shorter than 16 characters says it is weak (online guessing is only rationed), and serves', async () => {
    const dir = tempDir('cli-weak');
    fs.writeFileSync(join(dir, 'f'), 'x');
    const s = await spawnServer(dir, [], { SABRE_TOKEN: TOKEN });
    try {
      await until(() => /weak token/.test(s.stdout()), 5000, 'the warning');
      expect(s.stdout()).toMatch(/weak token: 9 characters, fewer than 16/);
      const r = await sabre(['ls', `127.0.0.1:${s.port}`, '--token', TOKEN]);
      expect(r.code, r.stderr).toBe(0);
    } finally {
      await killAndWait(s.child, 'SIGTERM');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--metrics-port: /metrics shows both devices, their links and the file service counters moving with a get', async () => {
    const dir = tempDir('cli-metrics');
    const local = tempDir('cli-metrics-local');
    fs.writeFileSync(join(dir, 'f'), 'metered');
    const s = await spawnServer(dir, ['--metrics-port', '0'], { SABRE_TOKEN: TOKEN });
    try {
      await until(() => /metrics: (\S+)/.test(s.stdout()), 5000, 'the metrics line');
      const url = /metrics: (\S+)/.exec(s.stdout())![1]!;
      const scrape = async (): Promise<string> => {
        const res = await fetch(url);
        expect(res.status).toBe(200);
        return res.text();
      };
      const stat = (text: string, name: string): number => Number(new RegExp(`^sabre_files_stat\\{instance="serve",stat="${name}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
      const before = await scrape();
      expect(before).toMatch(/^sabre_device_memory_bytes\{device="serve-udp",transport="udp",state="capacity"\} \d+/m);
      expect(before).toMatch(/device="serve-tcp",transport="tcp"/);
      const r = await sabre(['get', `127.0.0.1:${s.port}/f`, join(local, 'f'), '--transport', 'udp'], { env: { SABRE_TOKEN: TOKEN } });
      expect(r.code, r.stderr).toBe(0);
      const after = await scrape();
      expect(Object.keys(Object.fromEntries([...after.matchAll(/^sabre_files_stat\{instance="serve",stat="(\w+)"\}/gm)].map((m) => [m[1], 1]))).length).toBeGreaterThan(5);
      // The udp device moved datagrams for the get; the tcp device moved none.
      const rx = (text: string, dev: string): number => Number(new RegExp(`^sabre_link_datagrams_total\\{device="${dev}",transport="udp",direction="rx"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
      expect(rx(after, 'serve-udp')).toBeGreaterThan(rx(before, 'serve-udp'));
      expect(Number.isFinite(stat(after, 'sessions'))).toBe(true);
    } finally {
      await killAndWait(s.child, 'SIGTERM');
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(local, { recursive: true, force: true });
    }
  });

  it('without --transport the client offers udp then tcp: a tcp-only server is reached over tcp', async () => {
    const dir = tempDir('cli-fallback');
    const local = tempDir('cli-fallback-local');
    fs.writeFileSync(join(dir, 'f'), 'fallback');
    const s = await spawnServer(dir, ['--transport', 'tcp'], { SABRE_TOKEN: TOKEN });
    try {
      const r = await sabre(['get', `127.0.0.1:${s.port}/f`, join(local, 'f'), '--json'], { env: { SABRE_TOKEN: TOKEN } });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).transport).toBe('tcp');
      expect(fs.readFileSync(join(local, 'f'), 'utf8')).toBe('fallback');
      const only = await sabre(['ls', `127.0.0.1:${s.port}`, '--transport', 'udp'], { env: { SABRE_TOKEN: TOKEN } });
      expect(only.code).toBe(1);
      expect(oneLine(only.stderr)).toEqual(['sabre: ls: the server serves none of the providers asked for (udp)']);
    } finally {
      await killAndWait(s.child, 'SIGTERM');
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(local, { recursive: true, force: true });
    }
  });

  it('--read-only: a put is one line, exit 1, nothing created', async () => {
    const dir = tempDir('cli-ro');
    const local = tempDir('cli-ro-local');
    fs.writeFileSync(join(local, 'f'), 'x');
    const s = await spawnServer(dir, ['--read-only'], { SABRE_TOKEN: TOKEN });
    try {
      const r = await sabre(['put', join(local, 'f'), `127.0.0.1:${s.port}/f`, '--token', TOKEN]);
      expect(r.code).toBe(1);
      expect(oneLine(r.stderr)).toEqual(['sabre: put: open f: the server is read-only']);
      expect(fs.readdirSync(dir)).toEqual([]);
    } finally {
      await killAndWait(s.child, 'SIGTERM');
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(local, { recursive: true, force: true });
    }
  });

  it('the server killed mid-get: one line naming how far it got, exit 1, no partial file', async () => {
    const dir = tempDir('cli-kill');
    const local = tempDir('cli-kill-local');
    randomFile(join(dir, 'big.bin'), 256 << 20);
    const s = await spawnServer(dir, [], { SABRE_TOKEN: TOKEN });
    try {
      const get = sabre(['get', `127.0.0.1:${s.port}/big.bin`, join(local, 'big.bin'), '--token', TOKEN]);
      const part = join(local, 'big.bin.sabre-part');
      await until(() => fs.existsSync(part) && fs.statSync(part).size > 16 << 20, 30_000, 'the get to be under way');
      await killAndWait(s.child);
      const r = await get;
      expect(r.code).toBe(1);
      expect(oneLine(r.stderr)).toHaveLength(1);
      expect(r.stderr).toMatch(/^sabre: get: (the server 127\.0\.0\.1:\d+ closed the connection|the RDMA connection failed \(\w+\)) \(after \d+ of 268435456 bytes\)\n$/);
      expect(fs.readdirSync(local)).toEqual([]);
    } finally {
      await killAndWait(s.child);
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(local, { recursive: true, force: true });
    }
  }, 60_000);
});
