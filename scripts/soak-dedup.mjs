// A bounded soak of dedup file transfers through the CLI, as a user runs them: for each transport,
// one `sabre serve` and SOAK_RUNS rounds of
//   put --dedup v2 (the server's file is v1), put v2 (plain, same file), get --dedup (the local
//   file is v1, the server's v2), get (plain)
// on files of 32-64 MiB where v2 is v1 with every other 1 MiB block new (half duplicate). Every run
// must exit 0 within SOAK_LIMIT_S and leave a byte-exact v2 (SHA-256). Prints per transport and
// operation: runs passed, median and slowest seconds, median dedup / median plain, and the chunk
// bytes the dedup runs moved (the CLI's --json report) over the file size. Exits 1 on any failure.
// Not part of npm test (minutes of CPU); run it after a build:
//   npx tsc -p tsconfig.build.json && npm run soak:dedup
//   env: SOAK_RUNS (20), SOAK_TRANSPORTS (udp,tcp), SOAK_MIN_MB (32), SOAK_MAX_MB (64), SOAK_LIMIT_S (30)
import { execFile, fork } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RUNS = Number(process.env.SOAK_RUNS ?? 20);
const TRANSPORTS = (process.env.SOAK_TRANSPORTS ?? 'udp,tcp').split(',');
const MIN_MB = Number(process.env.SOAK_MIN_MB ?? 32);
const MAX_MB = Number(process.env.SOAK_MAX_MB ?? 64);
const LIMIT_S = Number(process.env.SOAK_LIMIT_S ?? 30);
const TOKEN = `soak-${randomBytes(12).toString('hex')}`;
const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

const sha = (b) => createHash('sha256').update(b).digest('hex');
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function halfDuplicate(mb) {
  const v1 = randomBytes(mb << 20);
  const v2 = Buffer.from(v1);
  for (let b = 0; b < mb; b += 2) randomBytes(1 << 20).copy(v2, b << 20);
  return { v1, v2 };
}

/** Run the CLI; resolves with its exit code, seconds and --json report (killed past the limit + 5 s). */
function cli(args) {
  const t0 = performance.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args, '--json'], { timeout: (LIMIT_S + 5) * 1000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      const s = (performance.now() - t0) / 1000;
      let report;
      try {
        report = JSON.parse(stdout.trim().split('\n').pop());
      } catch {
        report = undefined;
      }
      resolve({ code: err ? (err.code ?? 1) : 0, s, report, stderr: String(stderr).trim() });
    });
  });
}

async function serve(dir, transport) {
  const child = fork(CLI, ['serve', dir, '--host', '127.0.0.1', '-p', '0', '--transport', transport, '--token', TOKEN], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const { port } = await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (c) => reject(new Error(`sabre serve exited with ${c}`)));
  });
  return { port, stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))) };
}

const failures = [];
const rows = [];
for (const transport of TRANSPORTS) {
  const dir = fs.mkdtempSync(join(tmpdir(), 'sabre-soak-srv-'));
  const local = fs.mkdtempSync(join(tmpdir(), 'sabre-soak-cli-'));
  const srv = await serve(dir, transport);
  const remote = join(dir, 'f.bin');
  const v2Path = join(local, 'v2.bin');
  const got = join(local, 'got.bin');
  const url = `127.0.0.1:${srv.port}/f.bin`;
  const base = ['--token', TOKEN, '--transport', transport];
  const res = { 'put --dedup': [], put: [], 'get --dedup': [], get: [] };
  const moved = { 'put --dedup': [], 'get --dedup': [] };
  try {
    for (let i = 0; i < RUNS; i++) {
      const mb = MIN_MB + ((i * 7) % (MAX_MB - MIN_MB + 1));
      const { v1, v2 } = halfDuplicate(mb);
      const want = sha(v2);
      fs.writeFileSync(v2Path, v2);
      const steps = [
        ['put --dedup', () => fs.writeFileSync(remote, v1), ['put', v2Path, url, '--dedup'], remote],
        ['put', () => fs.writeFileSync(remote, v1), ['put', v2Path, url], remote],
        ['get --dedup', () => (fs.writeFileSync(remote, v2), fs.writeFileSync(got, v1)), ['get', url, got, '--dedup'], got],
        ['get', () => (fs.writeFileSync(remote, v2), fs.writeFileSync(got, v1)), ['get', url, got], got],
      ];
      for (const [name, reset, args, out] of steps) {
        reset();
        const r = await cli([...args, ...base]);
        const exact = r.code === 0 && sha(fs.readFileSync(out)) === want;
        const ok = exact && r.s <= LIMIT_S;
        res[name].push(r.s);
        if (r.report?.dedup) moved[name].push(r.report.dedup.bytesMoved / v2.length);
        if (!ok) failures.push(`${transport} ${name} run ${i + 1} (${mb} MiB): ${r.code !== 0 ? `exit ${r.code}: ${r.stderr.split('\n').pop()}` : !exact ? 'not byte-exact' : `${r.s.toFixed(1)} s > ${LIMIT_S} s`}`);
      }
      process.stderr.write(`\r${transport}: ${i + 1}/${RUNS} rounds, ${failures.length} failures`);
    }
  } finally {
    process.stderr.write('\n');
    await srv.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(local, { recursive: true, force: true });
  }
  for (const op of ['put', 'get']) {
    const d = res[`${op} --dedup`];
    const p = res[op];
    rows.push({ transport, op, runs: d.length, passed: d.length - failures.filter((f) => f.startsWith(`${transport} ${op} --dedup`)).length, d, p, moved: moved[`${op} --dedup`] });
  }
}

console.log(`\ndedup soak: ${RUNS} rounds per transport, ${MIN_MB}-${MAX_MB} MiB, v2 = v1 with every other 1 MiB block new; each CLI run a fresh process (start-up included)`);
console.log(`| transport | op | --dedup runs passed (byte-exact, ≤ ${LIMIT_S} s) | --dedup median s (slowest) | plain median s (slowest) | median --dedup / plain | chunk bytes moved / size (median) |`);
console.log('|---|---|---:|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(`| ${r.transport} | ${r.op} | ${r.passed}/${r.runs} | ${med(r.d).toFixed(2)} (${Math.max(...r.d).toFixed(2)}) | ${med(r.p).toFixed(2)} (${Math.max(...r.p).toFixed(2)}) | ${(med(r.d) / med(r.p)).toFixed(2)}× | ${r.moved.length ? med(r.moved).toFixed(3) : '-'} |`);
}
if (failures.length) {
  console.log(`\n${failures.length} failures:\n${failures.join('\n')}`);
  process.exit(1);
}
