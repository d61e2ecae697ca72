// A/B of two builds of sabre on dedup file transfers, interleaved run by run so both see the same
// machine (on a shared machine the load moves by 2x between minutes: two separate bench runs say
// little). For each build (a repository root with dist/ built), one process pair: a forked
// serveFiles of that build and a FileClient of that build. The driver alternates
//   A plain, A dedup, B plain, B dedup   (the order of A and B swapped every round)
// of put (or get) of a half-duplicate file (v1 random, v2 = v1 with every other 1 MiB block new),
// each run checked by SHA-256, and reports per build the median seconds, dedup / plain, and the
// ratio of the builds' dedup medians.
//
//   node bench/dedup-ab.bench.mjs                      (A = B = this tree: the method's noise floor)
//   DEDUP_AB_A=/path/to/before DEDUP_AB_B=. node bench/dedup-ab.bench.mjs
//   env: DEDUP_AB_MB (48), DEDUP_AB_REPS (9), DEDUP_AB_TRANSPORT (tcp), DEDUP_AB_OP (put | get)
import { fork } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SELF = fileURLToPath(import.meta.url);
const TOKEN = 'bench-token-0123456789';
const MB = Number(process.env.DEDUP_AB_MB ?? 48);
const REPS = Number(process.env.DEDUP_AB_REPS ?? 9);
const TRANSPORT = process.env.DEDUP_AB_TRANSPORT ?? 'tcp';
const OP = process.env.DEDUP_AB_OP ?? 'put';
const sha = (b) => createHash('sha256').update(b).digest('hex');
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function server(root, dir) {
  const { serveFiles } = await import(pathToFileURL(join(root, 'dist/index.js')).href);
  const srv = await serveFiles(dir, { token: TOKEN, transports: [TRANSPORT], host: '127.0.0.1' });
  process.send({ port: srv.address.port });
  process.on('disconnect', () => process.exit(0));
}

/** One build's client; runs a transfer per message from the driver. */
async function pair(root, dir, files) {
  const { FileClient } = await import(pathToFileURL(join(root, 'dist/index.js')).href);
  const srv = fork(SELF, ['server', root, dir], { stdio: 'inherit' });
  const { port } = await new Promise((r) => srv.once('message', r));
  const c = await FileClient.connect({ host: '127.0.0.1', port }, { token: TOKEN, transport: TRANSPORT });
  const remote = join(dir, 'f.bin');
  const got = join(dir, 'got.bin');
  const v1 = fs.readFileSync(files.v1);
  const v2 = fs.readFileSync(files.v2);
  process.on('message', async ({ dedup }) => {
    fs.writeFileSync(remote, OP === 'put' ? v1 : v2);
    if (OP === 'get') fs.writeFileSync(got, v1);
    const t0 = performance.now();
    await (OP === 'put' ? c.put(files.v2, 'f.bin', { dedup }) : c.get('f.bin', got, { dedup }));
    const s = (performance.now() - t0) / 1e3;
    const ok = sha(fs.readFileSync(OP === 'put' ? remote : got)) === files.want;
    process.send({ s, ok });
  });
  process.on('disconnect', () => process.exit(0));
  process.send({ ready: true });
}

async function main() {
  const roots = { A: resolve(process.env.DEDUP_AB_A ?? '.'), B: resolve(process.env.DEDUP_AB_B ?? '.') };
  const tmp = fs.mkdtempSync(join(tmpdir(), 'sabre-dedup-ab-'));
  const v1 = randomBytes(MB << 20);
  const v2 = Buffer.from(v1);
  for (let b = 0; b < MB; b += 2) randomBytes(1 << 20).copy(v2, b << 20);
  const files = { v1: join(tmp, 'v1.bin'), v2: join(tmp, 'v2.bin'), want: sha(v2) };
  fs.writeFileSync(files.v1, v1);
  fs.writeFileSync(files.v2, v2);
  const sides = {};
  for (const k of ['A', 'B']) {
    const dir = join(tmp, k);
    fs.mkdirSync(dir);
    const p = fork(SELF, ['pair', roots[k], dir, JSON.stringify(files)], { stdio: 'inherit' });
    await new Promise((r) => p.once('message', r));
    sides[k] = { p, plain: [], dedup: [] };
  }
  const run = (k, dedup) => new Promise((r, j) => {
    sides[k].p.once('message', (m) => (m.ok ? r(m.s) : j(new Error(`${k} ${OP}${dedup ? ' --dedup' : ''}: not byte-exact`))));
    sides[k].p.send({ dedup });
  });
  try {
    for (const k of ['A', 'B']) for (const d of [false, true]) await run(k, d); // warm-up
    for (let i = 0; i < REPS; i++) {
      for (const k of i % 2 ? ['B', 'A'] : ['A', 'B']) {
        sides[k].plain.push(await run(k, false));
        sides[k].dedup.push(await run(k, true));
      }
    }
  } finally {
    for (const k of ['A', 'B']) sides[k].p.disconnect();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`\n${OP} of a ${MB} MiB half-duplicate file, ${TRANSPORT}, ${REPS} interleaved rounds (median [all])`);
  console.log(`A = ${roots.A}\nB = ${roots.B}`);
  console.log('| build | plain s | dedup s | dedup / plain |');
  console.log('|---|---:|---:|---:|');
  for (const k of ['A', 'B']) {
    const s = sides[k];
    const f = (xs) => `${med(xs).toFixed(3)} [${xs.map((x) => x.toFixed(2)).join(' ')}]`;
    console.log(`| ${k} | ${f(s.plain)} | ${f(s.dedup)} | **${(med(s.dedup) / med(s.plain)).toFixed(2)}×** |`);
  }
  console.log(`B's median dedup ${OP} / A's: **${(med(sides.B.dedup) / med(sides.A.dedup)).toFixed(2)}×**; per round B/A: ${sides.B.dedup.map((b, i) => (b / sides.A.dedup[i]).toFixed(2)).join(' ')}`);
}

const [mode, root, dir, files] = process.argv.slice(2);
if (mode === 'server') await server(root, dir);
else if (mode === 'pair') await pair(root, dir, JSON.parse(files));
else await main();
