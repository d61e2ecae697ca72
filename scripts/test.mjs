// npm test: the type check of src and test (tsc), the layer rules (dependency-cruiser) and the
// suite (vitest), started together: the suite leaves part of the two cores idle most of the time,
// and the checks (~30 s of CPU, ~29 s of wall before the suite when run first) fill it. Exits
// non-zero when any of the three fails; the checks' output is printed after the suite's.
// Arguments go to vitest (`npm test -- test/files`).
import { spawn } from 'node:child_process';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const env = { ...process.env, PATH: `${join(root, 'node_modules', '.bin')}${delimiter}${process.env.PATH ?? ''}` };

/** Run `cmd`; its output kept (buffered) or passed through. */
function run(cmd, args, buffered) {
  return new Promise((resolve) => {
    const c = spawn(cmd, args, { cwd: root, env, stdio: buffered ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    let out = '';
    if (buffered) {
      c.stdout.on('data', (d) => (out += d));
      c.stderr.on('data', (d) => (out += d));
    }
    c.on('error', (e) => resolve({ code: 1, out: `${out}${cmd}: ${e.message}\n` }));
    c.on('close', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), out }));
  });
}

const checks = [
  ['tsc -p tsconfig.test.json', run('tsc', ['-p', 'tsconfig.test.json'], true)],
  ['depcruise src (layers)', run('depcruise', ['src', '--config', '.dependency-cruiser.cjs'], true)],
];
const suite = await run('vitest', ['run', ...process.argv.slice(2)], false);
let failed = suite.code !== 0;
for (const [name, p] of checks) {
  const r = await p;
  process.stdout.write(`\n${name}: ${r.code === 0 ? 'passed' : `FAILED (exit ${r.code})`}\n`);
  if (r.code !== 0 || /warn/i.test(r.out)) process.stdout.write(r.out);
  failed ||= r.code !== 0;
}
process.exit(failed ? 1 : 0);
