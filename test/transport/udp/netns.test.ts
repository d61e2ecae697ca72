// Two network namespaces joined by a veth pair, impaired with nftables (this kernel has no
// netem): 5% drop, ~2% duplication, ~1% payload corruption, and reordering through a slow
// htb class when tc has it. One transport process in each
// namespace moves tens of MB both ways; every byte is compared. Needs root, `ip` and `nft`;
// skipped with the reason otherwise. Traffic never leaves the namespaces created here.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { impairedLink, netnsUnavailable, removeImpairedLinks } from '../../netns.js';

const CHILD = fileURLToPath(new URL('./peer-child.mjs', import.meta.url));
const reason = netnsUnavailable();

interface Peer {
  proc: ChildProcess;
  msgs: Record<string, unknown>[];
  wait: (key: string, ms: number) => Promise<Record<string, unknown>>;
}

function start(ns: string, cfg: object): Peer {
  const proc = spawn('ip', ['netns', 'exec', ns, process.execPath, CHILD, JSON.stringify(cfg)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const msgs: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  createInterface({ input: proc.stdout! }).on('line', (l) => {
    msgs.push(JSON.parse(l));
    for (const w of waiters.splice(0)) w();
  });
  const wait = (key: string, ms: number) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${ns}: no ${key} in ${ms} ms; got ${JSON.stringify(msgs)}`)), ms);
      const check = () => {
        const m = msgs.find((x) => x[key] !== undefined || x.timeout !== undefined);
        if (m) {
          clearTimeout(timer);
          if (m.timeout !== undefined) reject(new Error(`${ns} timed out: ${JSON.stringify(m.timeout)}`));
          else resolve(m[key] as Record<string, unknown>);
        } else waiters.push(check);
      };
      check();
    });
  return { proc, msgs, wait };
}

const procs: ChildProcess[] = [];

afterAll(() => {
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
  removeImpairedLinks();
});

describe('UDP transport between two network namespaces impaired by nftables', () => {
  if (reason !== undefined) {
    it.skip(`skipped: ${reason} (needs root, iproute2 and nftables to build two namespaces joined by veth)`, () => {});
    return;
  }

  it('5% drop + 2% dup + 1% corruption + reordering: 24 MB + 8 MB, every byte exact', async () => {
    const { NA, NB, IPA, IPB, reorder, listRules } = impairedLink('t', 77);
    const AB = 24 << 20;
    const BA = 8 << 20;
    const maxMs = 170_000;
    const a = start(NA, { host: IPA, port: 4791, mtu: 1472, sendBytes: AB, expectBytes: BA, maxMs });
    const b = start(NB, { host: IPB, port: 4791, mtu: 1472, sendBytes: BA, expectBytes: AB, maxMs });
    procs.push(a.proc, b.proc);
    const addrA = await a.wait('ready', 20_000);
    const addrB = await b.wait('ready', 20_000);
    a.proc.stdin!.write(JSON.stringify({ peer: addrB }) + '\n');
    b.proc.stdin!.write(JSON.stringify({ peer: addrA }) + '\n');
    const [da, db] = await Promise.all([a.wait('done', maxMs), b.wait('done', maxMs)]);
    const nft = listRules();
    console.log(`netns transfer (reorder via tc: ${reorder}):`, JSON.stringify({ a: da, b: db }));
    for (const [mine, theirs] of [[da, db], [db, da]] as const) {
      expect(mine.failed).toBe(0);
      expect(mine.bad).toBe(0);
      expect(mine.dupes).toBe(0);
      expect(mine.acked).toBe(mine.sent);
      expect(mine.received).toBe(theirs.sent);
      expect(mine.bytesOk).toBe(theirs.sentBytes);
    }
    expect(da.sentBytes).toBeGreaterThanOrEqual(AB);
    expect(db.sentBytes).toBeGreaterThanOrEqual(BA);
    expect(nft).toContain('numgen random');
    for (const p of [a, b]) p.proc.stdin!.write(JSON.stringify({ close: true }) + '\n');
    await Promise.all([a, b].map((p) => new Promise((r) => (p.proc.exitCode !== null ? r(null) : p.proc.once('exit', r)))));
  }, 200_000);
});
