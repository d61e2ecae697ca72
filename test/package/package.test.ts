// The package as a user gets it: `npm pack` output, checked by publint and
// @arethetypeswrong/cli, then installed into a temporary consumer project (offline) and loaded
// with require() and import. The global setup has already built dist/ and build/.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const bin = (name: string): string => join(root, 'node_modules/.bin', name);
let tmp: string;
let tarball: string;
let files: string[];

function run(cmd: string, args: string[], cwd = root): string {
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
}

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'sabre-pack-'));
  // --ignore-scripts: `prepare` would rebuild; the global setup already did.
  const out = JSON.parse(run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp])) as { filename: string; files: { path: string }[] }[];
  tarball = join(tmp, out[0]!.filename);
  files = out[0]!.files.map((f) => f.path);
}, 60_000);

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('ships what a user needs and nothing else', () => {
    for (const f of ['LICENSE', 'README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'dist/dataplane/worker-main.js', 'build/sabre.wasm', 'build/sabre.js', 'build/sabre.d.ts', 'docs/design.md', 'docs/errors.md']) {
      expect(files, f).toContain(f);
    }
    const unwanted = files.filter((f) => f.startsWith('assembly/') || f.startsWith('src/') || f.startsWith('test/') || f.endsWith('.map') || f.endsWith('.tmpl') || f.endsWith('.wat'));
    expect(unwanted).toEqual([]);
    // Everything else is the compiled library, the WASM module and its loader, and the docs: a
    // file count would only track how many modules src/ has, so the shape is checked instead.
    const shipped = /^(dist\/.+\.(js|d\.ts)|build\/sabre\.(wasm|js|d\.ts)|docs\/[^/]+\.md|README\.md|LICENSE|package\.json)$/;
    expect(files.filter((f) => !shipped.test(f))).toEqual([]);
  });

  it('passes publint (strict: warnings fail too)', () => {
    expect(run(bin('publint'), ['--strict', tarball])).toMatch(/All good/);
  });

  it('passes @arethetypeswrong/cli for node16 from ESM and CJS', () => {
    // cjs-resolves-to-esm is TypeScript's node16 model, which predates require(esm): Node
    // >= 20.19 require()s an ESM graph without top-level await, which the consumer test below
    // checks for real. Every other rule (false ESM/CJS, missing types, unexpected module
    // syntax, internal resolution errors) stays on: a problem exits non-zero and throws.
    run(bin('attw'), [tarball, '--profile', 'node16', '--ignore-rules', 'cjs-resolves-to-esm', '--format', 'ascii']);
  });

  it('installs into a consumer project that require()s and imports it (offline)', () => {
    const app = join(tmp, 'consumer');
    const nm = join(app, 'node_modules');
    mkdirSync(join(nm, 'sabre'), { recursive: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, dependencies: { sabre: `file:${tarball}` } }));
    // The install, offline: the tarball unpacked as npm would, and the package's production
    // dependencies (npm ls --omit=dev) linked from this repository's node_modules. sabre's own
    // files resolve imports only through the consumer's node_modules, so a dependency missing
    // from package.json fails here.
    run('tar', ['xzf', tarball, '-C', join(nm, 'sabre'), '--strip-components=1']);
    const prod = run('npm', ['ls', '--omit=dev', '--parseable', '--all']).split('\n').map((p) => relative(join(root, 'node_modules'), p.trim()));
    for (const rel of prod) {
      if (!rel || rel.startsWith('..') || rel.includes('node_modules') || rel === '') continue;
      mkdirSync(dirname(join(nm, rel)), { recursive: true });
      symlinkSync(join(root, 'node_modules', rel), join(nm, rel), 'dir');
    }
    const cjs = `
      const sabre = require('sabre');
      const { crc32c } = require('sabre/kernels');
      require('sabre/metrics');
      (async () => {
        const a = await sabre.openDevice({ transport: 'inproc' });
        const b = await sabre.openDevice({ transport: 'inproc' });
        const mk = (d) => { const pd = d.allocPd(); const cq = d.createCq({ depth: 8 });
          return { pd, cq, mr: pd.regMr(64, sabre.Access.LocalWrite | sabre.Access.RemoteWrite),
                   qp: pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 }) }; };
        const x = mk(a), y = mk(b);
        await Promise.all([x.qp.connect({ address: b.address, qpn: y.qp.qpn }), y.qp.connect({ address: a.address, qpn: x.qp.qpn })]);
        x.mr.buffer.set(new TextEncoder().encode('hello'));
        const wc = await x.qp.write({ sgList: [{ addr: x.mr.addr, length: 5, lkey: x.mr.lkey }], remoteAddr: y.mr.addr, rkey: y.mr.rkey });
        console.log(JSON.stringify({ status: sabre.wcStatusName(wc.status), got: new TextDecoder().decode(y.mr.buffer.subarray(0, 5)), crc: crc32c(new TextEncoder().encode('123456789')) }));
        await a.close(); await b.close();
      })().catch((e) => { console.error(e); process.exit(1); });`;
    const out = JSON.parse(run(process.execPath, ['-e', cjs], app)) as { status: string; got: string; crc: number };
    expect(out).toEqual({ status: 'Success', got: 'hello', crc: 0xe3069283 });
    const esm = `import { openDevice, ErrorCode } from 'sabre'; const d = await openDevice({ transport: 'udp' }); console.log(d.address.transport, ErrorCode.Closed); await d.close();`;
    expect(run(process.execPath, ['--input-type=module', '-e', esm], app).trim()).toBe('udp ERR_CLOSED');
  });
});
