// Two network namespaces joined by a veth pair, impaired with nftables (this kernel has no
// netem): 5% drop, ~2% duplication, ~1% payload corruption, and reordering through a slow
// htb class when tc has it. One transport process in each
// namespace moves tens of MB both ways; every byte is compared. Needs root, `ip` and `nft`;
// skipped with the reason otherwise. Traffic never leaves the namespaces created here.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const CHILD = fileURLToPath(new URL('./peer-child.mjs', import.meta.url));
const tag = `${process.pid % 100000}`;
const NA = `sabre${tag}a`;
const NB = `sabre${tag}b`;
const VA = `sv${tag}a`;
const VB = `sv${tag}b`;
const IPA = '10.77.0.1';
const IPB = '10.77.0.2';

function has(cmd: string, args: string[]): boolean {
  try {
    return spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
  } catch {
    return false;
  }
}

function whyNot(): string | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root';
  if (!has('ip', ['-V'])) return '`ip` (iproute2) not found';
  if (!has('nft', ['--version'])) return '`nft` (nftables) not found';
  return undefined;
}

const reason = whyNot();
const created: string[] = [];

function sh(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr || r.error}`);
}

function setup(): { reorder: boolean } {
  for (const ns of [NA, NB]) {
    sh('ip', ['netns', 'add', ns]);
    created.push(ns);
    sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
  }
  sh('ip', ['link', 'add', VA, 'type', 'veth', 'peer', 'name', VB]);
  sh('ip', ['link', 'set', VA, 'netns', NA]);
  sh('ip', ['link', 'set', VB, 'netns', NB]);
  sh('ip', ['-n', NA, 'addr', 'add', `${IPA}/24`, 'dev', VA]);
  sh('ip', ['-n', NB, 'addr', 'add', `${IPB}/24`, 'dev', VB]);
  sh('ip', ['-n', NA, 'link', 'set', VA, 'up']);
  sh('ip', ['-n', NB, 'link', 'set', VB, 'up']);
  // Reordering: a slice of packets goes to a rate-limited priority band and falls behind.
  let reorder = false;
  try {
    // htb (prio/netem are not in this kernel): class 1:1 unlimited, class 1:3 at 10 Mbit/s;
    // nft sends ~3% of datagrams to 1:3 (skb priority = class id), where they fall behind.
    const tc = (...args: string[]) => sh('ip', ['netns', 'exec', NA, 'tc', ...args]);
    tc('qdisc', 'add', 'dev', VA, 'root', 'handle', '1:', 'htb', 'default', '1');
    tc('class', 'add', 'dev', VA, 'parent', '1:', 'classid', '1:1', 'htb', 'rate', '10gbit');
    tc('class', 'add', 'dev', VA, 'parent', '1:', 'classid', '1:3', 'htb', 'rate', '10mbit', 'ceil', '10mbit');
    reorder = true;
  } catch {
    reorder = false;
  }
  // Impair both directions inside namespace A: its output (A→B) and its input (B→A).
  const rules = (hook: string, prio: boolean) => `
    chain ${hook} {
      type filter hook ${hook} priority 0; policy accept;
      meta l4proto udp numgen random mod 1000 < 50 drop
      meta l4proto udp numgen random mod 1000 < 10 @th,352,8 set 0xa5
      ${hook === 'output' ? `meta l4proto udp numgen random mod 1000 < 20 dup to ${IPB} device ${VA}` : ''}
      ${prio ? 'meta l4proto udp numgen random mod 1000 < 30 meta priority set 1:3' : ''}
    }`;
  const ruleset = `table ip sabre_impair {${rules('output', reorder)}${rules('input', false)}\n}\n`;
  const r = spawnSync('ip', ['netns', 'exec', NA, 'nft', '-f', '-'], { input: ruleset, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`nft: ${r.stderr}`);
  return { reorder };
}

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
  for (const ns of created) spawnSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
});

describe('UDP transport between two network namespaces impaired by nftables', () => {
  if (reason !== undefined) {
    it.skip(`skipped: ${reason} (needs root, iproute2 and nftables to build two namespaces joined by veth)`, () => {});
    return;
  }

  it('5% drop + 2% dup + 1% corruption + reordering: 24 MB + 8 MB, every byte exact', async () => {
    const { reorder } = setup();
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
    const nft = spawnSync('ip', ['netns', 'exec', NA, 'nft', 'list', 'table', 'ip', 'sabre_impair'], { encoding: 'utf8' }).stdout;
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
