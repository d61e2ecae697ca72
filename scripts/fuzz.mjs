#!/usr/bin/env node
// npm run fuzz -- [--inputs N] [--seed S] [--transport udp|tcp|udp,tcp] [--roles a,b] [--surface channel|files|channel,files]
// The fuzz campaigns (docs/fuzzing.md):
// - live devices (--transport): N hostile inputs per transport at a device that transfers
//   verified data meanwhile (test/fuzz/campaign.fuzz.ts);
// - message surfaces (--surface): N inputs per surface into the channel's and the file
//   service's cores and decoders (test/fuzz/surfaces.fuzz.ts).
// With neither option both run (every transport, then every surface); with one, only it.
// Both run under vitest (the campaigns are TypeScript next to the tests they share helpers
// with); exits non-zero on failure after printing the seed and how to reproduce.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const usage = 'usage: npm run fuzz -- [--inputs N] [--seed S] [--transport udp|tcp|udp,tcp] [--roles a,b] [--surface channel|files|channel,files]';
const opt = { inputs: '1000000', seed: '1', transport: '', roles: '', surface: '' };
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const m = /^--(inputs|seed|transport|roles|surface)(?:=(.*))?$/.exec(a);
  if (!m) {
    console.error(`unknown argument ${a}\n${usage}`);
    process.exit(2);
  }
  opt[m[1]] = m[2] ?? args[++i];
}
if (!opt.transport && !opt.surface) {
  opt.transport = 'udp,tcp';
  opt.surface = 'channel,files';
}
if (!/^\d+$/.test(opt.inputs) || !/^\d+$/.test(opt.seed) || (opt.transport && !/^(udp|tcp)(,(udp|tcp))?$/.test(opt.transport))
  || (opt.surface && !/^(channel|files)(,(channel|files))?$/.test(opt.surface))) {
  console.error(`bad arguments: ${JSON.stringify(opt)}\n${usage}`);
  process.exit(2);
}
let status = 0;
if (opt.transport) {
  console.log(`fuzz: ${opt.inputs} inputs per transport (${opt.transport}), seed ${opt.seed}${opt.roles ? `, roles ${opt.roles}` : ''}`);
  const r = spawnSync('npx', ['vitest', 'run', '--config', 'test/fuzz/vitest.fuzz.config.ts', 'test/fuzz/campaign.fuzz.ts'], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, FUZZ_INPUTS: opt.inputs, FUZZ_SEED: opt.seed, FUZZ_TRANSPORT: opt.transport, ...(opt.roles ? { FUZZ_ROLES: opt.roles } : {}) },
  });
  status ||= r.status ?? 1;
}
if (opt.surface) {
  console.log(`fuzz: ${opt.inputs} inputs per message surface (${opt.surface}), seed ${opt.seed}`);
  const r = spawnSync('npx', ['vitest', 'run', '--config', 'test/fuzz/vitest.fuzz.config.ts', 'test/fuzz/surfaces.fuzz.ts'], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, FUZZ_INPUTS: opt.inputs, FUZZ_SEED: opt.seed, FUZZ_SURFACE: opt.surface },
  });
  status ||= r.status ?? 1;
}
process.exit(status);
