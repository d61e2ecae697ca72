// The dedup soak's measure (scripts/soak-dedup.mjs) for two builds alternated in the same minutes:
// per round (32-64 MiB, v2 = v1 with every other 1 MiB block new), for A and B in turn (the order
// flips each round), one fresh CLI process per operation: put --dedup, put, get --dedup, get; each
// build runs its own `sabre serve`. Every result is checked byte-exact (SHA-256). Prints per build
// and operation the median wall seconds (process start-up included, as in the soak), the median
// CPU seconds of both processes (the client's from /usr/bin/time, the server's from /proc), and
// the client's minor page faults — on a shared machine the last two move far less than the first.
//   A=/path/to/base/worktree B=. N=10 T=tcp node bench/dedup-soak-ab.bench.mjs
// (each tree built: npm run build). Needs Linux (/proc, /usr/bin/time). OPS: a comma-separated
// subset of the four operations (a verb is reported when both its forms ran); ranges in brackets.
import { execFile, fork } from 'node:child_process';
import { randomBytes, createHash } from 'node:crypto';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolve } from 'node:path';
const A = resolve(process.env.A ?? '.'), B = resolve(process.env.B ?? '.');
const N = Number(process.env.N ?? 6), T = process.env.T ?? 'tcp';
const OPS = (process.env.OPS ?? 'put --dedup,put,get --dedup,get').split(',');
const TOKEN = 'ab-' + randomBytes(12).toString('hex');
const srvCpu = (pid) => { const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return (Number(f[11]) + Number(f[12])) / 100; };
const sha = (b) => createHash('sha256').update(b).digest('hex');
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
async function side(root) {
  const CLI = join(root, 'dist/cli/main.js');
  const dir = fs.mkdtempSync(join(tmpdir(), 'sabre-ab-srv-')), local = fs.mkdtempSync(join(tmpdir(), 'sabre-ab-cli-'));
  const child = fork(CLI, ['serve', dir, '--host', '127.0.0.1', '-p', '0', '--transport', T, '--token', TOKEN], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const { port } = await new Promise((r) => child.once('message', r));
  return { root, CLI, dir, local, child, port, cpu: {}, pf: {}, t: Object.fromEntries(OPS.map((o) => [o, []])) };
}
const sides = [await side(A), await side(B)];
for (let i = 0; i < N; i++) {
  const mb = 32 + ((i * 7) % 33);
  const v1 = randomBytes(mb << 20), v2 = Buffer.from(v1);
  for (let b = 0; b < mb; b += 2) randomBytes(1 << 20).copy(v2, b << 20);
  const want = sha(v2);
  const order = i % 2 ? [1, 0] : [0, 1];
  for (const op of OPS) for (const k of order) {
    const s = sides[k];
    const remote = join(s.dir, 'f.bin'), v2p = join(s.local, 'v2.bin'), got = join(s.local, 'got.bin');
    fs.writeFileSync(v2p, v2);
    const [verb, flag] = op.split(' ');
    if (verb === 'put') fs.writeFileSync(remote, v1); else { fs.writeFileSync(remote, v2); fs.writeFileSync(got, v1); }
    const args = verb === 'put' ? ['put', v2p, `127.0.0.1:${s.port}/f.bin`] : ['get', `127.0.0.1:${s.port}/f.bin`, got];
    if (flag) args.push(flag);
    const c0 = srvCpu(s.child.pid);
    const t0 = performance.now();
    const se = await new Promise((res, rej) => execFile('/usr/bin/time', ['-f', 'CPU %U %S %R', process.execPath, s.CLI, ...args, '--token', TOKEN, '--transport', T, '--json'], (e, so, se) => e ? rej(new Error(`${s.root} ${op}: ${se}`)) : res(se)));
    const dt = (performance.now() - t0) / 1000;
    const m = /CPU (\S+) (\S+) (\S+)/.exec(se); (s.pf[op] ??= []).push(Number(m[3]));
    (s.cpu[op] ??= []).push(Number(m[1]) + Number(m[2]) + srvCpu(s.child.pid) - c0);
    if (sha(fs.readFileSync(verb === 'put' ? remote : got)) !== want) throw new Error(`${s.root} ${op}: not byte-exact`);
    s.t[op].push(dt);
  }
  process.stderr.write(`\r${T} round ${i + 1}/${N}`);
}
process.stderr.write('\n');
for (const s of sides) { s.child.kill('SIGTERM'); fs.rmSync(s.dir, { recursive: true, force: true }); fs.rmSync(s.local, { recursive: true, force: true }); }
console.log(`${T}, ${N} rounds alternated, 32-64 MiB half duplicate, medians (s):`);
const range = (xs) => `${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}`;
// Only the verbs whose dedup and plain forms both ran (OPS may name a subset).
for (const op of ['put', 'get'].filter((v) => OPS.includes(v) && OPS.includes(`${v} --dedup`))) {
  const row = sides.map((s) => `${s.root === A ? 'A' : 'B'} dedup ${med(s.t[op + ' --dedup']).toFixed(3)} (${range(s.t[op + ' --dedup'])}) plain ${med(s.t[op]).toFixed(3)} (${range(s.t[op])}) = ${(med(s.t[op + ' --dedup']) / med(s.t[op])).toFixed(2)}x`);
  const ratio = med(sides[1].t[op + ' --dedup'].map((x, j) => x / sides[0].t[op + ' --dedup'][j]));
  console.log(`${op}: ${row.join(' | ')} | B/A dedup per round median ${ratio.toFixed(2)}`);
  const crow = sides.map((s) => `${s.root === A ? 'A' : 'B'} CPU s dedup ${med(s.cpu[op + ' --dedup']).toFixed(3)} plain ${med(s.cpu[op]).toFixed(3)} = ${(med(s.cpu[op + ' --dedup']) / med(s.cpu[op])).toFixed(2)}x`);
  console.log(`   ${crow.join(' | ')}`);
  console.log('   client minor faults: ' + sides.map((s) => `${s.root === A ? 'A' : 'B'} dedup ${med(s.pf[op + ' --dedup'])} plain ${med(s.pf[op])}`).join(' | '));
}
