#!/usr/bin/env node
// A/B of two builds of sabre: the same workloads through the public API of two
// builds — A, a base commit built in a git worktree under /tmp, and B, this tree's dist/ —
// run in alternation (A B, B A, A B, …) so drift in the machine's load hits both alike:
//   udp / tcp   64 KiB RdmaWrite goodput (window of 64), client and server in two processes
//   udp / tcp   64 B round trip (RdmaWriteWithImm ping-pong), two processes
//   inproc      64 B RdmaWrite message rate (256 pipelined), one process
//   chan-rate   channel messages of 64 B, 256 sends awaited at a time, inproc, one process
//   file-get-tcp / file-get-udp / file-put-tcp
//               whole-file get / put of a 64 MiB file on /dev/shm, the server (serveFiles) in a
//               second process; MB/s, and the CPU both processes spent per GB moved (client +
//               server, user + system, from process.cpuUsage)
// Each run is its own process (a fresh heap and JIT). Prints every run and, per case, the
// median of A, of B and B/A.
//
//   node bench/ab-layering.mjs [--base 1db71d6] [--head DIR] [--rounds 5] [--writes 4000] [--pings 4000] [--rate 200000]
//        [--msgs 100000] [--files 4] [--cases udp-bw,tcp-bw,udp-rtt,tcp-rtt,inproc-rate,chan-rate,file-get-tcp,file-get-udp,file-put-tcp]
// --head DIR: B is the build in DIR instead of this tree (a worktree holding only the change
// under test, when this tree has other work in progress); --no-build: use B's dist/ as it is.
//
// Smoke run (seconds): node bench/ab-layering.mjs --rounds 1 --writes 200 --pings 200 --rate 5000
import { execFileSync, fork } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';

const self = fileURLToPath(import.meta.url);
const here = resolve(dirname(self), '..');
const argv = process.argv.slice(2);
const arg = (name, def) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : def;
};

const ALL = 1 | 2 | 4 | 8;
const BIG = 64 * 1024;
const WINDOW = 64;

async function api(root) {
  return import(pathToFileURL(join(root, 'dist/index.js')).href);
}

async function side(S, transport) {
  const dev = await S.openDevice(transport === 'inproc' ? { transport, memoryBytes: 128 << 20 } : { transport, host: '127.0.0.1', port: 0, memoryBytes: 128 << 20 });
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 8192 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1024, maxRecvWr: 1024, maxSge: 1 });
  const mr = pd.regMr(WINDOW * BIG, ALL);
  return { dev, pd, cq, qp, mr };
}

// ---- the server process (udp/tcp): answers setup/connect/pong over IPC ----------------------

async function serve() {
  const S = await api(arg('root'));
  const s = await side(S, arg('transport'));
  process.on('message', async (m) => {
    try {
      let value;
      if (m.op === 'setup') value = { address: JSON.parse(JSON.stringify(s.dev.address)), qpn: s.qp.qpn, addr: s.mr.addr, rkey: s.mr.rkey };
      else if (m.op === 'connect') await s.qp.connect({ address: m.address, qpn: m.qpn, timeoutMs: 20_000 });
      else if (m.op === 'pong') {
        pong(S, s, m.n, m.peerAddr, m.peerRkey);
        value = true;
      } else if (m.op === 'close') {
        await s.dev.close();
        value = true;
      }
      process.send({ id: m.id, ok: true, value });
    } catch (e) {
      process.send({ id: m.id, ok: false, error: String(e?.stack ?? e) });
    }
  });
  process.send({ ready: true });
}

/** Answer each incoming 64 B RdmaWriteWithImm with one of our own; receives posted 64 ahead. */
function pong(S, s, n, peerAddr, peerRkey) {
  const { qp, cq, mr } = s;
  let posted = Math.min(n, 64);
  for (let i = 0; i < posted; i++) qp.postRecv({ wrId: i, sgList: [] });
  (async () => {
    let got = 0;
    while (got < n) {
      await cq.wait(30_000);
      for (const w of cq.poll(64)) {
        if (w.imm === undefined) continue;
        got++;
        if (posted < n) qp.postRecv({ wrId: posted++, sgList: [] });
        qp.postSend({ wrId: got, opcode: S.Opcode.RdmaWriteWithImm, imm: got, signaled: false, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }], remoteAddr: peerAddr, rkey: peerRkey });
      }
    }
  })().catch((e) => console.error('pong', e));
}

/** The file server process: serveFiles over the directory, answering start / cpu / close. */
async function serveFilesProc() {
  const S = await api(arg('root'));
  let srv;
  process.on('message', async (m) => {
    try {
      let value;
      if (m.op === 'start') {
        srv = await S.serveFiles(arg('dir'), { host: '127.0.0.1', port: 0, token: 'ab-token' });
        value = { port: srv.address.port };
      } else if (m.op === 'cpu') value = process.cpuUsage();
      else if (m.op === 'close') {
        await srv.close();
        value = true;
      }
      process.send({ id: m.id, ok: true, value });
    } catch (e) {
      process.send({ id: m.id, ok: false, error: String(e?.stack ?? e) });
    }
  });
  process.send({ ready: true });
}

function forkServer(root, transport, extra = ['--serve']) {
  const child = fork(self, [...extra, '--root', root, '--transport', transport], { serialization: 'advanced' });
  let seq = 0;
  const waiting = new Map();
  let ready;
  const readyP = new Promise((r) => (ready = r));
  child.on('message', (m) => {
    if (m.ready) return ready();
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.ok) w.resolve(m.value);
    else w.reject(new Error(m.error));
  });
  const call = (op, args = {}) => new Promise((res, rej) => {
    const id = ++seq;
    waiting.set(id, { resolve: res, reject: rej });
    child.send({ id, op, ...args });
  });
  return { child, call, ready: readyP };
}

// ---- one measured run (a child process per run) ---------------------------------------------

async function pair2(S, root, transport) {
  const srv = forkServer(root, transport);
  process.on('exit', () => srv.child.kill());
  await srv.ready;
  const c = await side(S, transport);
  const info = await srv.call('setup');
  await Promise.all([
    c.qp.connect({ address: info.address, qpn: info.qpn, timeoutMs: 20_000 }),
    srv.call('connect', { address: JSON.parse(JSON.stringify(c.dev.address)), qpn: c.qp.qpn }),
  ]);
  return { srv, c, info };
}

async function drain(S, cq, want) {
  let got = 0;
  while (got < want) {
    const ws = cq.poll(256);
    for (const w of ws) if (w.status !== S.WcStatus.Success) throw new Error(`completion status ${w.status}`);
    got += ws.length;
    if (got < want) await cq.wait(30_000);
  }
}

async function goodput(root, transport, n) {
  const S = await api(root);
  const { srv, c, info } = await pair2(S, root, transport);
  for (let i = 0; i < c.mr.length; i++) c.mr.buffer[i] = (i * 2654435761) >>> 24;
  const post = (i) => c.qp.postSend({
    wrId: i, opcode: S.Opcode.RdmaWrite, sgList: [{ addr: c.mr.addr + (i % WINDOW) * BIG, length: BIG, lkey: c.mr.lkey }],
    remoteAddr: info.addr + (i % WINDOW) * BIG, rkey: info.rkey,
  });
  // WINDOW writes in flight until `count` have completed.
  let next = 0;
  const stream = async (count) => {
    let out = 0;
    let done = 0;
    let posted = 0;
    while (done < count) {
      while (out < WINDOW && posted < count) {
        post(next++);
        posted++;
        out++;
      }
      const ws = c.cq.poll(256);
      for (const w of ws) if (w.status !== S.WcStatus.Success) throw new Error(`completion status ${w.status}`);
      done += ws.length;
      out -= ws.length;
      if (ws.length === 0) await c.cq.wait(30_000);
    }
  };
  await stream(Math.min(n, 256));
  const t0 = performance.now();
  await stream(n);
  const ms = performance.now() - t0;
  await srv.call('close');
  srv.child.kill();
  await c.dev.close();
  return { value: (n * BIG) / (ms * 1000), unit: 'MB/s' };
}

async function rtt(root, transport, n) {
  const S = await api(root);
  const { srv, c, info } = await pair2(S, root, transport);
  await srv.call('pong', { n, peerAddr: c.mr.addr, peerRkey: c.mr.rkey });
  let posted = Math.min(n, 64);
  for (let i = 0; i < posted; i++) c.qp.postRecv({ wrId: i, sgList: [] });
  const lat = [];
  for (let k = 1; k <= n; k++) {
    const t = performance.now();
    c.qp.postSend({ wrId: k, opcode: S.Opcode.RdmaWriteWithImm, imm: k, signaled: false, sgList: [{ addr: c.mr.addr, length: 64, lkey: c.mr.lkey }], remoteAddr: info.addr, rkey: info.rkey });
    for (;;) {
      const ws = c.cq.poll(4);
      if (ws.some((w) => w.imm !== undefined)) break;
      await c.cq.wait(30_000);
    }
    lat.push(performance.now() - t);
    if (posted < n) c.qp.postRecv({ wrId: posted++, sgList: [] });
  }
  const warm = lat.slice(Math.min(100, lat.length >> 2)).sort((x, y) => x - y);
  await srv.call('close');
  srv.child.kill();
  await c.dev.close();
  return { value: warm[warm.length >> 1] * 1000, unit: 'us p50' };
}

async function inprocRate(root, n) {
  const S = await api(root);
  const a = await side(S, 'inproc');
  const b = await side(S, 'inproc');
  await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
  const batch = 256;
  const round = async () => {
    for (let i = 0; i < batch; i++) {
      a.qp.postSend({ wrId: i, opcode: S.Opcode.RdmaWrite, sgList: [{ addr: a.mr.addr + i * 64, length: 64, lkey: a.mr.lkey }], remoteAddr: b.mr.addr + i * 64, rkey: b.mr.rkey });
    }
    await drain(S, a.cq, batch);
  };
  for (let i = 0; i < 20; i++) await round();
  const rounds = Math.max(1, Math.round(n / batch));
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) await round();
  const ms = performance.now() - t0;
  await a.dev.close();
  await b.dev.close();
  return { value: (rounds * batch) / (ms / 1000) / 1000, unit: 'k ops/s' };
}

/** Channel message rate: 64-byte messages, `batch` sends awaited together, read as they come. */
async function chanRate(root, n) {
  const S = await api(root);
  const a = await S.openDevice({ transport: 'inproc', memoryBytes: 128 << 20 });
  const b = await S.openDevice({ transport: 'inproc', memoryBytes: 128 << 20 });
  const l = S.listenChannels(b, { service: 7 });
  const [c, s] = await Promise.all([S.connectChannel(a, b.address, { service: 7 }), l.accept(10_000)]);
  const msg = new Uint8Array(64).fill(7);
  const batch = 256;
  const it = s[Symbol.asyncIterator]();
  const round = async () => {
    const sends = [];
    for (let i = 0; i < batch; i++) sends.push(c.send(msg));
    for (let i = 0; i < batch; i++) await it.next();
    await Promise.all(sends);
  };
  for (let i = 0; i < 40; i++) await round();
  const rounds = Math.max(1, Math.round(n / batch));
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) await round();
  const ms = performance.now() - t0;
  await c.close();
  l.close();
  await a.close();
  await b.close();
  return { value: (rounds * batch) / (ms / 1000) / 1000, unit: 'k msg/s' };
}

const FILE_BYTES = 64 << 20;
const cpuSec = (u) => (u.user + u.system) / 1e6;

/** Whole-file get or put, `n` times, with the server in a second process; MB/s and CPU s/GB. */
async function fileRate(root, transport, op, n) {
  const S = await api(root);
  const dir = mkdtempSync('/dev/shm/sabre-ab-');
  try {
    const body = new Uint8Array(FILE_BYTES);
    for (let i = 0; i < body.length; i += 4096) body[i] = (i * 2654435761) >>> 24;
    writeFileSync(join(dir, 'src.bin'), body);
    const srv = forkServer(root, transport, ['--serve-files', '--dir', dir]);
    process.on('exit', () => srv.child.kill());
    await srv.ready;
    const { port } = await srv.call('start');
    const c = await S.FileClient.connect(`127.0.0.1:${port}`, { token: 'ab-token', transport });
    const local = join(dir, 'local.bin');
    const once = () => (op === 'get' ? c.get('src.bin', local) : c.put(join(dir, 'src.bin'), 'dst.bin'));
    await once();
    const s0 = await srv.call('cpu');
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await once();
    const ms = performance.now() - t0;
    const c1 = process.cpuUsage(c0);
    const s1 = await srv.call('cpu');
    const gb = (n * FILE_BYTES) / 1e9;
    const clientCpu = cpuSec(c1);
    const serverCpu = cpuSec({ user: s1.user - s0.user, system: s1.system - s0.system });
    await c.end();
    await srv.call('close');
    srv.child.kill();
    return { value: (n * FILE_BYTES) / (ms * 1000), unit: 'MB/s', cpu: { client: clientCpu / gb, server: serverCpu / gb } };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function child() {
  const root = arg('root');
  const c = arg('case');
  let r;
  if (c === 'udp-bw' || c === 'tcp-bw') r = await goodput(root, c.slice(0, 3), Number(arg('n')));
  else if (c === 'udp-rtt' || c === 'tcp-rtt') r = await rtt(root, c.slice(0, 3), Number(arg('n')));
  else if (c === 'inproc-rate') r = await inprocRate(root, Number(arg('n')));
  else if (c === 'chan-rate') r = await chanRate(root, Number(arg('n')));
  else if (c.startsWith('file-')) r = await fileRate(root, c.slice(9), c.slice(5, 8), Number(arg('n')));
  else throw new Error(`unknown case ${c}`);
  process.send(r);
  process.exit(0);
}

// ---- the driver -----------------------------------------------------------------------------

function ensureBase(commit) {
  const sha = execFileSync('git', ['rev-parse', '--short', commit], { cwd: here }).toString().trim();
  const dir = `/tmp/sabre-ab-${sha}`;
  if (!existsSync(dir)) execFileSync('git', ['worktree', 'add', '--detach', dir, sha], { cwd: here, stdio: 'inherit' });
  if (!existsSync(join(dir, 'node_modules'))) symlinkSync(join(here, 'node_modules'), join(dir, 'node_modules'));
  if (!existsSync(join(dir, 'dist/index.js'))) execFileSync('npm', ['run', 'build'], { cwd: dir, stdio: 'inherit' });
  return { sha, dir };
}

function runOne(root, c, n) {
  return new Promise((res, rej) => {
    const p = fork(self, ['--child', '--root', root, '--case', c, '--n', String(n)], { serialization: 'advanced' });
    let r;
    p.on('message', (m) => (r = m));
    p.on('exit', (code) => (r ? res(r) : rej(new Error(`${c} in ${root} exited ${code}`))));
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function driver() {
  const base = ensureBase(arg('base', '1db71d6'));
  const headDir = resolve(arg('head', here));
  const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: headDir }).toString().trim() !== '';
  const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: headDir }).toString().trim() + (dirty ? ' + uncommitted changes' : '');
  if (!argv.includes('--no-build')) execFileSync('npm', ['run', 'build'], { cwd: headDir, stdio: 'ignore' });
  const rounds = Number(arg('rounds', 5));
  const files = Number(arg('files', 4));
  const counts = {
    'udp-bw': Number(arg('writes', 4000)), 'tcp-bw': Number(arg('writes', 4000)), 'udp-rtt': Number(arg('pings', 4000)), 'tcp-rtt': Number(arg('pings', 4000)), 'inproc-rate': Number(arg('rate', 200000)),
    'chan-rate': Number(arg('msgs', 100000)), 'file-get-tcp': files, 'file-get-udp': files, 'file-put-tcp': files,
  };
  const cases = arg('cases', Object.keys(counts).join(',')).split(',');
  const variants = { A: base.dir, B: headDir };
  console.log(`A = ${base.sha} (${base.dir}), B = ${head}${argv.includes('--no-build') ? '' : ' (rebuilt)'} (${headDir === here ? 'this tree' : headDir}); ${rounds} rounds, alternating`);
  const res = {};
  for (const c of cases) {
    res[c] = { A: [], B: [], cpuA: [], cpuB: [] };
    for (let r = 0; r < rounds; r++) {
      for (const v of r % 2 === 0 ? ['A', 'B'] : ['B', 'A']) {
        const out = await runOne(variants[v], c, counts[c]);
        res[c][v].push(out.value);
        res[c].unit = out.unit;
        if (out.cpu) res[c][`cpu${v}`].push(out.cpu);
        const cpu = out.cpu ? `  cpu s/GB client ${out.cpu.client.toFixed(2)} server ${out.cpu.server.toFixed(2)}` : '';
        console.log(`  ${c.padEnd(12)} round ${r + 1} ${v}: ${out.value.toFixed(1)} ${out.unit}${cpu}`);
      }
    }
  }
  console.log('\ncase          unit       A median    B median    B/A    (higher is better, except us p50)');
  for (const c of cases) {
    const a = median(res[c].A);
    const b = median(res[c].B);
    console.log(`${c.padEnd(13)} ${res[c].unit.padEnd(9)} ${a.toFixed(1).padStart(10)} ${b.toFixed(1).padStart(11)} ${(b / a).toFixed(3).padStart(7)}`);
  }
  const withCpu = cases.filter((c) => res[c].cpuA.length > 0);
  if (withCpu.length > 0) {
    console.log('\nCPU seconds per GB moved (median; lower is better)');
    console.log('case          side      A median    B median    B/A');
    for (const c of withCpu) {
      for (const side of ['client', 'server']) {
        const a = median(res[c].cpuA.map((x) => x[side]));
        const b = median(res[c].cpuB.map((x) => x[side]));
        console.log(`${c.padEnd(13)} ${side.padEnd(9)} ${a.toFixed(3).padStart(10)} ${b.toFixed(3).padStart(11)} ${(b / a).toFixed(3).padStart(7)}`);
      }
    }
  }
}

if (argv.includes('--serve-files')) await serveFilesProc();
else if (argv.includes('--serve')) await serve();
else if (argv.includes('--child')) await child();
else await driver();
