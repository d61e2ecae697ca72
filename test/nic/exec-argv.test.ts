// A service started with V8 or per-process node flags (`node --max-old-space-size=…`, common in
// production; `--expose-gc`, `--stack-size`) opens devices with their NIC threads as any other:
// a Worker refuses those flags, and a NIC thread that inherited them did not start
// (ERR_WORKER_INVALID_EXEC_ARGV from openDevice). Runs the built package in a child process.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const DIST = pathToFileURL(join(import.meta.dirname, '../../dist/index.js')).href;
const SCRIPT = `
const { openDevice, Access, Opcode } = await import(${JSON.stringify(DIST)});
const out = [];
for (const transport of ['udp', 'tcp']) {
  const a = await openDevice({ transport, host: '127.0.0.1', port: 0 });
  const b = await openDevice({ transport, host: '127.0.0.1', port: 0 });
  const [pa, pb] = [a.allocPd(), b.allocPd()];
  const [ca, cb] = [a.createCq({ depth: 8 }), b.createCq({ depth: 8 })];
  const qa = pa.createQp({ type: 'rc', sendCq: ca, recvCq: ca, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
  const qb = pb.createQp({ type: 'rc', sendCq: cb, recvCq: cb, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
  await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);
  const src = pa.regMr(64, Access.LocalWrite);
  const dst = pb.regMr(64, Access.LocalWrite | Access.RemoteWrite);
  src.buffer.fill(7);
  const wc = await qa.post({ opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
  out.push([transport, a.workers, wc.status, dst.buffer.every((x) => x === 7)]);
  await a.close();
  await b.close();
}
console.log(JSON.stringify(out));
`;

function run(flags: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((resolve) => {
    // The default NIC thread is what is tested: not whatever SABRE_WORKERS this run was given.
    const env = { ...process.env };
    delete env['SABRE_WORKERS'];
    execFile(process.execPath, [...flags, '--input-type=module', '-e', SCRIPT], { timeout: 30_000, env }, (err, stdout, stderr) => {
      resolve({ stdout, stderr, code: err ? ((err as { code?: number }).code ?? 1) : 0 });
    });
  });
}

describe('NIC threads under node flags a Worker refuses', () => {
  it.each([
    [['--max-old-space-size=512']],
    [['--expose-gc', '--stack-size=2000', '--enable-source-maps']],
  ])('node %j: udp and tcp devices open with their NIC thread and move bytes', async (flags) => {
    const r = await run(flags);
    expect(r.stderr).not.toMatch(/ERR_WORKER_INVALID_EXEC_ARGV/);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual([['udp', 1, 0, true], ['tcp', 1, 0, true]]);
  }, 40_000);
});
