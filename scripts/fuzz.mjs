#!/usr/bin/env node
// npm run fuzz -- [--inputs N] [--seed S] [--transport udp|tcp|udp,tcp] [--roles a,b]
// The live-device fuzz campaign of issue #11 (docs/fuzzing.md): N hostile inputs per transport
// (default 1,000,000) at a device that transfers verified data meanwhile. Runs
// test/fuzz/campaign.fuzz.ts under vitest (the campaign is TypeScript next to the tests it
// shares helpers with); exits non-zero on failure after printing the seed, the input index and
// where the last inputs were saved (fuzz-failures/).
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = { inputs: '1000000', seed: '1', transport: 'udp,tcp', roles: '' };
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const m = /^--(inputs|seed|transport|roles)(?:=(.*))?$/.exec(a);
  if (!m) {
    console.error(`unknown argument ${a}\nusage: npm run fuzz -- [--inputs N] [--seed S] [--transport udp|tcp|udp,tcp] [--roles a,b]`);
    process.exit(2);
  }
  opt[m[1]] = m[2] ?? args[++i];
}
if (!/^\d+$/.test(opt.inputs) || !/^\d+$/.test(opt.seed) || !/^(udp|tcp)(,(udp|tcp))?$/.test(opt.transport)) {
  console.error(`bad arguments: ${JSON.stringify(opt)}`);
  process.exit(2);
}
console.log(`fuzz: ${opt.inputs} inputs per transport (${opt.transport}), seed ${opt.seed}${opt.roles ? `, roles ${opt.roles}` : ''}`);
const r = spawnSync('npx', ['vitest', 'run', '--config', 'test/fuzz/vitest.fuzz.config.ts'], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, FUZZ_INPUTS: opt.inputs, FUZZ_SEED: opt.seed, FUZZ_TRANSPORT: opt.transport, ...(opt.roles ? { FUZZ_ROLES: opt.roles } : {}) },
});
process.exit(r.status ?? 1);
