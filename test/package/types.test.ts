// The packed types as TypeScript users compile against them: one tiny program per module
// setting a project can have (node16 from ESM and from CommonJS, nodenext, bundler), checked with
// `tsc --strict` and no skipLibCheck, so an error inside sabre's declarations fails too. The
// consumers have no prom-client: what 'sabre' and 'sabre/kernels' declare must not need it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

async function compile(name: string, pkgType: 'module' | 'commonjs', compilerOptions: Record<string, unknown>, source: string, ext = '.ts'): Promise<string> {
  const dir = installConsumer(join(tmp, name), tarball, { type: pkgType, extra: ['@types/node'] });
  writeFileSync(join(dir, `main${ext}`), source);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, target: 'es2022', types: ['node'], outDir: 'out', ...compilerOptions },
    files: [`main${ext}`],
  }));
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
    await compile('node16-esm', 'module', { module: 'node16' }, esmImports + body);
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
