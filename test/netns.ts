// Two network namespaces joined by a veth pair, the link impaired with nftables (this kernel
// has no netem): 5% drop and ~1% corruption of one UDP payload byte in both directions, ~2%
// duplication of A's output, and reordering by sending ~3% of A's datagrams through a slow htb
// class when tc has htb. Shared by the fault tests that need real hosts; needs root, `ip` and
// `nft`. Traffic never leaves the namespaces created here; removeImpairedLinks() deletes them.
import { spawnSync } from 'node:child_process';

export interface ImpairedLink {
  NA: string;
  NB: string;
  IPA: string;
  IPB: string;
  /** Whether the htb reordering class could be set up. */
  reorder: boolean;
  /** The nftables ruleset as the kernel holds it (to check the rules were applied). */
  listRules(): string;
}

const created: string[] = [];

function has(cmd: string, args: string[]): boolean {
  try {
    return spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
  } catch {
    return false;
  }
}

/** Why namespaces cannot be built here, or undefined when they can. */
export function netnsUnavailable(): string | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root';
  if (!has('ip', ['-V'])) return '`ip` (iproute2) not found';
  if (!has('nft', ['--version'])) return '`nft` (nftables) not found';
  return undefined;
}

function sh(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr || r.error}`);
}

/**
 * Build one impaired link. `name` keeps concurrent test files apart (namespace and veth names);
 * `subnet` is the third octet of its 10.x.0.0/24.
 */
export function impairedLink(name: string, subnet: number): ImpairedLink {
  const tag = `${process.pid % 100000}`;
  const NA = `sabre${tag}${name}a`;
  const NB = `sabre${tag}${name}b`;
  const VA = `s${name}${tag}a`;
  const VB = `s${name}${tag}b`;
  const IPA = `10.${subnet}.0.1`;
  const IPB = `10.${subnet}.0.2`;
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
  // Both directions impaired inside namespace A: its output (A→B) and its input (B→A).
  // Corruption overwrites one byte 44 bytes into the UDP payload (@th,352 counts from the UDP
  // header), inside sabre's headers: the CRC32C trailer must catch it.
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
  const listRules = () =>
    spawnSync('ip', ['netns', 'exec', NA, 'nft', 'list', 'table', 'ip', 'sabre_impair'], { encoding: 'utf8' }).stdout;
  return { NA, NB, IPA, IPB, reorder, listRules };
}

/** Delete every namespace this process created (the veth pair goes with them). */
export function removeImpairedLinks(): void {
  for (const ns of created.splice(0)) spawnSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
}
