// How long the `sabre` command takes to start, run from its bin (dist/cli/main.js) as the tests
// and a user run it: `--version` and `--help` (start-up and little else), and `sabre serve` until
// it reports its port (start-up, then a file server with its udp and tcp devices and NIC
// threads). The one-file bundle of the CLI (scripts/bundle-cli.mjs, the default) against the
// module graph it is linked from (SABRE_CLI_BUNDLE=0), and `node -e 0` (node's own start: the
// floor). The paths take turns, sample by sample, so the shared machine's load spikes land on all
// of them. Ratio = p50 ÷ the module graph's p50. CLI_START_BEFORE=/copy/of/dist/cli/main.js adds
// another build's bin as a third path (a copy of the tree from before a change, with its own
// dist/, build/, package.json and node_modules).
// Run: npm run build && node bench/cli-start.bench.mjs   (CLI_START_N samples per path, 20)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const N = Number(process.env.CLI_START_N ?? 20);
const MAIN = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'sabre-cli-start-'));
const commands = [
  { name: '--version', args: ['--version'] },
  { name: '--help', args: ['--help'] },
  { name: 'serve (until ready)', args: ['serve', dir, '-p', '0', '--host', '127.0.0.1'], ready: true },
];
const paths = [
  { name: 'bundle', env: undefined, main: MAIN },
  { name: 'module graph', env: '0', main: MAIN },
  ...(process.env.CLI_START_BEFORE ? [{ name: `before (${process.env.CLI_START_BEFORE})`, env: undefined, main: process.env.CLI_START_BEFORE }] : []),
];
const pct = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))];

/** ms from spawn to exit, or (ready) to the command's first IPC message, then SIGTERM and wait. */
function once(args, env, ready) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit', ...(ready ? ['ipc'] : [])], env });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    let ms;
    if (ready) child.once('message', () => ((ms = performance.now() - t0), child.kill('SIGTERM')));
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      ms ??= performance.now() - t0;
      if (signal === 'SIGKILL' || (!ready && code !== 0)) reject(new Error(`${args.join(' ')}: exit ${code} ${signal}`));
      else resolve(ms);
    });
  });
}

const rows = [];
const floor = [];
for (const c of commands) {
  const ms = paths.map(() => []);
  for (let i = 0; i < N + 2; i++) {
    for (const [k, p] of paths.entries()) {
      const env = { ...process.env };
      if (p.env === undefined) delete env.SABRE_CLI_BUNDLE;
      else env.SABRE_CLI_BUNDLE = p.env;
      const t = await once([p.main, ...c.args], env, c.ready);
      if (i >= 2) ms[k].push(t); // two warm-up rounds
    }
    if (c === commands[0] && i >= 2) floor.push(await once(['-e', '0'], process.env, false));
  }
  const graph = pct(ms[1], 0.5);
  for (const [k, p] of paths.entries()) {
    rows.push({ command: c.name, path: p.name, 'p50 ms': pct(ms[k], 0.5).toFixed(0), 'p90 ms': pct(ms[k], 0.9).toFixed(0), samples: ms[k].length, '÷ module graph p50': (pct(ms[k], 0.5) / graph).toFixed(2) });
  }
}
rows.push({ command: 'node -e 0', path: '(floor)', 'p50 ms': pct(floor, 0.5).toFixed(0), 'p90 ms': pct(floor, 0.9).toFixed(0), samples: floor.length, '÷ module graph p50': '' });
rmSync(dir, { recursive: true, force: true });
console.table(rows);
