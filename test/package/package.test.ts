// The package as a user gets it: `npm pack` output, checked by publint and
// @arethetypeswrong/cli, then installed into temporary consumer projects (offline, see
// consumer.ts) and loaded with require() and import, with and without the optional peers. The
// global setup has already built dist/ and build/.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bin, installConsumer, pack, root, run, runFailing } from './consumer.js';

let tmp: string;
let tarball: string;
let files: string[];

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'sabre-pack-'));
  ({ tarball, files } = pack(tmp));
}, 90_000);

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('ships what a user needs and nothing else', () => {
    for (const f of ['LICENSE', 'README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'dist/cli/sabre.bundle.cjs', 'dist/cli/sabre.bundle.cjs.cache', 'dist/nic/thread.bundle.cjs', 'dist/nic/thread.bundle.cjs.cache', 'dist/dataplane/worker-main.js', 'build/sabre.wasm', 'build/sabre.js', 'build/sabre.d.ts', 'docs/design.md', 'docs/errors.md']) {
      expect(files, f).toContain(f);
    }
    const unwanted = files.filter((f) => f.startsWith('assembly/') || f.startsWith('src/') || f.startsWith('test/') || f.endsWith('.map') || f.endsWith('.tmpl') || f.endsWith('.wat'));
    expect(unwanted).toEqual([]);
    // Everything else is the compiled library, the WASM module and its loader, and the docs: a
    // file count would only track how many modules src/ has, so the shape is checked instead.
    const shipped = /^(dist\/.+\.(js|d\.ts)|dist\/(cli\/sabre|nic\/thread)\.bundle\.cjs(\.cache)?|dist\/cjs\/package\.json|build\/sabre\.(wasm|js|d\.ts)|docs\/[^/]+\.md|README\.md|LICENSE|package\.json)$/;
    expect(files.filter((f) => !shipped.test(f))).toEqual([]);
  });

  it('passes publint (strict: warnings fail too)', () => {
    expect(run(bin('publint'), ['--strict', tarball])).toMatch(/All good/);
  });

  it('passes @arethetypeswrong/cli in every resolution mode (node10, node16 from CJS and ESM, bundler)', () => {
    // No rule ignored: CommonJS consumers get dist/cjs/ (a require(esm) wrapper and CommonJS
    // declarations), so TypeScript's node16 model agrees with what Node does. A problem exits
    // non-zero and throws.
    const out = run(bin('attw'), [tarball, '--format', 'ascii']);
    expect(out).toMatch(/No problems found/);
  });

  it('installs into a consumer project that require()s and imports it (offline)', () => {
    const app = installConsumer(join(tmp, 'consumer'), tarball, { extra: ['prom-client', 'uplot'] });
    smoke(process.execPath, app);
    // SABRE_NODE_FLOOR=/path/to/node (the oldest Node that package.json's engines admits) runs
    // the same programs under it: require(esm) without a flag is what sets the floor.
    if (process.env.SABRE_NODE_FLOOR) smoke(process.env.SABRE_NODE_FLOOR, app);
    // With the optional peers present, sabre/metrics loads from both module systems.
    const metrics = `const { SabreMetrics } = require('sabre/metrics'); new SabreMetrics({ defaultMetrics: false }).metrics().then((t) => console.log(t.includes('sabre_perf_bandwidth_bytes_per_second')));`;
    expect(run(process.execPath, ['-e', metrics], app).trim()).toBe('true');
    expect(run(process.execPath, ['--input-type=module', '-e', `import { SabreMetrics } from 'sabre/metrics'; console.log(typeof SabreMetrics);`], app).trim()).toBe('function');
    expect(run(process.execPath, ['-p', `require.resolve('sabre/package.json').endsWith('sabre/package.json')`], app).trim()).toBe('true');
  });

  it('works without the optional peers: sabre and sabre/kernels load, sabre/metrics says what it needs', () => {
    const app = installConsumer(join(tmp, 'bare'), tarball);
    smoke(process.execPath, app);
    const probe = `try { require('sabre/metrics'); console.log('loaded'); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`;
    expect(JSON.parse(run(process.execPath, ['-e', probe], app))).toEqual({ code: 'ERR_NOT_SUPPORTED', message: 'sabre/metrics needs prom-client: npm install prom-client' });
    const esm = `import('sabre/metrics').then(() => console.log('loaded'), (e) => console.log(e.message));`;
    expect(run(process.execPath, ['--input-type=module', '-e', esm], app).trim()).toBe('sabre/metrics needs prom-client: npm install prom-client');
  });

  it('the CLI runs without the optional peers and names the one a flag needs', () => {
    const app = installConsumer(join(tmp, 'bare-cli'), tarball);
    const cli = join(app, 'node_modules/sabre/dist/cli/main.js');
    const perf = ['perf', 'write_bw', '--transport', 'inproc', '-s', '64', '-n', '20', '--json'];
    const report = JSON.parse(run(process.execPath, [cli, ...perf], app)) as { test?: string };
    expect(report.test).toBe('write_bw');
    const noProm = runFailing(process.execPath, [cli, ...perf, '--metrics-port', '0'], app);
    expect(noProm.status).toBe(1);
    expect(noProm.stderr).toContain('--metrics-port needs prom-client (an optional dependency of sabre): npm install prom-client');
    const noUplot = runFailing(process.execPath, [cli, ...perf, '--report', join(app, 'r.html')], app);
    expect(noUplot.status).toBe(1);
    expect(noUplot.stderr).toContain('--report needs uplot (an optional dependency of sabre): npm install uplot');
  });

  it('the bin runs the linked command (dist/cli/sabre.bundle.cjs, with its code cache), which finds the files beside its modules', () => {
    const app = installConsumer(join(tmp, 'bundle-cli'), tarball);
    const cli = join(app, 'node_modules/sabre/dist/cli/main.js');
    // The stack of an operational error (SABRE_DEBUG=1) names the file the command ran from.
    const noProm = runFailing(process.execPath, [cli, 'perf', 'write_bw', '--transport', 'inproc', '--metrics-port', '0'], app, { ...process.env, SABRE_DEBUG: '1' });
    expect(noProm.status).toBe(1);
    // Run from its code cache, whose frames name the bundle by its path in the package (docs/nic.md).
    expect(noProm.stderr).toMatch(/\(sabre\/dist\/cli\/sabre\.bundle\.cjs:\d+:\d+\)/);
    expect(run(process.execPath, [cli, '--version'], app).trim()).toBe(`sabre ${(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version} (node ${process.versions.node})`);
    // perf over udp forks the bin as its server, and both open devices on NIC threads (their
    // script, build/sabre.wasm); stress runs its piscina worker script.
    const perf = JSON.parse(run(process.execPath, [cli, 'perf', 'write_bw', '--transport', 'udp', '-s', '4096', '-n', '20', '--workers', '1', '--json'], app)) as { workers: number; results: { iterations: number }[] };
    expect([perf.workers, perf.results[0]!.iterations]).toEqual([1, 20]);
    const stress = JSON.parse(run(process.execPath, [cli, 'stress', '--workers', '1', '--qps', '1', '--duration', '20', '--ops', '20', '--max-size', '4096', '--transport', 'inproc', '--json'], app)) as { ops: number; errors: number };
    expect([stress.ops, stress.errors]).toEqual([20, 0]);
  });
});

/** require() and import of the installed package, one inproc RDMA WRITE and one udp device. */
function smoke(node: string, app: string): void {
  const cjs = `
    const sabre = require('sabre');
    const { crc32c } = require('sabre/kernels');
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
  const out = JSON.parse(run(node, ['-e', cjs], app)) as { status: string; got: string; crc: number };
  expect(out).toEqual({ status: 'Success', got: 'hello', crc: 0xe3069283 });
  const esm = `import { openDevice, ErrorCode } from 'sabre'; import { crc32c } from 'sabre/kernels'; const d = await openDevice({ transport: 'udp' }); console.log(d.address.transport, ErrorCode.Closed, typeof crc32c); await d.close();`;
  expect(run(node, ['--input-type=module', '-e', esm], app).trim()).toBe('udp ERR_CLOSED function');
}
