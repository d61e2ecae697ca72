// Dedup file transfers against plain ones of the same file, between two processes on 127.0.0.1,
// in the same run: `put --dedup` vs `put`, `get --dedup` vs `get`, alternated run by run.
//
// The file: v1 (the basis: the server's file before a put, the local file before a get) is random
// bytes; v2 is v1 with every other 1 MiB block replaced by new random bytes (half duplicate).
// Each timed put starts with the server's file reset to v1, each get with the local file reset to
// v1 and the server's to v2 (outside the timing); every result is checked byte for byte (SHA-256).
//
// Reported per transport: the median seconds of N runs of each case and the ratio dedup / plain,
// CPU ms per MiB of v2 (client and server processes together), and the bytes moved at the socket:
// one more run of each case through a counting TCP proxy (tcp) or UDP relay (udp) in front of the
// server's device (`via`), every byte both ways; the timed runs go direct, so the counting costs
// them nothing.
//
//   npx tsc -p tsconfig.build.json && node bench/dedup-files.bench.mjs
//   env: DEDUP_FILES_MB (size of v1/v2, default 48), DEDUP_FILES_REPS (runs per case, default 7),
//        DEDUP_FILES_TRANSPORTS (default udp,tcp), DEDUP_FILES_ONLY=put|get,
//        DEDUP_FILES_BYTES=0 (skip the counted runs)
import { fork } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileClient, serveFiles } from '../dist/index.js';

const MB = Number(process.env.DEDUP_FILES_MB ?? 48);
const REPS = Number(process.env.DEDUP_FILES_REPS ?? 7);
const TRANSPORTS = (process.env.DEDUP_FILES_TRANSPORTS ?? 'udp,tcp').split(',');
const ONLY = process.env.DEDUP_FILES_ONLY;
const COUNT = process.env.DEDUP_FILES_BYTES !== '0';
const TOKEN = 'bench-token-0123456789';

/** v1 random; v2 = v1 with every other 1 MiB block (the even ones) new random bytes. */
export function halfDuplicate(mb) {
  const v1 = randomBytes(mb << 20);
  const v2 = Buffer.from(v1);
  for (let b = 0; b < mb; b += 2) randomBytes(1 << 20).copy(v2, b << 20);
  return { v1, v2 };
}

const sha = (b) => createHash('sha256').update(b).digest('hex');
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function countingTcp(target) {
  let bytes = 0;
  const socks = new Set();
  const srv = net.createServer((down) => {
    const up = net.connect(target.port, target.host);
    for (const s of [down, up]) {
      socks.add(s);
      s.on('error', () => s.destroy());
      s.on('close', () => socks.delete(s));
    }
    down.on('data', (d) => ((bytes += d.length), up.write(d)));
    up.on('data', (d) => ((bytes += d.length), down.write(d)));
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { port: srv.address().port, bytes: () => bytes, close: () => (socks.forEach((s) => s.destroy()), new Promise((r) => srv.close(r))) };
}

/** A UDP relay: one upstream socket per client address; counts every datagram's payload both ways. */
async function countingUdp(target) {
  let bytes = 0;
  const front = dgram.createSocket('udp4');
  const ups = new Map();
  front.on('message', (msg, from) => {
    bytes += msg.length;
    const k = `${from.address}:${from.port}`;
    let up = ups.get(k);
    if (!up) {
      up = dgram.createSocket('udp4');
      up.on('message', (m) => ((bytes += m.length), front.send(m, from.port, from.address)));
      up.bind(0, '127.0.0.1');
      ups.set(k, up);
    }
    up.send(msg, target.port, target.host);
  });
  await new Promise((r) => front.bind(0, '127.0.0.1', r));
  return { port: front.address().port, bytes: () => bytes, close: async () => { for (const u of ups.values()) u.close(); front.close(); } };
}

async function main() {
  const dir = fs.mkdtempSync(join(tmpdir(), 'sabre-dedup-bench-'));
  const local = fs.mkdtempSync(join(tmpdir(), 'sabre-dedup-bench-c-'));
  const { v1, v2 } = halfDuplicate(MB);
  const want = { v1: sha(v1), v2: sha(v2) };
  const v2Path = join(local, 'v2.bin');
  fs.writeFileSync(v2Path, v2);
  const remote = join(dir, 'f.bin');
  const getPath = join(local, 'got.bin');
  const child = fork(fileURLToPath(import.meta.url), ['server', dir], { stdio: 'inherit' });
  const ports = await new Promise((r) => child.once('message', r));
  const { port } = ports;
  const serverCpu = () => new Promise((r) => {
    child.once('message', (m) => r(m.cpu));
    child.send('cpu');
  });
  const cpuNow = async () => {
    const s = await serverCpu();
    const c = process.cpuUsage();
    return (s.user + s.system + c.user + c.system) / 1e3;
  };
  const results = [];
  try {
    for (const transport of TRANSPORTS) {
      const c = await FileClient.connect({ host: '127.0.0.1', port }, { token: TOKEN, transport });
      const cases = {
        put: async (dedup) => {
          fs.writeFileSync(remote, v1);
          const r = await c.put(v2Path, 'f.bin', { dedup });
          return { r, check: () => sha(fs.readFileSync(remote)) === want.v2 };
        },
        get: async (dedup) => {
          fs.writeFileSync(remote, v2);
          fs.writeFileSync(getPath, v1);
          const r = await c.get('f.bin', getPath, { dedup });
          return { r, check: () => sha(fs.readFileSync(getPath)) === want.v2 };
        },
      };
      for (const [op, run] of Object.entries(cases)) {
        if (ONLY && ONLY !== op) continue;
        const row = { transport, op, plain: [], dedup: [], cpuPlain: [], cpuDedup: [], moved: 0 };
        await run(false); // warm-up of both paths
        await run(true);
        for (let i = 0; i < REPS; i++) {
          for (const dedup of i % 2 ? [true, false] : [false, true]) {
            const c0 = await cpuNow();
            const t0 = performance.now();
            const { r, check } = await run(dedup);
            const s = (performance.now() - t0) / 1e3;
            const cpu = (await cpuNow()) - c0;
            if (!check()) throw new Error(`${transport} ${op}${dedup ? ' --dedup' : ''}: the file differs from v2`);
            (dedup ? row.dedup : row.plain).push(s);
            (dedup ? row.cpuDedup : row.cpuPlain).push(cpu / MB);
            if (dedup) row.moved = r.dedup?.bytesMoved ?? 0;
          }
        }
        results.push(row);
      }
      await c.end();
      if (!COUNT) continue;
      // Bytes at the socket: one run of each case through a counting relay in front of the device.
      const relay = await (transport === 'tcp' ? countingTcp : countingUdp)({ host: '127.0.0.1', port: ports[transport] });
      const cc = await FileClient.connect({ host: '127.0.0.1', port }, { token: TOKEN, transport, via: { host: '127.0.0.1', port: relay.port } });
      for (const row of results.filter((x) => x.transport === transport)) {
        for (const dedup of [false, true]) {
          if (row.op === 'put') fs.writeFileSync(remote, v1);
          else (fs.writeFileSync(remote, v2), fs.writeFileSync(getPath, v1));
          const b0 = relay.bytes();
          await (row.op === 'put' ? cc.put(v2Path, 'f.bin', { dedup }) : cc.get('f.bin', getPath, { dedup }));
          row[dedup ? 'wireDedup' : 'wirePlain'] = relay.bytes() - b0;
        }
      }
      await cc.end();
      await relay.close();
    }
  } finally {
    child.send('stop');
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  }
  console.log(`\ndedup file transfers, ${MB} MiB, v2 = v1 with every other 1 MiB block new (half duplicate), 127.0.0.1, ${REPS} alternated runs per case (median [all])`);
  console.log('| transport | op | plain s | dedup s | dedup / plain | CPU ms/MiB plain | CPU ms/MiB dedup | chunk bytes moved / size | bytes at the socket, dedup / plain |');
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of results) {
    const f = (xs) => `${med(xs).toFixed(3)} [${xs.map((x) => x.toFixed(2)).join(' ')}]`;
    console.log(`| ${r.transport} | ${r.op} | ${f(r.plain)} | ${f(r.dedup)} | **${(med(r.dedup) / med(r.plain)).toFixed(2)}×** | ${med(r.cpuPlain).toFixed(1)} | ${med(r.cpuDedup).toFixed(1)} | ${(r.moved / (MB << 20)).toFixed(3)} | ${r.wirePlain ? `${(r.wireDedup / 1e6).toFixed(1)} / ${(r.wirePlain / 1e6).toFixed(1)} MB = **${(r.wireDedup / r.wirePlain).toFixed(3)}×**` : '-'} |`);
  }
}

if (process.argv[2] === 'server') {
  const dir = process.argv[3];
  const srv = await serveFiles(dir, { token: TOKEN, transports: TRANSPORTS, host: '127.0.0.1' });
  process.send({ port: srv.address.port, udp: srv.devices.udp?.address.port, tcp: srv.devices.tcp?.address.port });
  process.on('message', (m) => {
    if (m === 'cpu') process.send({ cpu: process.cpuUsage() });
    if (m === 'stop') process.exit(0);
  });
  process.on('disconnect', () => process.exit(0));
} else {
  await main();
}
