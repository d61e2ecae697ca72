// Worker threads load compiled JavaScript from dist/ and every instance loads build/sabre.wasm,
// so a test run must never see outputs older than their sources. `npm install` builds both;
// this rebuilds whatever an edit made stale, so the edit-test loop stays one command.
// It also gives the run a temporary directory of its own (TMPDIR, which the test processes and
// their children inherit) and removes it at the end: what a test, a served directory or a
// child process leaves in os.tmpdir() goes with the run instead of piling up in /tmp.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The newest file under dir whose name ends with ext, the linked bundles (*.bundle.cjs) left out. */
function newest(dir: string, ext: string): number {
  if (!existsSync(dir)) return 0;
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p, ext));
    else if (p.endsWith(ext) && !p.endsWith('.bundle.cjs')) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

function mtime(p: string): number {
  return existsSync(p) ? statSync(p).mtimeMs : 0;
}

// Several vitest runs may start at once (editors, parallel shells): one builds, the others wait.
function withBuildLock(fn: () => void): void {
  const lock = 'build/.lock';
  mkdirSync('build', { recursive: true });
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`build lock ${lock} held for 2 minutes; remove it if stale`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    fn();
  } finally {
    rmdirSync(lock);
  }
}

// vitest calls a global setup once per project (vitest.config.ts has three): the first call
// builds and makes the run's directory, the others find it and leave both to the first. Each
// call making its own under the last one's TMPDIR nested them past the 108 bytes of a Unix
// socket's path (Chromium's singleton socket in test/cli/report failed so).
const RUN_TMP = 'SABRE_TEST_RUN_TMP';

export default function setup(): () => void {
  if (process.env[RUN_TMP] !== undefined) return () => {};
  withBuildLock(rebuildStale);
  const runTmp = mkdtempSync(join(tmpdir(), 'sabre-test-'));
  const before = process.env['TMPDIR'];
  process.env['TMPDIR'] = runTmp;
  process.env[RUN_TMP] = runTmp;
  return () => {
    if (before === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = before;
    delete process.env[RUN_TMP];
    rmSync(runTmp, { recursive: true, force: true });
  };
}

function rebuildStale(): void {
  if (newest('assembly', '.ts') > mtime('build/sabre.wasm')) {
    execFileSync('npx', ['asc', 'assembly/index.ts', '--target', 'release'], { stdio: 'inherit' });
  }
  // The sync twin of asc's instantiate (no top-level await in the package); idempotent.
  execFileSync(process.execPath, ['scripts/sync-bindings.mjs'], { stdio: 'inherit' });
  if (newest('src', '.ts') > newest('dist', '.js')) {
    // tsc still emits JavaScript when it finds type errors; the worker-thread tests only need
    // that JavaScript, so a type error elsewhere must not stop every test. `npm install`
    // (prepare) and CI still fail on type errors.
    try {
      execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
    } catch {
      console.warn('global-setup: tsc reported type errors (see above); running tests against the emitted JavaScript');
    }
  }
  // NIC threads run the one-file bundle of dist/nic/thread-main.js (src/nic/thread-start.ts),
  // and the `sabre` command the one of dist/cli/run.js (src/cli/linked.ts), as an installed
  // package does: relink each whenever tsc has written newer JavaScript, or asc newer bindings
  // (build/sabre.js is linked in too).
  const compiled = Math.max(newest('dist', '.js'), mtime('build/sabre.js'));
  for (const [bundle, script] of [['dist/nic/thread.bundle.cjs', 'scripts/bundle-nic.mjs'], ['dist/cli/sabre.bundle.cjs', 'scripts/bundle-cli.mjs']] as const) {
    if (compiled > mtime(bundle)) execFileSync(process.execPath, [script], { stdio: 'inherit' });
  }
}
