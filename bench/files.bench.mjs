// The file service (M6) between two processes on 127.0.0.1, against the two baselines the issue
// names, in the same run, alternating case by case so all see the same machine:
//   1. get of a FILES_BYTES file (page cache warm) into a local file:
//        sabre get (udp, tcp)  vs  raw node:net (fs.createReadStream piped to the socket)
//                              vs  node:http (http.createServer streaming the file, fetched with
//                                  Node's global fetch, which is undici)
//   2. put of the same file: sabre put (udp, tcp; temporary + rename on the server) vs raw
//      node:net (the socket piped into fs.createWriteStream, acknowledged when it finished) vs
//      HTTP PUT (the request body piped into a file, answered when it finished);
//   3. 4 KiB random reads per second at a queue depth: sabre reads vs HTTP range requests
//      (keep-alive, the same depth of fetches in flight).
// Targets (issue 14): get/put ≥ 1.0× HTTP and ≥ 0.6× raw net.
// A plain timed script (a streaming transfer does not fit tinybench's per-iteration model).
// Run: npm run build && node bench/files.bench.mjs
//   FILES_BYTES (default 256 MiB), FILES_REPS (3, best kept), FILES_TRANSPORTS (udp,tcp),
//   FILES_RAND_SECONDS (3), FILES_RAND_DEPTH (16), FILES_ONLY=get|put|rand
// Pipeline knobs, for sweeping (unset: the library's defaults, printed at the start):
//   server: FILES_RW_DEPTH (staging buffers: reads answered at once), FILES_CREDITS (credits
//   granted to a client: its receives, the requests it may have at the server), FILES_RW_SIZE
//   (maxReadWriteSize), FILES_WRITE_SIZE (maxWriteSize);
//   client: FILES_SINKS (read sinks), FILES_WRITE_BUFFERS (write buffers), FILES_CLIENT_CREDITS
//   (credits the client grants the server: its completions in flight), FILES_FIT=0 (transfers at
//   the negotiated maxima instead of whole segments of the mss);
//   both: FILES_INTEGRITY (udp integrity: xxh3 | crc32c | none), FILES_WORKERS (udp workers).
import { execFileSync, fork } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { FileClient, serveFiles } from '../dist/index.js';
import { keepFreedHeapMapped } from '../dist/core/heap-reuse.js';

// Baselines and sabre under the same malloc thresholds in both processes, whichever case runs
// first (sabre's links raise them after 16 MiB received: src/core/heap-reuse.ts).
await keepFreedHeapMapped();

const BYTES = Number(process.env.FILES_BYTES ?? 256 << 20);
const REPS = Number(process.env.FILES_REPS ?? 3);
const TRANSPORTS = (process.env.FILES_TRANSPORTS ?? 'udp,tcp').split(',');
const RAND_S = Number(process.env.FILES_RAND_SECONDS ?? 3);
const DEPTH = Number(process.env.FILES_RAND_DEPTH ?? 16);
const ONLY = process.env.FILES_ONLY;
const TOKEN = 'bench';
const num = (k) => (process.env[k] === undefined || process.env[k] === '' ? undefined : Number(process.env[k]));
const SERVER_LIMITS = Object.fromEntries(Object.entries({
  rwDepth: num('FILES_RW_DEPTH'), credits: num('FILES_CREDITS'), maxReadWriteSize: num('FILES_RW_SIZE'), maxWriteSize: num('FILES_WRITE_SIZE'),
}).filter(([, v]) => v !== undefined));
const DEVICE = Object.fromEntries(Object.entries({ integrity: process.env.FILES_INTEGRITY || undefined, workers: num('FILES_WORKERS') }).filter(([, v]) => v !== undefined));
const CLIENT = { ...DEVICE, ...Object.fromEntries(Object.entries({ sinks: num('FILES_SINKS'), writeBuffers: num('FILES_WRITE_BUFFERS'), credits: num('FILES_CLIENT_CREDITS'), segmentFit: process.env.FILES_FIT === '0' ? false : undefined }).filter(([, v]) => v !== undefined)) };

// ---------------------------------------------------------------------------------------------
// The server process: sabre, raw net and http over the same directory.

async function serverMain(dir) {
  const file = join(dir, 'data.bin');
  const sabre = await serveFiles(dir, { token: TOKEN, transports: TRANSPORTS, limits: SERVER_LIMITS, ...DEVICE });
  // raw net: 'G' → the file streamed; 'P' + 8-byte length + bytes → written, then 'k'.
  const raw = net.createServer((s) => {
    s.once('readable', () => {
      const op = s.read(1);
      if (!op) return s.destroy();
      if (op[0] === 0x47) {
        fs.createReadStream(file, { highWaterMark: 1 << 20 }).pipe(s);
        return;
      }
      let len;
      const out = fs.createWriteStream(join(dir, 'net-put.bin'), { highWaterMark: 1 << 20 });
      let got = 0;
      const onData = (b) => {
        if (len === undefined) {
          len = Number(b.readBigUInt64BE(0));
          b = b.subarray(8);
        }
        got += b.length;
        if (!out.write(b)) {
          s.pause();
          out.once('drain', () => s.resume());
        }
        if (got >= len) out.end(() => s.end('k'));
      };
      s.on('data', onData);
    });
    s.on('error', () => {});
  });
  await new Promise((r) => raw.listen(0, '127.0.0.1', r));
  const web = http.createServer((req, res) => {
    if (req.method === 'PUT') {
      pipeline(req, fs.createWriteStream(join(dir, 'http-put.bin'), { highWaterMark: 1 << 20 })).then(() => res.end('ok'), () => res.destroy());
      return;
    }
    const size = fs.statSync(file).size;
    const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    if (m) {
      const start = Number(m[1]);
      const end = Math.min(Number(m[2]), size - 1);
      res.writeHead(206, { 'content-length': end - start + 1, 'content-range': `bytes ${start}-${end}/${size}` });
      fs.createReadStream(file, { start, end }).pipe(res);
      return;
    }
    res.writeHead(200, { 'content-length': size });
    fs.createReadStream(file, { highWaterMark: 1 << 20 }).pipe(res);
  });
  web.keepAliveTimeout = 60_000;
  await new Promise((r) => web.listen(0, '127.0.0.1', r));
  process.send({ sabre: sabre.address.port, raw: raw.address().port, http: web.address().port });
  process.on('message', (m) => {
    if (m === 'stop') process.exit(0);
  });
  // The bench process gone (finished or crashed): so is this one.
  process.on('disconnect', () => process.exit(0));
}

// ---------------------------------------------------------------------------------------------
// The client process.

// Streamed, not readFileSync + one update: a synchronous hash of several 256 MiB files in a row
// blocked this process for 5-7 s, and the server's udp keepalive (3 s + 3 probes 1.5 s apart)
// rightly declared the silent client lost; the next sabre put then failed with RetryExcErr.
async function sha(p) {
  const h = createHash('sha256');
  for await (const chunk of fs.createReadStream(p, { highWaterMark: 1 << 20 })) h.update(chunk);
  return h.digest('hex');
}

async function netGet(port, out) {
  const s = net.connect(port, '127.0.0.1');
  s.write('G');
  await pipeline(s, fs.createWriteStream(out, { highWaterMark: 1 << 20 }));
}

async function netPut(port, src) {
  const s = net.connect(port, '127.0.0.1');
  const hdr = Buffer.alloc(9);
  hdr[0] = 0x50;
  hdr.writeBigUInt64BE(BigInt(fs.statSync(src).size), 1);
  s.write(hdr);
  const ack = new Promise((resolve, reject) => {
    s.on('data', (b) => b.includes(0x6b) && resolve());
    s.on('error', reject);
  });
  fs.createReadStream(src, { highWaterMark: 1 << 20 }).pipe(s, { end: false });
  await ack;
  s.destroy();
}

async function httpGet(port, out) {
  const r = await fetch(`http://127.0.0.1:${port}/data.bin`);
  await pipeline(r.body, fs.createWriteStream(out, { highWaterMark: 1 << 20 }));
}

async function httpPut(port, src) {
  const r = await fetch(`http://127.0.0.1:${port}/data.bin`, { method: 'PUT', body: fs.createReadStream(src, { highWaterMark: 1 << 20 }), duplex: 'half' });
  await r.text();
}

// Every case writes a 256 MiB file (the get's local copy, the put's remote one): the kernel
// writes dirty pages back in the background once they pass its threshold, and that work (CPU
// and disk) fell on whichever case ran then — HTTP put measured 178-197 MB/s after a fast sabre
// put and 295-340 after a slow one. Each case starts with nothing dirty (untimed).
function settle() {
  try {
    execFileSync('sync');
  } catch {
    // no sync(1): the cases share whatever writeback there is
  }
}

async function timed(fn) {
  settle();
  const t0 = performance.now();
  await fn();
  return (performance.now() - t0) / 1000;
}

const mbs = (s) => BYTES / 1e6 / s;

async function main() {
  const dir = fs.mkdtempSync(join(tmpdir(), 'sabre-bench-files-'));
  const local = fs.mkdtempSync(join(tmpdir(), 'sabre-bench-files-local-'));
  const file = join(dir, 'data.bin');
  {
    const fd = fs.openSync(file, 'w');
    for (let left = BYTES; left > 0; left -= 4 << 20) fs.writeSync(fd, randomBytes(Math.min(left, 4 << 20)));
    fs.closeSync(fd);
  }
  fs.copyFileSync(file, join(local, 'src.bin'));
  const want = await sha(file);
  fs.readFileSync(file); // page cache warm
  const server = fork(fileURLToPath(import.meta.url), ['--server', dir], { stdio: 'inherit' });
  const ports = await new Promise((r) => server.once('message', r));
  const clients = {};
  for (const t of TRANSPORTS) clients[t] = await FileClient.connect(`127.0.0.1:${ports.sabre}`, { token: TOKEN, transport: t, ...CLIENT });
  console.log(`file service bench: ${(BYTES / 1048576).toFixed(0)} MiB, best of ${REPS}, transports ${TRANSPORTS.join(', ')}`);
  for (const t of TRANSPORTS) console.log(`  ${t}: negotiated ${JSON.stringify(clients[t].limits)}, client ${JSON.stringify(clients[t].pipeline)}`);

  const rows = [];
  const best = {};
  const keep = (k, s) => (best[k] = Math.min(best[k] ?? Infinity, s));
  if (!ONLY || ONLY === 'get') {
    for (let rep = 0; rep < REPS; rep++) {
      for (const t of TRANSPORTS) {
        const out = join(local, `get-${t}.bin`);
        keep(`get sabre ${t}`, await timed(() => clients[t].get('data.bin', out)));
        if (rep === 0 && (await sha(out)) !== want) throw new Error(`sabre get ${t}: wrong bytes`);
      }
      keep('get raw net', await timed(() => netGet(ports.raw, join(local, 'get-net.bin'))));
      keep('get http', await timed(() => httpGet(ports.http, join(local, 'get-http.bin'))));
      if (rep === 0 && ((await sha(join(local, 'get-net.bin'))) !== want || (await sha(join(local, 'get-http.bin'))) !== want)) throw new Error('baseline get: wrong bytes');
    }
    for (const t of TRANSPORTS) rows.push(['get', `sabre ${t}`, mbs(best[`get sabre ${t}`]), mbs(best[`get sabre ${t}`]) / mbs(best['get http']), mbs(best[`get sabre ${t}`]) / mbs(best['get raw net'])]);
    rows.push(['get', 'raw net', mbs(best['get raw net']), NaN, NaN], ['get', 'http (undici fetch)', mbs(best['get http']), NaN, NaN]);
  }
  if (!ONLY || ONLY === 'put') {
    const src = join(local, 'src.bin');
    for (let rep = 0; rep < REPS; rep++) {
      for (const t of TRANSPORTS) keep(`put sabre ${t}`, await timed(() => clients[t].put(src, `put-${t}.bin`)));
      keep('put raw net', await timed(() => netPut(ports.raw, src)));
      keep('put http', await timed(() => httpPut(ports.http, src)));
      if (rep === 0) for (const n of [...TRANSPORTS.map((t) => `put-${t}.bin`), 'net-put.bin', 'http-put.bin']) if ((await sha(join(dir, n))) !== want) throw new Error(`${n}: wrong bytes`);
    }
    for (const t of TRANSPORTS) rows.push(['put', `sabre ${t}`, mbs(best[`put sabre ${t}`]), mbs(best[`put sabre ${t}`]) / mbs(best['put http']), mbs(best[`put sabre ${t}`]) / mbs(best['put raw net'])]);
    rows.push(['put', 'raw net', mbs(best['put raw net']), NaN, NaN], ['put', 'http (undici fetch)', mbs(best['put http']), NaN, NaN]);
  }
  console.log('\n case  who                    MB/s    ×http   ×raw net');
  for (const [c, w, v, h, n] of rows) console.log(` ${c.padEnd(5)} ${w.padEnd(20)} ${v.toFixed(1).padStart(8)} ${Number.isNaN(h) ? '       ' : h.toFixed(2).padStart(7) + '×'} ${Number.isNaN(n) ? '' : n.toFixed(2).padStart(7) + '×'}`);

  if (!ONLY || ONLY === 'rand') {
    const pages = Math.floor(BYTES / 4096);
    const rnd = () => Math.floor(Math.random() * pages) * 4096;
    const res = {};
    // Alternating one-second slices so both see the same machine.
    const f = {};
    for (const t of TRANSPORTS) f[t] = await clients[t].open('data.bin');
    const check = fs.readFileSync(file);
    const slice = async (name, one) => {
      const end = performance.now() + 1000;
      let n = 0;
      await Promise.all(Array.from({ length: DEPTH }, async () => {
        while (performance.now() < end) {
          await one();
          n++;
        }
      }));
      res[name] = (res[name] ?? 0) + n;
    };
    for (let s = 0; s < RAND_S; s++) {
      for (const t of TRANSPORTS) {
        await slice(`sabre ${t}`, async () => {
          const at = rnd();
          const b = await clients[t].read(f[t], at, 4096);
          if (b[7] !== check[at + 7]) throw new Error('sabre read: wrong bytes');
        });
      }
      await slice('http range', async () => {
        const at = rnd();
        const r = await fetch(`http://127.0.0.1:${ports.http}/data.bin`, { headers: { range: `bytes=${at}-${at + 4095}` } });
        const b = new Uint8Array(await r.arrayBuffer());
        if (b.length !== 4096 || b[7] !== check[at + 7]) throw new Error('http range: wrong bytes');
      });
    }
    console.log(`\n 4 KiB random reads, depth ${DEPTH}, ${RAND_S} × 1 s each (alternating)`);
    for (const [k, v] of Object.entries(res)) {
      const ops = v / RAND_S;
      console.log(` ${k.padEnd(16)} ${ops.toFixed(0).padStart(8)} reads/s${k.startsWith('sabre') ? `  ${(ops / (res['http range'] / RAND_S)).toFixed(2)}× http` : ''}`);
    }
    for (const t of TRANSPORTS) await clients[t].close(f[t]);
  }
  for (const c of Object.values(clients)) await c.end();
  server.send('stop');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(local, { recursive: true, force: true });
}

if (process.argv[2] === '--server') await serverMain(process.argv[3]);
else await main();
