// The package as a user gets it: `npm pack` output, installed into a temporary consumer project
// offline. The tarball is unpacked as npm would, and the packages a consumer would get from the
// registry are linked from this repository's node_modules: the production dependencies
// (npm ls --omit=dev) always, the optional peers (prom-client, uplot) and @types/node only when
// a test asks. sabre's own files resolve imports only through the consumer's node_modules, so a
// dependency missing from package.json fails there.
//
// SABRE_TARBALL=path.tgz runs the package tests against that tarball instead of a fresh pack
// (to see what an earlier release did).
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

export const root = resolve(import.meta.dirname, '../..');
export const bin = (name: string): string => join(root, 'node_modules/.bin', name);

export function run(cmd: string, args: string[], cwd = root, env?: NodeJS.ProcessEnv): string {
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 90_000, env: env ?? process.env });
}

/** run() without blocking this thread (concurrent tests compile at once); rejects as execFile does, with stdout on the error. */
export function runAsync(cmd: string, args: string[], cwd = root): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(cmd, args, { cwd, encoding: 'utf8', timeout: 90_000 }, (e, stdout, stderr) => (e ? reject(Object.assign(e, { stdout, stderr })) : resolvePromise(stdout)));
  });
}

/** Runs a command expected to fail; returns its exit status and stderr. */
export function runFailing(cmd: string, args: string[], cwd: string, env?: NodeJS.ProcessEnv): { status: number | null; stderr: string } {
  try {
    run(cmd, args, cwd, env);
  } catch (e) {
    const x = e as { status: number | null; stderr: string };
    return { status: x.status, stderr: String(x.stderr) };
  }
  return { status: 0, stderr: '' };
}

/** `npm pack` into dir (the CommonJS entry files regenerated first): the tarball and its file list. */
export function pack(dir: string): { tarball: string; files: string[] } {
  const given = process.env.SABRE_TARBALL;
  if (given) {
    const files = run('tar', ['tzf', given]).split('\n').filter(Boolean).map((f) => f.replace(/^package\//, ''));
    return { tarball: resolve(given), files };
  }
  run(process.execPath, ['scripts/cjs-types.mjs']);
  // --ignore-scripts: `prepare` would rebuild; the global setup already did.
  const out = JSON.parse(run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir])) as { filename: string; files: { path: string }[] }[];
  return { tarball: join(dir, out[0]!.filename), files: out[0]!.files.map((f) => f.path) };
}

function link(nm: string, rel: string): void {
  const to = join(nm, rel);
  if (existsSync(to)) return;
  mkdirSync(dirname(to), { recursive: true });
  symlinkSync(join(root, 'node_modules', rel), to, 'dir');
}

/** A package from this repository's node_modules and everything it depends on, hoisted. */
function linkWithDeps(nm: string, name: string): void {
  if (existsSync(join(nm, name))) return;
  link(nm, name);
  const pj = JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  for (const d of Object.keys(pj.dependencies ?? {})) linkWithDeps(nm, d);
}

export interface ConsumerOptions {
  /** The consumer's package.json "type". */
  type?: 'module' | 'commonjs';
  /** Packages to add beside the production dependencies (optional peers, @types/node). */
  extra?: readonly string[];
}

let prodDeps: string[] | undefined;

/** The production dependencies' paths under node_modules (npm ls once per process: ~1 s of CPU a call). */
function productionDependencies(): string[] {
  prodDeps ??= run('npm', ['ls', '--omit=dev', '--parseable', '--all']).split('\n').map((p) => relative(join(root, 'node_modules'), p.trim()));
  return prodDeps;
}

/** A consumer project at dir with the tarball installed; returns dir. */
export function installConsumer(dir: string, tarball: string, opts: ConsumerOptions = {}): string {
  const nm = join(dir, 'node_modules');
  mkdirSync(join(nm, 'sabre'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, ...(opts.type ? { type: opts.type } : {}), dependencies: { sabre: `file:${tarball}` } }));
  run('tar', ['xzf', tarball, '-C', join(nm, 'sabre'), '--strip-components=1']);
  for (const rel of productionDependencies()) {
    if (!rel || rel.startsWith('..') || rel.includes('node_modules')) continue;
    link(nm, rel);
  }
  for (const e of opts.extra ?? []) linkWithDeps(nm, e);
  return dir;
}
