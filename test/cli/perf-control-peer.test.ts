// `sabre perf` pointed at a control port whose peer is not a working sabre perf server: one that
// takes the connection and the hello and never answers, or answers with results that are not
// what the call returns. The client used to wait for good (no deadline on a control call after
// connect) and to take the hello as a SideInfo unchecked (a TypeError for its message). Now
// each call has a deadline (CALL_TIMEOUT_MS, 15 s; finish: the run's length and a margin) and
// the answers are checked: one line, exit 1, in time. Both CLI cases failed before the fix.
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { closeNet } from '../net-fixture.js';
import { checkCpu, checkFinishRow, checkHello } from '../../src/cli/perf/answers.js';
import { sabreBg } from './helpers.js';

const WINDOW_MS = 25_000;

/** A control peer answering each JSON line with `answer(msg)` (undefined: silence), closed when the test finishes. */
async function peer(answer: (m: { id: number; method: string }) => unknown, onTestFinished: (f: () => Promise<void>) => void): Promise<number> {
  const socks: Socket[] = [];
  const server: Server = createServer((s) => {
    socks.push(s);
    let buf = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      buf += d;
      let nl: number;
      // Bounded: one line per hello the client sends.
      while ((nl = buf.indexOf('\n')) >= 0) {
        const m = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        const a = answer(m);
        if (a !== undefined) s.write(JSON.stringify(a) + '\n');
      }
    });
    s.on('error', () => {});
  });
  onTestFinished(() => closeNet(socks, server));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

async function run(args: string[]): Promise<{ code: number | null | 'hung'; stderr: string; ms: number }> {
  const t0 = performance.now();
  const c = sabreBg(args);
  let hung = false;
  const t = setTimeout(() => {
    hung = true;
    c.child.kill('SIGKILL');
  }, WINDOW_MS);
  const code = await c.exited;
  clearTimeout(t);
  return { code: hung ? 'hung' : code, stderr: c.err(), ms: performance.now() - t0 };
}

const perfTo = (port: number): string[] => ['perf', 'write_bw', '127.0.0.1', '-p', String(port), '-n', '10', '--transport', 'tcp'];

// At once (each case has its own peer): the first is the client's 15 s deadline.
describe.concurrent('sabre perf against a control peer that is not a working perf server', () => {
  it('a peer that never answers the hello: one line naming the call, exit 1, after the 15 s deadline', async ({ expect, onTestFinished }) => {
    const port = await peer(() => undefined, onTestFinished);
    const r = await run(perfTo(port));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/did not answer 'hello' within 15 s/);
  }, 40_000);

  for (const [label, result] of [['null', null], ['a number', 7], ['a SideInfo with no QPs', { address: {}, qps: [], rkey: 1, vaddr: 0, length: 64, slotBytes: 64, slots: 1 }]] as const) {
    it(`a hello answered with ${label}: "the perf server's hello is malformed", exit 1 (not a TypeError)`, async ({ expect, onTestFinished }) => {
      const port = await peer((m) => ({ id: m.id, result }), onTestFinished);
      const r = await run(perfTo(port));
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/the perf server's hello is malformed/);
      expect(r.stderr).not.toMatch(/Cannot read properties|is not a function|undefined/);
    }, 40_000);
  }
});

describe('the answers the client checks', () => {
  const side = { address: { transport: 'tcp', host: '127.0.0.1', port: 1 }, qps: [{ qpn: 1, psn: 2 }], rkey: 3, vaddr: 0, length: 4096, slotBytes: 64, slots: 64 };
  it('hello: a SideInfo with one {qpn, psn} per QP asked for', () => {
    expect(checkHello(side, 1)).toBe(side);
    expect(() => checkHello(side, 2)).toThrow("the perf server's hello is malformed");
    expect(() => checkHello({ ...side, rkey: '3' }, 1)).toThrow(/malformed/);
    expect(() => checkHello({ ...side, qps: [null] }, 1)).toThrow(/malformed/);
    expect(() => checkHello({ ...side, address: null }, 1)).toThrow(/malformed/);
  });
  it('finish: null or a bw row with numbers', () => {
    const row = { kind: 'bw', source: 'sabre', size: 8, iterations: 10, seconds: 1, bwPeakMiBs: 1, bwAvgMiBs: 1, bwPeakGbs: 1, bwAvgGbs: 1, msgRateMpps: 1 };
    expect(checkFinishRow(null)).toBeNull();
    expect(checkFinishRow(row)).toBe(row);
    expect(() => checkFinishRow({ ...row, bwAvgMiBs: 'lots' })).toThrow("the perf server's finish row is malformed");
    expect(() => checkFinishRow(undefined)).toThrow(/malformed/);
    expect(() => checkFinishRow({ ...row, kind: 'lat' })).toThrow(/malformed/);
  });
  it('cpu: {user, system} in microseconds', () => {
    expect(checkCpu({ user: 1, system: 2 })).toEqual({ user: 1, system: 2 });
    expect(() => checkCpu(null)).toThrow("the perf server's cpu answer is malformed");
    expect(() => checkCpu({ user: -1, system: 2 })).toThrow(/malformed/);
  });
});
