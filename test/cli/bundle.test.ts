// Which form of the `sabre` command the bin (dist/cli/main.js) loads: the one-file bundle
// (scripts/bundle-cli.mjs) when it was linked from the current build, else the module graph it
// was linked from; and, run from the bundle, the code that finds files beside its own module
// (the NIC thread's script, the stress worker, the bin it forks, package.json) still finds them.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI_BUNDLE, CLI_ENTRY, cliScript } from '../../src/cli/linked.js';
import { sabreAsync } from './helpers.js';

const dir = '/x/dist/cli';
const entry = join(dir, CLI_ENTRY);
const bundle = join(dir, CLI_BUNDLE);
const times = (t: Record<string, number>) => (p: string): number | undefined => t[p];

describe('the script the sabre bin loads', () => {
  it('is the bundle when it is as new as run.js or newer', () => {
    expect(cliScript(dir, times({ [entry]: 10, [bundle]: 10 }), true)).toBe(bundle);
    expect(cliScript(dir, times({ [entry]: 10, [bundle]: 11 }), true)).toBe(bundle);
  });

  it('is run.js when tsc wrote it after the bundle was linked (a stale bundle never runs)', () => {
    expect(cliScript(dir, times({ [entry]: 12, [bundle]: 11 }), true)).toBe(entry);
  });

  it('is run.js without a bundle, or when asked for the module graph', () => {
    expect(cliScript(dir, times({ [entry]: 10 }), true)).toBe(entry);
    expect(cliScript(dir, times({ [entry]: 10, [bundle]: 11 }), false)).toBe(entry);
  });

  it('in this run is the bundle the global setup linked; SABRE_CLI_BUNDLE=0 runs the module graph', async () => {
    const dist = join(process.cwd(), 'dist', 'cli');
    expect(cliScript(dist, undefined, true)).toBe(join(dist, CLI_BUNDLE));
    expect(statSync(join(dist, CLI_BUNDLE)).mtimeMs).toBeGreaterThanOrEqual(statSync(join(dist, CLI_ENTRY)).mtimeMs);
    // An operational error's stack (SABRE_DEBUG=1) names the file the command ran from.
    const args = ['serve', join(process.cwd(), 'no-such-dir'), '-p', '0'];
    const [linked, graph] = await Promise.all([sabreAsync(args, 30_000, { SABRE_DEBUG: '1', SABRE_CLI_BUNDLE: '1' }), sabreAsync(args, 30_000, { SABRE_DEBUG: '1', SABRE_CLI_BUNDLE: '0' })]);
    expect(linked.code, linked.stderr).toBe(1);
    expect(linked.stderr).toMatch(/is not a directory/);
    expect(linked.stderr).toContain(`dist/cli/${CLI_BUNDLE}`);
    expect(graph.code, graph.stderr).toBe(1);
    expect(graph.stderr).toMatch(/is not a directory/);
    expect(graph.stderr).not.toContain(CLI_BUNDLE);
    expect(graph.stderr).toContain('dist/cli/files/index.js');
  });
});

// These run whichever form this run's environment picks (SABRE_CLI_BUNDLE=0 runs the whole
// CLI suite on the module graph); by default, the bundle.
describe.concurrent('run from the bundle, the command finds the files beside its modules', () => {
  it('package.json: --version is the package version', async () => {
    const r = await sabreAsync(['--version']);
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    expect(r.stdout.trim()).toBe(`sabre ${version} (node ${process.versions.node})`);
  });

  it('perf over udp: the bin it forks as the server, the NIC thread script and the data plane (build/sabre.wasm)', async () => {
    const r = await sabreAsync(['perf', 'write_bw', '--transport', 'udp', '-s', '4096', '-n', '50', '--workers', '1', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout) as { workers: number; results: { iterations: number }[] };
    expect(j.workers).toBe(1);
    expect(j.results[0]!.iterations).toBe(50);
  });

  it('stress: its piscina worker script', async () => {
    const r = await sabreAsync(['stress', '--workers', '1', '--qps', '1', '--duration', '20', '--ops', '50', '--max-size', '4096', '--transport', 'inproc', '--json'], 40_000);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const j = JSON.parse(r.stdout) as { ops: number; errors: number };
    expect(j.ops).toBe(50);
    expect(j.errors).toBe(0);
  });
});
