// The packed types as TypeScript users compile against them: one tiny program per module
// setting a project can have (node16 from ESM and from CommonJS, nodenext, bundler), checked
// strict and without skipLibCheck for sabre's declarations, so an error inside them fails too
// (one project through the tsc binary, the others through the compiler's API: checkWithApi). The
// consumers have no prom-client: what 'sabre' and 'sabre/kernels' declare must not need it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bin, installConsumer, pack, run, runAsync } from './consumer.js';

let tmp: string;
let tarball: string;

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'sabre-types-'));
  ({ tarball } = pack(tmp));
}, 90_000);

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// Written once, imported the way each module system spells it. It names what a user reaches
// for: the verbs, an address's host and port narrowed by transport, error codes, the kernels.
const body = `
async function main(): Promise<void> {
  const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
  const host: string | undefined = dev.address.host;
  const a = dev.address as TransportAddress;
  const where: string = a.transport === 'inproc' ? a.id : \`\${a.host}:\${a.port}\`;
  const udp: UdpAddress = { transport: 'udp', host: '127.0.0.1', port: 7000 };
  const pd = dev.allocPd();
  const mr = pd.regMr(4096, Access.LocalWrite);
  const wcs: WorkCompletion[] = dev.createCq({ depth: 8 }).poll(1);
  const code: ErrorCodeValue = ErrorCode.Closed;
  const crc: number = crc32c(new Uint8Array(8));
  console.log(host, where, udp.port, mr.rkey, wcs.length, code, crc);
  await dev.close();
}
void main();
`;

/**
 * The consumer project `dir` checked and emitted in this process through the compiler's API, as
 * `tsc -p` would, except that the semantic check of files that are not the consumer's or sabre's
 * (the standard library, @types/node) is left out: tsc without skipLibCheck checks those again
 * for every project, ~70 % of each run's CPU, and an error in them is not sabre's. Every other
 * diagnostic tsc reports is here, sabre's declarations checked in full. Returns them formatted.
 */
function checkWithApi(dir: string): string {
  const host: ts.FormatDiagnosticsHost = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => dir, getNewLine: () => '\n' };
  const cfg = ts.getParsedCommandLineOfConfigFile(join(dir, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => {
    throw new Error(ts.formatDiagnostics([d], host));
  } })!;
  const program = ts.createProgram({ rootNames: cfg.fileNames, options: cfg.options });
  const ours = program.getSourceFiles().filter((f) => !f.fileName.includes('/node_modules/') || f.fileName.includes('/node_modules/sabre/'));
  const diagnostics = [
    ...cfg.errors, ...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics(), ...program.getSyntacticDiagnostics(),
    ...ours.flatMap((f) => program.getSemanticDiagnostics(f)), ...program.emit().diagnostics,
  ];
  return ts.formatDiagnostics(diagnostics, host);
}

/**
 * A consumer project with `source` as its main file, compiled: by the tsc binary with everything
 * checked (`full`), or by checkWithApi.
 */
async function compile(name: string, pkgType: 'module' | 'commonjs', compilerOptions: Record<string, unknown>, source: string, full = false): Promise<string> {
  const dir = installConsumer(join(tmp, name), tarball, { type: pkgType, extra: ['@types/node'] });
  writeFileSync(join(dir, 'main.ts'), source);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, target: 'es2022', types: ['node'], outDir: 'out', ...compilerOptions },
    files: ['main.ts'],
  }));
  if (!full) {
    const errors = checkWithApi(dir);
    if (errors) throw new Error(`the compiler (${name}) reported:\n${errors}`);
    return dir;
  }
  try {
    await runAsync(bin('tsc'), ['-p', 'tsconfig.json'], dir);
  } catch (e) {
    throw new Error(`tsc (${name}) failed:\n${(e as { stdout?: string }).stdout ?? String(e)}`);
  }
  return dir;
}

const esmImports = `import { openDevice, Access, ErrorCode, type ErrorCodeValue, type TransportAddress, type UdpAddress, type WorkCompletion } from 'sabre';
import { crc32c } from 'sabre/kernels';
`;

describe.concurrent('the packed types compile in a consumer with tsc --strict', () => {
  it('module node16, an ESM project', async () => {
    // The tsc binary, with the standard library and @types/node checked too (the others: checkWithApi).
    await compile('node16-esm', 'module', { module: 'node16' }, esmImports + body, true);
  }, 90_000);

  it('module node16, a CommonJS project (require, no TS1479), and the emitted require() runs', async () => {
    const cjsImports = `import sabre = require('sabre');
import kernels = require('sabre/kernels');
const { openDevice, Access, ErrorCode } = sabre;
const { crc32c } = kernels;
type ErrorCodeValue = sabre.ErrorCodeValue;
type TransportAddress = sabre.TransportAddress;
type UdpAddress = sabre.UdpAddress;
type WorkCompletion = sabre.WorkCompletion;
`;
    const dir = await compile('node16-cjs', 'commonjs', { module: 'node16' }, cjsImports + body);
    expect(run(process.execPath, ['out/main.js'], dir)).toMatch(/^127\.0\.0\.1 127\.0\.0\.1:\d+ 7000 \d+ 0 ERR_CLOSED \d+/);
  }, 90_000);

  it('module node16, CommonJS, with ES import syntax (compiled to require)', async () => {
    await compile('node16-cjs-import', 'commonjs', { module: 'node16' }, esmImports + body);
  }, 90_000);

  it('module nodenext', async () => {
    await compile('nodenext', 'module', { module: 'nodenext' }, esmImports + body);
  }, 90_000);

  it('moduleResolution bundler, module esnext', async () => {
    await compile('bundler', 'module', { module: 'esnext', moduleResolution: 'bundler', noEmit: true }, esmImports + body);
  }, 90_000);
});
